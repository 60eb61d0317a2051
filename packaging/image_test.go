package packaging

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

// needTool returns the path of a program the packaging tests need. Missing,
// the test skips, except under CI=true, where scripts/test-deps.sh (make
// test) installs it and a missing one is a failure.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " not found: install the " + pkg + " package (scripts/test-deps.sh does, as root)"
	prereq.Missing(t, msg)
	return ""
}

func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	prereq.Missing(t, why+": run as root")
}

// podmanWrapper writes an executable `podman` into a new directory that
// runs the real podman with storage of its own under dir (vfs: no
// overlay mounts), so the test neither reads nor changes the machine's
// images and containers. It returns the directory, to put first in PATH.
func podmanWrapper(t *testing.T, dir string) string {
	t.Helper()
	real := needTool(t, "podman", "podman")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nexec " + real +
		" --root " + filepath.Join(dir, "storage") + " --runroot " + filepath.Join(dir, "run") +
		" --tmpdir " + filepath.Join(dir, "libpod") +
		" --storage-driver vfs --cgroup-manager cgroupfs --events-backend file \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "podman"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runIn runs a command with extra environment and returns its combined
// output.
func runIn(dir string, env []string, name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	return string(out), err
}

// TestImageAndInstall builds the image with `make image` (podman, in
// storage of the test's own), checks its labels and that the binary is at
// /usr/bin/ovnbgp, runs `version` in it, and then runs the MachineConfig's
// ovnbgp-install against it as a node would: refusing an image that is not
// pinned by digest, copying the binary out of the pinned image, doing
// nothing the second time, and keeping the installed binary when the
// pinned image cannot be pulled.
func TestImageAndInstall(t *testing.T) {
	needRoot(t, "podman stores images as root here")
	needTool(t, "runc", "runc")
	dir := t.TempDir()
	pathDir := podmanWrapper(t, dir)
	podman := filepath.Join(pathDir, "podman")
	env := []string{"PATH=" + pathDir + string(os.PathListSeparator) + os.Getenv("PATH"), "TMPDIR=" + dir}
	const tag = "localhost/ovnbgp:packaging-test"

	bin := filepath.Join(dir, "ovnbgp")
	if out, err := runIn("..", env, "make", "-s", "image", "BIN="+bin, "CONTAINER="+podman, "IMAGE="+tag, "VERSION=v0.0.0-imagetest", "COMMIT=0123456789abcdef"); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	wantVersion, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}

	out, err := runIn(dir, env, podman, "image", "inspect", tag)
	if err != nil {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	var inspect []struct {
		Digest string
		Config struct {
			Labels     map[string]string
			Entrypoint []string
		}
		RootFS struct{ Layers []string }
	}
	if err := json.Unmarshal([]byte(out), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	img := inspect[0]
	for k, v := range map[string]string{
		"org.opencontainers.image.title":    "ovnbgp",
		"org.opencontainers.image.version":  "v0.0.0-imagetest",
		"org.opencontainers.image.revision": "0123456789abcdef",
	} {
		if got := img.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	if len(img.Config.Entrypoint) != 1 || img.Config.Entrypoint[0] != "/usr/bin/ovnbgp" {
		t.Errorf("entrypoint %q, want [/usr/bin/ovnbgp]", img.Config.Entrypoint)
	}
	if len(img.RootFS.Layers) != 1 {
		t.Errorf("%d layers, want 1 (FROM scratch, the binary)", len(img.RootFS.Layers))
	}

	// Run it. runc, not Debian 12's crun, which refuses hybrid cgroup
	// hierarchies; the ulimits are within this machine's (podman raises
	// nofile to 1048576 by default, which a sandbox may forbid).
	out, err = runIn(dir, env, podman, "run", "--rm", "--network", "none", "--runtime", "runc",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", tag, "version", "-o", "json")
	if err != nil {
		t.Fatalf("podman run %s version: %v\n%s", tag, err, out)
	}
	if !strings.Contains(out, strings.TrimSpace(string(wantVersion))) {
		t.Errorf("podman run %s version -o json:\n%s\nwant\n%s", tag, out, wantVersion)
	}

	// ovnbgp-install, as ovnbgp-install.service runs it.
	install, err := filepath.Abs("machineconfig/ovnbgp-install")
	if err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "usr/local/bin/ovnbgp")
	stamp := filepath.Join(dir, "var/lib/ovnbgp-install/image")
	pinned := "localhost/ovnbgp@" + img.Digest
	runInstall := func(image string, extra ...string) (string, error) {
		e := append(append([]string{}, env...), "OVNBGP_IMAGE="+image, "OVNBGP_BINARY="+dest, "OVNBGP_STAMP="+stamp,
			"OVNBGP_AUTHFILE="+filepath.Join(dir, "no-auth.json"))
		return runIn(dir, append(e, extra...), install)
	}
	for _, bad := range []struct{ image, says string }{
		{"", "OVNBGP_IMAGE is not set"},
		{tag, "is not pinned by digest"},
		{"localhost/ovnbgp@sha256:abc", "is not pinned by digest"},
		{"quay.io/example/ovnbgp@sha256:" + strings.Repeat("0", 64), "is the example digest"},
	} {
		out, err := runInstall(bad.image)
		if err == nil || !strings.Contains(out, bad.says) {
			t.Errorf("ovnbgp-install with OVNBGP_IMAGE=%q: %v, want an error saying %q:\n%s", bad.image, err, bad.says, out)
		}
		if _, err := os.Stat(dest); err == nil {
			t.Fatalf("ovnbgp-install with OVNBGP_IMAGE=%q installed %s", bad.image, dest)
		}
	}

	if out, err := runInstall(pinned); err != nil || !strings.Contains(out, "installed "+dest+" from "+pinned) {
		t.Fatalf("ovnbgp-install %s: %v\n%s", pinned, err, out)
	}
	st, err := os.Stat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("%s has mode %o, want 0755", dest, st.Mode().Perm())
	}
	installed, err := exec.Command(dest, "version", "-o", "json").Output()
	if err != nil || !bytes.Equal(installed, wantVersion) {
		t.Errorf("installed binary: version %v\n%s\nwant\n%s", err, installed, wantVersion)
	}
	if b, _ := os.ReadFile(stamp); strings.TrimSpace(string(b)) != pinned {
		t.Errorf("stamp %s holds %q, want %q", stamp, b, pinned)
	}
	if _, err := os.Stat(dest + ".new"); err == nil {
		t.Errorf("%s.new left behind", dest)
	}
	out, err = runIn(dir, env, podman, "ps", "--all", "--quiet")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("ovnbgp-install left containers behind: %v %q", err, out)
	}

	// Again: nothing to do.
	if out, err := runInstall(pinned); err != nil || !strings.Contains(out, "already from "+pinned) {
		t.Errorf("ovnbgp-install again: %v, want 'already from':\n%s", err, out)
	}

	// Another digest that cannot be pulled (nothing listens on the
	// loopback registry): an error, and the installed binary stays.
	other := "localhost/ovnbgp@sha256:" + strings.Repeat("1", 64)
	out, err = runInstall(other, "OVNBGP_PULL_ATTEMPTS=1")
	if err == nil || !strings.Contains(out, "cannot pull "+other) {
		t.Errorf("ovnbgp-install %s: %v, want 'cannot pull':\n%s", other, err, out)
	}
	if after, err := os.ReadFile(dest); err != nil || !bytes.Equal(after, mustReadBytes(t, bin)) {
		t.Errorf("a failed install changed %s (%v)", dest, err)
	}
	if b, _ := os.ReadFile(stamp); strings.TrimSpace(string(b)) != pinned {
		t.Errorf("a failed install changed the stamp to %q", b)
	}
}

func mustReadBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
