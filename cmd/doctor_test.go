package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/doctor"
)

// TestDoctorCommand: `ovnbgp doctor` with a config that does not validate
// prints the validator's message as the failed config check, skips the
// checks that need it, and exits 2; the table has a row per check and the
// counts. AWS is off (no request leaves the host: no IMDS from a test).
func TestDoctorCommand(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("node: {name: n1}\nbgp: {asn: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "table"} {
		var out bytes.Buffer
		root := NewRootCommand(&out)
		root.SetArgs([]string{"doctor", "--config", bad, "-o", format})
		err := root.Execute()
		var ee exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Fatalf("-o %s: error %v, want exit code 2\n%s", format, err, out.String())
		}
		if format == "table" {
			for _, want := range []string{"CHECK", "config", "fail", "bgp.asn", "aws-instance", "AWS_EC2_METADATA_DISABLED=true", " skip"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
			continue
		}
		var rep doctor.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("-o json: %v\n%s", err, out.String())
		}
		if rep.ExitCode != 2 || rep.Checks[0].ID != "config" || rep.Checks[0].Status != doctor.Fail ||
			!strings.Contains(rep.Checks[0].Finding, "bgp.asn") || rep.Checks[0].Fix == "" {
			t.Errorf("report: %+v", rep)
		}
		for _, c := range rep.Checks {
			if c.ID == "nb" && c.Status != doctor.Skip {
				t.Errorf("nb ran without a config: %+v", c)
			}
		}
	}
}

// TestDoctorCredentialPeer: a peer with `passwordFile: credential:NAME`
// and no $CREDENTIALS_DIRECTORY (doctor run from a shell, or before the
// unit's first start) does not fail the config: `config` passes, the
// checks that need the config run (none is skipped for want of it), and
// the secret gets its own `secrets` result naming the credential.
func TestDoctorCredentialPeer(t *testing.T) {
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	doc := `node: {name: n1}
bgp:
  asn: 65010
  routerID: 192.0.2.10
  listenPort: -1
  peers:
    - {name: tor-a, address: 192.0.2.1, asn: 65001, passwordFile: "credential:tor-a-md5"}
advertise:
  - {name: pods, kind: podNetwork, networks: ["*"]}
ovn: {northbound: "unix:` + filepath.Join(dir, "nb.sock") + `"}
control: {socket: ` + filepath.Join(dir, "ovnbgp.sock") + `}
metrics: {address: ""}
stateDir: ` + filepath.Join(dir, "state") + `
`
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	root := NewRootCommand(&out)
	root.SetArgs([]string{"doctor", "--config", cfg, "-o", "json", "--timeout", "2s"})
	_ = root.Execute() // the exit code depends on this machine (NB is absent: nb fails)
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	var secrets []doctor.Result
	for _, c := range rep.Checks {
		switch {
		case c.ID == "config" && c.Status != doctor.Pass:
			t.Errorf("config: %s %s", c.Status, c.Finding)
		case strings.Contains(c.Finding, "needs a valid config"):
			t.Errorf("%s skipped for want of the config: %s", c.ID, c.Finding)
		case c.ID == "secrets":
			secrets = append(secrets, c)
		}
	}
	if len(secrets) != 1 || secrets[0].Status == doctor.Skip || !strings.Contains(secrets[0].Finding, "credential tor-a-md5") {
		t.Errorf("secrets: %+v, want one result about credential tor-a-md5", secrets)
	}
	for _, c := range rep.Checks {
		if c.ID == "nb" && c.Status == doctor.Skip {
			t.Errorf("nb did not run: %+v", c)
		}
	}
}
