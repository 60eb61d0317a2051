package packaging

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ovnbgp/ovnbgp/config"
)

// The MachineConfigs: Butane source -> the role whose pool they target.
var machineConfigs = map[string]string{
	"machineconfig/99-worker-ovnbgp.bu": "worker",
	"machineconfig/99-bgp-ovnbgp.bu":    "bgp",
}

// What every MachineConfig installs: the path on the node -> the file of
// this directory it must carry byte for byte, and its mode.
var machineConfigFiles = map[string]struct {
	src  string
	mode int
}{
	"/usr/local/libexec/ovnbgp-install":     {"machineconfig/ovnbgp-install", 0o755},
	"/etc/ovnbgp/config.yaml":               {"machineconfig/config.yaml", 0o600},
	"/etc/tmpfiles.d/ovnbgp.conf":           {tmpfilesFile, 0o644},
	"/etc/iproute2/rt_protos.d/ovnbgp.conf": {"rt_protos.d/ovnbgp.conf", 0o644},
}

// goCommand is the go command that runs this test: the pinned tools
// (Butane, nfpm) run with `go -C ../tools tool`.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command on PATH nor in GOROOT (%v): the pinned tools in tools/ run with go tool", err)
	}
	return p
}

// butane renders the Butane file bu (absolute) with --files-dir dir, with
// the Butane version pinned in tools/go.mod (built on first use).
func butane(t *testing.T, dir, bu string) ([]byte, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := exec.Command(goCommand(t), "-C", "../tools", "tool", "github.com/coreos/butane/internal", "--strict", "--files-dir", dir, bu)
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		return nil, &toolError{err, errOut.String()}
	}
	return out.Bytes(), nil
}

type toolError struct {
	err    error
	stderr string
}

func (e *toolError) Error() string { return e.err.Error() + ": " + e.stderr }

// TestMachineConfigRendered renders every Butane source with the pinned
// Butane and compares the result with the committed MachineConfig YAML
// beside it: they drift when someone edits one without `make
// machineconfig`, or edits a file the source pulls in (the unit, the
// tmpfiles entry, the config...). It also proves that the comparison
// catches a drift: a changed source renders to something else.
func TestMachineConfigRendered(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for bu := range machineConfigs {
		t.Run(filepath.Base(bu), func(t *testing.T) {
			yamlFile := strings.TrimSuffix(bu, ".bu") + ".yaml"
			want, err := os.ReadFile(yamlFile)
			if err != nil {
				t.Fatalf("%v: run make machineconfig", err)
			}
			got, err := butane(t, dir, filepath.Join(dir, bu))
			if err != nil {
				t.Fatalf("butane %s: %v", bu, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is not %s rendered by Butane: run make machineconfig and commit both\n%s", yamlFile, bu, firstDiff(string(want), string(got)))
			}

			// The mutation: the same source with another pool's role, in a
			// copy of this directory, must not render to the committed YAML.
			src, err := os.ReadFile(bu)
			if err != nil {
				t.Fatal(err)
			}
			mutated := bytes.Replace(src, []byte("role: "+machineConfigs[bu]), []byte("role: mutated"), 1)
			if bytes.Equal(mutated, src) {
				t.Fatalf("%s has no line role: %s", bu, machineConfigs[bu])
			}
			m := filepath.Join(t.TempDir(), "mutated.bu")
			if err := os.WriteFile(m, mutated, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err = butane(t, dir, m)
			if err != nil {
				t.Fatalf("butane (mutated) %s: %v", bu, err)
			}
			if bytes.Equal(got, want) {
				t.Fatalf("a changed %s still renders to %s: the comparison cannot see drift", bu, yamlFile)
			}
		})
	}
}

// firstDiff names the first line where two texts differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("first difference at line %d:\n  committed: %q\n  rendered:  %q", i+1, w, g)
		}
	}
	return ""
}

// machineConfig is the part of a rendered MachineConfig the tests read.
type machineConfig struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Config struct {
			Storage struct {
				Files []struct {
					Path     string `yaml:"path"`
					Mode     int    `yaml:"mode"`
					Contents struct {
						Compression string `yaml:"compression"`
						Source      string `yaml:"source"`
					} `yaml:"contents"`
				} `yaml:"files"`
			} `yaml:"storage"`
			Systemd struct {
				Units []struct {
					Name     string `yaml:"name"`
					Enabled  *bool  `yaml:"enabled"`
					Contents string `yaml:"contents"`
					Dropins  []struct {
						Name     string `yaml:"name"`
						Contents string `yaml:"contents"`
					} `yaml:"dropins"`
				} `yaml:"units"`
			} `yaml:"systemd"`
		} `yaml:"config"`
	} `yaml:"spec"`
}

