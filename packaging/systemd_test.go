package packaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/test/prereq"
)

const (
	unitFile     = "systemd/ovnbgp.service"
	tmpfilesFile = "tmpfiles.d/ovnbgp.conf"
	// maxExposure is `systemd-analyze security --threshold`: the overall
	// exposure times ten (systemd 252 fails when the score is above it).
	// 20 is the goal of issue 8, 2.0, better than systemd-networkd's 2.8.
	maxExposure = "20"
)

// acceptedExposures are the checks of `systemd-analyze security` the unit
// fails on purpose, by the check's name, with the reason. Any other failing
// check means a hardening line was lost or weakened: the test names it.
var acceptedExposures = map[string]string{
	"RootDirectory=/RootImage=":                                   "a static binary on the host (on RHCOS copied out of its OCI image, docs/operations.md): RootImage= needs a disk image, and the daemon reads only /etc/ovnbgp and the NB socket",
	"User=/DynamicUser=":                                          "uid 0: the OVN NB socket is root's; only three capabilities are kept",
	"PrivateUsers=":                                               "the capabilities must hold in the host's user namespace (routes, port 179)",
	"PrivateNetwork=":                                             "BGP sessions and kernel routes are in the host's network namespace",
	"IPAddressDeny=":                                              "peers, a remote NB and metrics scrapers can be anywhere",
	"RestrictAddressFamilies=~AF_(INET|INET6)":                    "BGP, BFD, metrics, a tcp:/ssl: NB",
	"RestrictAddressFamilies=~AF_UNIX":                            "the NB and control sockets, sd_notify",
	"RestrictAddressFamilies=~AF_NETLINK":                         "kernel routes, rules and VRFs; interface addresses",
	"CapabilityBoundingSet=~CAP_NET_ADMIN":                        "kernel import target (netlink route/rule/VRF writes)",
	"CapabilityBoundingSet=~CAP_NET_(BIND_SERVICE|BROADCAST|RAW)": "port 179; SO_BINDTODEVICE for peers with an interface",
	"DeviceAllow=":                                                "ProtectClock= itself allows char-rtc read-only",
}

// systemdTool returns the path of a systemd tool. Missing, the test skips,
// except under CI=true, where scripts/test-deps.sh (make test) installs the
// systemd package and a missing tool is a failure.
func systemdTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " not found: install the systemd package (scripts/test-deps.sh does, as root)"
	prereq.Missing(t, msg)
	return ""
}

// run runs a command and returns its stdout and stderr apart.
func run(t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// parseWarnings are systemd's complaints about lines of file: an unknown
// key, a value it cannot parse. systemd ignores such a line and goes on (exit
// status 0), so a typo silently drops a protection: every one is a failure.
func parseWarnings(output, file string) []string {
	var w []string
	for _, l := range strings.Split(output, "\n") {
		if strings.Contains(l, filepath.Base(file)+":") {
			w = append(w, l)
		}
	}
	return w
}

// TestUnitSecurityExposure runs `systemd-analyze security --offline=yes` on
// the shipped unit: the overall exposure must be at most 2.0, systemd must
// accept every line, and the only failing checks are the accepted ones.
func TestUnitSecurityExposure(t *testing.T) {
	sa := systemdTool(t, "systemd-analyze")
	path, err := filepath.Abs(unitFile)
	if err != nil {
		t.Fatal(err)
	}

	out, errOut, err := run(t, sa, "security", "--offline=yes", "--no-pager", "--threshold="+maxExposure, path)
	if w := parseWarnings(errOut, path); len(w) > 0 {
		t.Errorf("systemd ignores lines of %s:\n%s", unitFile, strings.Join(w, "\n"))
	}
	score := regexp.MustCompile(`Overall exposure level for \S+: (\S+ \S+)`).FindStringSubmatch(out)
	if score == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure (err %v):\n%s\n%s", err, out, errOut)
	}
	t.Logf("exposure: %s", score[1])
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Errorf("exposure %s is above %s/10 (the goal is <= 2.0):\n%s", score[1], maxExposure, out)
	case err != nil:
		t.Fatalf("systemd-analyze security: %v\n%s", err, errOut)
	}

	js, errOut, err := run(t, sa, "security", "--offline=yes", "--json=short", path)
	if err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, errOut)
	}
	var checks []struct {
		Set         *bool   `json:"set"`
		Name        string  `json:"name"`
		Description string  `json:"description"`
		Exposure    *string `json:"exposure"`
	}
	if err := json.Unmarshal([]byte(js), &checks); err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, js)
	}
	if len(checks) < 50 {
		t.Fatalf("systemd-analyze security --json reported only %d checks:\n%s", len(checks), js)
	}
	seen := map[string]bool{}
	for _, c := range checks {
		if c.Set == nil || *c.Set {
			continue
		}
		seen[c.Name] = true
		if _, ok := acceptedExposures[c.Name]; !ok {
			exp := "?"
			if c.Exposure != nil {
				exp = *c.Exposure
			}
			t.Errorf("%s exposes the host: %s (exposure %s): restore the hardening line, or add it to acceptedExposures with the reason", c.Name, c.Description, exp)
		}
	}
	for name := range acceptedExposures {
		if !seen[name] {
			t.Logf("accepted exposure %s no longer reported: remove it from acceptedExposures", name)
		}
	}
}

