package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Paths of the external programs and files the harness uses. Debian's
// packages put them here; the environment variables override them.
var (
	// FRRDir holds zebra and bgpd (env OVNBGP_E2E_FRR_DIR).
	FRRDir = envOr("OVNBGP_E2E_FRR_DIR", "/usr/lib/frr")
	// NBSchema is the OVN Northbound schema (env OVN_NB_SCHEMA).
	NBSchema = envOr("OVN_NB_SCHEMA", "/usr/share/ovn/ovn-nb.ovsschema")
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// InCI reports whether the tests run in CI (CI=true), where a missing
// prerequisite is a failure, not a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require checks what every end-to-end test needs: Linux, root, the FRR,
// OVN and iproute2 programs, the NB schema and an frr user. When something is
// missing the test is skipped with a message naming it, or fails under
// CI=true. In -short mode the test is skipped.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	var missing []string
	if runtime.GOOS != "linux" {
		missing = append(missing, "Linux (network namespaces)")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces, FRR, TCP MD5)")
	}
	for _, prog := range []string{"ip", "ovsdb-server", "ovsdb-tool", "ovn-nbctl"} {
		if _, err := exec.LookPath(prog); err != nil {
			missing = append(missing, prog)
		}
	}
	for _, f := range []string{filepath.Join(FRRDir, "zebra"), filepath.Join(FRRDir, "bgpd"), NBSchema} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if _, err := user.Lookup("frr"); err != nil {
		missing = append(missing, "user frr")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("end-to-end prerequisites missing: %s (run scripts/test-deps.sh as root)",
		strings.Join(missing, ", "))
	if InCI() {
		t.Fatal(msg + "; CI=true: failing instead of skipping")
	}
	t.Skip(msg)
}

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Binary returns the ovnbgp binary under test: $OVNBGP_BIN if set, else
// one built once per test process with `go build` from the module root.
// A build failure fails the test (it is never a reason to skip).
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("OVNBGP_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatalf("OVNBGP_BIN: %v", err)
		}
		return abs
	}
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "ovnbgp-e2e-bin-")
		if build.err != nil {
			return
		}
		gobin, err := goTool()
		if err != nil {
			build.err = err
			return
		}
		root, err := moduleRoot(gobin)
		if err != nil {
			build.err = err
			return
		}
		build.bin = filepath.Join(build.dir, "ovnbgp")
		cmd := exec.Command(gobin, "build", "-o", build.bin, ".")
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			build.err = fmt.Errorf("go build ovnbgp: %w\n%s", err, out.String())
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// Cleanup removes what Binary built. Call it from TestMain after m.Run.
func Cleanup() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

func goTool() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", errors.New("go command not found: set OVNBGP_BIN to a built ovnbgp binary")
}

func moduleRoot(gobin string) (string, error) {
	out, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the ovnbgp module: set OVNBGP_BIN")
	}
	return filepath.Dir(mod), nil
}