// dataURL decodes an Ignition data URL (RFC 2397), gunzipping it when the
// file says so.
func dataURL(t *testing.T, source, compression string) []byte {
	t.Helper()
	rest, ok := strings.CutPrefix(source, "data:")
	if !ok {
		t.Fatalf("file source %.40q is not a data URL: the MachineConfig would fetch it from elsewhere", source)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		t.Fatalf("data URL %.40q has no comma", source)
	}
	var b []byte
	if strings.HasSuffix(meta, ";base64") {
		var err error
		if b, err = base64.StdEncoding.DecodeString(data); err != nil {
			t.Fatalf("data URL: %v", err)
		}
	} else {
		s, err := url.PathUnescape(data)
		if err != nil {
			t.Fatalf("data URL: %v", err)
		}
		b = []byte(s)
	}
	switch compression {
	case "":
		return b
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		return out
	}
	t.Fatalf("unknown compression %q", compression)
	return nil
}

func readMachineConfig(t *testing.T, bu string) machineConfig {
	t.Helper()
	b, err := os.ReadFile(strings.TrimSuffix(bu, ".bu") + ".yaml")
	if err != nil {
		t.Fatalf("%v: run make machineconfig", err)
	}
	var mc machineConfig
	if err := yaml.Unmarshal(b, &mc); err != nil {
		t.Fatalf("%s: %v", bu, err)
	}
	return mc
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var pinnedImage = regexp.MustCompile(`(?m)^Environment=OVNBGP_IMAGE=[^@\s]+@sha256:[0-9a-f]{64}$`)

// TestMachineConfigCarriesPackagingFiles reads each committed MachineConfig
// and checks that it installs exactly the files and units of this
// directory, byte for byte (one source of truth: the hardened unit and the
// tmpfiles entry are the ones the other tests check), with their modes; the
// daemon's unit enabled and requiring the install unit, the image pinned by
// digest; the role label of its pool. Both MachineConfigs install the same.
func TestMachineConfigCarriesPackagingFiles(t *testing.T) {
	var specs []string
	for bu, role := range machineConfigs {
		mc := readMachineConfig(t, bu)
		if mc.Kind != "MachineConfig" {
			t.Errorf("%s: kind %q", bu, mc.Kind)
		}
		if got := mc.Metadata.Labels["machineconfiguration.openshift.io/role"]; got != role {
			t.Errorf("%s: role label %q, want %q", bu, got, role)
		}
		if want := "99-" + role + "-ovnbgp"; mc.Metadata.Name != want {
			t.Errorf("%s: name %q, want %q", bu, mc.Metadata.Name, want)
		}

		files := map[string]bool{}
		for _, f := range mc.Spec.Config.Storage.Files {
			files[f.Path] = true
			want, ok := machineConfigFiles[f.Path]
			if !ok {
				t.Errorf("%s installs %s, which no test knows: add it to machineConfigFiles", bu, f.Path)
				continue
			}
			if got := dataURL(t, f.Contents.Source, f.Contents.Compression); string(got) != mustRead(t, want.src) {
				t.Errorf("%s: %s is not %s byte for byte: run make machineconfig", bu, f.Path, want.src)
			}
			if f.Mode != want.mode {
				t.Errorf("%s: %s has mode %04o, want %04o", bu, f.Path, f.Mode, want.mode)
			}
		}
		for p := range machineConfigFiles {
			if !files[p] {
				t.Errorf("%s does not install %s", bu, p)
			}
		}

		units := map[string]bool{}
		for _, u := range mc.Spec.Config.Systemd.Units {
			units[u.Name] = true
			dropins := map[string]string{}
			for _, d := range u.Dropins {
				dropins[d.Name] = d.Contents
			}
			switch u.Name {
			case "ovnbgp.service":
				if u.Contents != mustRead(t, unitFile) {
					t.Errorf("%s: ovnbgp.service is not %s byte for byte: run make machineconfig", bu, unitFile)
				}
				if u.Enabled == nil || !*u.Enabled {
					t.Errorf("%s: ovnbgp.service is not enabled", bu)
				}
				if len(dropins) != 1 || dropins["10-install.conf"] != mustRead(t, "machineconfig/ovnbgp.service.d/10-install.conf") {
					t.Errorf("%s: ovnbgp.service's drop-ins %v are not machineconfig/ovnbgp.service.d/10-install.conf", bu, slices.Sorted(maps.Keys(dropins)))
				}
			case "ovnbgp-install.service":
				if u.Contents != mustRead(t, "machineconfig/ovnbgp-install.service") {
					t.Errorf("%s: ovnbgp-install.service is not machineconfig/ovnbgp-install.service byte for byte: run make machineconfig", bu)
				}
				if len(dropins) != 1 || !pinnedImage.MatchString(dropins["10-image.conf"]) {
					t.Errorf("%s: ovnbgp-install.service needs exactly the drop-in 10-image.conf with Environment=OVNBGP_IMAGE=NAME@sha256:<64 hex>, has %q", bu, dropins)
				}
			default:
				t.Errorf("%s installs unit %s, which no test knows", bu, u.Name)
			}
		}
		for _, u := range []string{"ovnbgp.service", "ovnbgp-install.service"} {
			if !units[u] {
				t.Errorf("%s does not install %s", bu, u)
			}
		}

		// Both MachineConfigs install the same; only the name and role differ.
		mc.Metadata.Name, mc.Metadata.Labels = "", nil
		b, err := yaml.Marshal(mc)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, string(b))
	}
	if len(specs) == 2 && specs[0] != specs[1] {
		t.Errorf("the worker and bgp MachineConfigs install different files or units:\n%s", firstDiff(specs[0], specs[1]))
	}

	// Where the unit runs the binary is where ovnbgp-install puts it.
	u := loadUnit(t)
	exec := strings.Fields(firstOf(u["Service"]["ExecStart"]))
	if len(exec) == 0 || !strings.Contains(mustRead(t, "machineconfig/ovnbgp-install"), "dest=${OVNBGP_BINARY:-"+exec[0]+"}") {
		t.Errorf("ovnbgp-install does not install the binary at %q, where the unit runs it", exec)
	}
}

