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
