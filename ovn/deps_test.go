package ovn_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestNoTestScaffoldingInProduction: the daemon's NB client (package ovn)
// and the daemon itself do not depend on the lab writers, the in-memory
// server, libovsdb's server (whose init sets stdr's verbosity to 5
// process-wide) or the ovsdb-server test harness (issue 5 item 18).
func TestNoTestScaffoldingInProduction(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go tool to list dependencies: %v", err)
		}
	}
	forbidden := []string{
		"github.com/ovn-org/libovsdb/server",
		"github.com/ovn-org/libovsdb/database/inmemory",
		"github.com/ovnbgp/ovnbgp/ovn/labnb",
		"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest",
	}
	for _, pkg := range []string{"github.com/ovnbgp/ovnbgp/ovn", "github.com/ovnbgp/ovnbgp/daemon"} {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/ovn-org/libovsdb/client") && pkg == "github.com/ovnbgp/ovnbgp/ovn" {
			t.Fatalf("go list -deps %s lacks libovsdb/client: the listing is wrong:\n%s", pkg, out)
		}
		for _, f := range forbidden {
			if slices.Contains(deps, f) {
				t.Errorf("%s depends on %s", pkg, f)
			}
		}
	}
}