// TestMachineConfigPool checks the custom pool: it selects the worker and
// bgp MachineConfigs and the nodes labelled with the bgp role, which is
// the role of 99-bgp-ovnbgp.
func TestMachineConfigPool(t *testing.T) {
	var pool struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			MachineConfigSelector struct {
				MatchExpressions []struct {
					Key      string   `yaml:"key"`
					Operator string   `yaml:"operator"`
					Values   []string `yaml:"values"`
				} `yaml:"matchExpressions"`
			} `yaml:"machineConfigSelector"`
			NodeSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"nodeSelector"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(mustRead(t, "machineconfig/machineconfigpool-bgp.yaml")), &pool); err != nil {
		t.Fatal(err)
	}
	role := machineConfigs["machineconfig/99-bgp-ovnbgp.bu"]
	if pool.Kind != "MachineConfigPool" || pool.Metadata.Name != role {
		t.Errorf("machineconfigpool-bgp.yaml: kind %q name %q, want MachineConfigPool %q", pool.Kind, pool.Metadata.Name, role)
	}
	ex := pool.Spec.MachineConfigSelector.MatchExpressions
	if len(ex) != 1 || ex[0].Key != "machineconfiguration.openshift.io/role" || ex[0].Operator != "In" ||
		!slices.Contains(ex[0].Values, "worker") || !slices.Contains(ex[0].Values, role) {
		t.Errorf("machineconfigpool-bgp.yaml selects %+v, want role In [worker %s]", ex, role)
	}
	if v, ok := pool.Spec.NodeSelector.MatchLabels["node-role.kubernetes.io/"+role]; !ok || v != "" {
		t.Errorf("machineconfigpool-bgp.yaml selects nodes %v, want node-role.kubernetes.io/%s", pool.Spec.NodeSelector.MatchLabels, role)
	}
}

// TestMachineConfigConfigValid: the config the MachineConfigs install
// passes ovnbgp's own validation.
func TestMachineConfigConfigValid(t *testing.T) {
	c, err := config.Load("machineconfig/config.yaml")
	if err != nil {
		t.Fatalf("machineconfig/config.yaml: %v", err)
	}
	// OpenShift 4.14 and later: the node's NB socket on the host is the
	// interconnect one (ovnkube-node's run-ovn volume, /var/run/ovn-ic),
	// the first of the sockets looked for when ovn.northbound is unset.
	if want := "unix:" + config.DefaultNorthboundSockets()[0]; c.OVN.Northbound != want || want != "unix:/var/run/ovn-ic/ovnnb_db.sock" {
		t.Errorf("machineconfig/config.yaml: ovn.northbound = %q, want %s (OpenShift's interconnect socket)", c.OVN.Northbound, want)
	}
}