// TestUnitVerify runs `systemd-analyze verify` on the unit: every key is
// known, every value parses, every dependency exists. ExecStart's binary is
// pointed at a stand-in: verify checks that the command exists here.
func TestUnitVerify(t *testing.T) {
	sa := systemdTool(t, "systemd-analyze")
	src, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ovnbgp")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte("ExecStart=/usr/local/bin/ovnbgp ")) {
		t.Fatalf("%s: ExecStart does not run /usr/local/bin/ovnbgp", unitFile)
	}
	path := filepath.Join(dir, "ovnbgp.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(src, []byte("/usr/local/bin/ovnbgp"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, sa, "verify", "--man=no", path)
	if err != nil {
		t.Errorf("systemd-analyze verify %s: %v\n%s%s", unitFile, err, out, errOut)
	}
	if w := parseWarnings(out+errOut, path); len(w) > 0 {
		t.Errorf("systemd-analyze verify %s:\n%s", unitFile, strings.Join(w, "\n"))
	}
}

// loadUnit reads the unit into section -> key -> values (a key given twice
// has two values; an empty assignment resets the list, as systemd does).
func loadUnit(t *testing.T) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatalf("%s: %v", unitFile, err)
	}
	u := map[string]map[string][]string{}
	for _, o := range opts {
		if u[o.Section] == nil {
			u[o.Section] = map[string][]string{}
		}
		if o.Value == "" {
			u[o.Section][o.Name] = nil
			continue
		}
		u[o.Section][o.Name] = append(u[o.Section][o.Name], o.Value)
	}
	return u
}

