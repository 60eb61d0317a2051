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

	"github.com/ovnbgp/ovnbgp/test/prereq"
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
func InCI() bool { return prereq.InCI() }

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
	prereq.Missing(t, msg)
}

// builds are the binaries built once per test process (Binary,
// TestHooksBinary), removed by Cleanup.
var build, hooksBuild built

type built struct {
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
	return build.get(t, "OVNBGP_BIN")
}

// TestHooksTag is the build tag of the daemon's test-only hooks
// (daemon/testhooks_on.go: SIGUSR2 hangs the reconcile loop). A binary
// built without it has no hook at all.
const TestHooksTag = "ovnbgp_testhooks"

// TestHooksBinary returns ovnbgp built with -tags ovnbgp_testhooks:
// $OVNBGP_TESTHOOKS_BIN if set (`make build-testhooks`, which `make test`
// runs: bin/ovnbgp-testhooks), else one built once per test process from
// the module root. Never the binary under test of other tests.
func TestHooksBinary(t testing.TB) string {
	t.Helper()
	return hooksBuild.get(t, "OVNBGP_TESTHOOKS_BIN", "-tags", TestHooksTag)
}

// get returns $env if set, else the binary built once with `go build
// args... .` from the module root.
func (b *built) get(t testing.TB, env string, args ...string) string {
	t.Helper()
	if bin := os.Getenv(env); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		return abs
	}
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp("", "ovnbgp-e2e-bin-")
		if b.err != nil {
			return
		}
		gobin, err := goTool()
		if err != nil {
			b.err = err
			return
		}
		root, err := moduleRoot(gobin)
		if err != nil {
			b.err = err
			return
		}
		b.bin = filepath.Join(b.dir, "ovnbgp")
		cmd := exec.Command(gobin, append(append([]string{"build"}, args...), "-o", b.bin, ".")...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.err = fmt.Errorf("go build %s ovnbgp (%s not set): %w\n%s", strings.Join(args, " "), env, err, out.String())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// Cleanup removes what Binary and TestHooksBinary built. Call it from
// TestMain after m.Run.
func Cleanup() {
	for _, b := range []*built{&build, &hooksBuild} {
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
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
