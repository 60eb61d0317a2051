package labpeer_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestNotInTheDaemon: the lab's provider router, a second gobgp stack,
// stays out of the daemon and of package bgp.
func TestNotInTheDaemon(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go tool to list dependencies: %v", err)
		}
	}
	const self = "github.com/ovnbgp/ovnbgp/bgp/labpeer"
	for _, pkg := range []string{"github.com/ovnbgp/ovnbgp/daemon", "github.com/ovnbgp/ovnbgp/bgp"} {
		out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "github.com/osrg/gobgp/v4/pkg/server") {
			t.Fatalf("go list -deps %s lacks gobgp's server: the listing is wrong:\n%s", pkg, out)
		}
		if slices.Contains(deps, self) {
			t.Errorf("%s depends on %s", pkg, self)
		}
	}
}