// TestUnitContract checks what systemd-analyze does not score: how the unit
// runs and restarts the daemon, the exact capability and address-family
// sets, and that its directories are the daemon's defaults.
func TestUnitContract(t *testing.T) {
	u := loadUnit(t)
	want := []struct{ section, key, value string }{
		{"Unit", "StartLimitIntervalSec", "300"},
		{"Unit", "StartLimitBurst", "5"},
		{"Service", "Type", "notify"},
		{"Service", "NotifyAccess", "main"},
		{"Service", "WatchdogSec", "60"},
		{"Service", "Restart", "on-failure"},
		{"Service", "ExecReload", "/bin/kill -HUP $MAINPID"},
		{"Service", "CapabilityBoundingSet", "CAP_NET_ADMIN CAP_NET_BIND_SERVICE CAP_NET_RAW"},
		{"Service", "RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6 AF_NETLINK"},
		{"Service", "SystemCallFilter", "@system-service"},
		{"Service", "SystemCallFilter", "~@privileged @resources"},
		{"Service", "SystemCallErrorNumber", "EPERM"},
		{"Service", "UMask", "0077"},
		{"Service", "NoNewPrivileges", "yes"},
		{"Service", "MemoryDenyWriteExecute", "yes"},
		{"Service", "ProtectProc", "invisible"},
		{"Service", "ProcSubset", "pid"},
		{"Service", "RuntimeDirectoryPreserve", "yes"},
		// Not scored by systemd-analyze, but hardening all the same:
		{"Service", "KeyringMode", "private"},
		{"Service", "DevicePolicy", "closed"},
		{"Service", "RemoveIPC", "yes"}, // for a User= drop-in
		// Sets the limit the Go runtime would raise with setrlimit,
		// which the filter (~@resources) denies.
		{"Service", "LimitNOFILE", "65536"},
		{"Service", "StateDirectoryMode", "0700"},
	}
	for _, w := range want {
		if got := u[w.section][w.key]; !slices.Contains(got, w.value) {
			t.Errorf("[%s] %s=%s missing (have %q)", w.section, w.key, w.value, got)
		}
	}
	if got := u["Service"]["AmbientCapabilities"]; len(got) > 0 {
		t.Errorf("AmbientCapabilities=%q: the daemon runs as root, whose capabilities are the bounding set", got)
	}
	if got := u["Service"]["User"]; len(got) > 0 {
		t.Errorf("User=%q: the OVN NB socket is root's (see the unit's comment)", got)
	}

	// The directories systemd makes are the ones the daemon uses by default.
	if got := u["Service"]["RuntimeDirectory"]; len(got) != 1 || "/run/"+got[0] != filepath.Dir(config.DefaultControlSocket) {
		t.Errorf("RuntimeDirectory=%q, but control.socket defaults to %s", got, config.DefaultControlSocket)
	}
	if got := u["Service"]["StateDirectory"]; len(got) != 1 || "/var/lib/"+got[0] != config.DefaultStateDir {
		t.Errorf("StateDirectory=%q, but stateDir defaults to %s", got, config.DefaultStateDir)
	}
	// The NB sockets looked for while ovn.northbound is unset stay reachable
	// as they come and go: no path option names them or a directory above
	// them (a bind mount would freeze the directory as it was at start,
	// and an inaccessible or temporary one would hide the socket).
	// /var/run is a symlink to /run.
	for _, sock := range config.DefaultNorthboundSockets() {
		dirs := []string{filepath.Dir(sock)}
		if rest, ok := strings.CutPrefix(dirs[0], "/var/run/"); ok {
			dirs = append(dirs, "/run/"+rest)
		}
		for _, key := range []string{"ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem"} {
			for _, p := range strings.Fields(strings.Join(u["Service"][key], " ")) {
				p = strings.TrimLeft(p, "-+")
				p, _, _ = strings.Cut(p, ":")
				for _, d := range dirs {
					if d == p || strings.HasPrefix(d, strings.TrimSuffix(p, "/")+"/") {
						t.Errorf("%s=%s covers %s, where ovnbgp looks for the NB socket %s", key, p, d, sock)
					}
				}
			}
		}
	}
	if got := u["Service"]["ProtectSystem"]; len(got) != 1 || got[0] != "strict" {
		t.Errorf("ProtectSystem=%q, want strict (read-only /run still lets the NB socket be connected)", got)
	}
}

func firstOf(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// TestTmpfiles applies tmpfiles.d/ovnbgp.conf with systemd-tmpfiles under a
// temporary root: it must create the unit's RuntimeDirectory with the
// unit's RuntimeDirectoryMode, owned by root, and nothing else.
func TestTmpfiles(t *testing.T) {
	tf := systemdTool(t, "systemd-tmpfiles")
	if os.Geteuid() != 0 {
		msg := "systemd-tmpfiles --create chowns to root: run as root"
		prereq.Missing(t, msg)
	}
	u := loadUnit(t)
	conf, err := filepath.Abs(tmpfilesFile)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	out, errOut, err := run(t, tf, "--create", "--root="+root, conf)
	if err != nil || strings.TrimSpace(errOut) != "" {
		t.Fatalf("systemd-tmpfiles --create %s: %v\n%s%s", tmpfilesFile, err, out, errOut)
	}
	dir := "/run/" + firstOf(u["Service"]["RuntimeDirectory"])
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, dir), &st); err != nil {
		t.Fatalf("%s did not create %s: %v", tmpfilesFile, dir, err)
	}
	wantMode := firstOf(u["Service"]["RuntimeDirectoryMode"])
	if got := fmt.Sprintf("%04o", st.Mode&0o7777); st.Mode&syscall.S_IFMT != syscall.S_IFDIR || got != wantMode {
		t.Errorf("%s: %s has mode %s (file type %o), the unit's RuntimeDirectoryMode is %s", tmpfilesFile, dir, got, st.Mode&syscall.S_IFMT, wantMode)
	}
	if st.Uid != 0 || st.Gid != 0 {
		t.Errorf("%s: %s is owned by %d:%d, want root:root", tmpfilesFile, dir, st.Uid, st.Gid)
	}
	entries, err := os.ReadDir(filepath.Join(root, "run"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%s created more than %s under /run: %v", tmpfilesFile, dir, entries)
	}
}
