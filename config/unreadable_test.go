package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// asUserEnv, when set in the environment, makes this test binary run
// unreadableHelper instead of the tests: TestPasswordFileUnreadable
// re-executes itself as user nobody so that file modes apply even when the
// tests run as root.
const asUserEnv = "OVNBGP_CONFIG_TEST_UNREADABLE"

func TestMain(m *testing.M) {
	if file := os.Getenv(asUserEnv); file != "" {
		os.Exit(unreadableHelper(file))
	}
	os.Exit(m.Run())
}

// unreadableHelper parses a config whose passwordFile is file and prints
// the problems; exit 0 if there were some.
func unreadableHelper(file string) int {
	doc := strings.Replace(baseDoc, afterTorA, afterTorA+"      passwordFile: "+file+"\n", 1)
	_, err := parse([]byte(doc), "config.yaml", fakeHost(nil))
	if err == nil {
		fmt.Println("no error")
		return 1
	}
	fmt.Println(err)
	return 0
}

// TestPasswordFileUnreadable: a passwordFile the daemon's user cannot read
// (mode 000) is reported with the reason. Root reads any file, so as root
// the check runs in a copy of this test binary as user nobody.
func TestPasswordFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	// t.TempDir and its parent are 0700: let nobody in.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := writeSecret(t, dir, "unreadable", secret)
	if err := os.Chmod(f, 0); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		errs := parseErrors(t, withPasswordFile(t, f), fakeHost(nil))
		checkErrors(t, errs, want{"bgp.peers[0].passwordFile", fmt.Sprintf("cannot read %q: permission denied", f), 10})
		return
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("running as root, the check needs user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// A copy of the test binary nobody can run (go test's own is under a
	// 0700 directory).
	bin := filepath.Join(dir, "config.test")
	copyFile(t, os.Args[0], bin)
	cmd := exec.Command(bin)
	cmd.Env = []string{asUserEnv + "=" + f, "PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out.String())
	}
	wantMsg := fmt.Sprintf("bgp.peers[0].passwordFile: cannot read %q: permission denied", f)
	if !strings.Contains(out.String(), wantMsg) {
		t.Errorf("as nobody, got:\n%s\nwant it to contain %q", out.String(), wantMsg)
	}
	if strings.Contains(out.String(), secret) {
		t.Errorf("the error shows the secret")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
