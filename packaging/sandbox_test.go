package packaging

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sandbox is a podman container whose root is this machine's root under an
// overlay: read-only below, a tmpfs of the test's own above. A package
// installed and purged there changes only the tmpfs, which the test
// unmounts: this machine's files, its dpkg and rpm databases and its
// services stay as they were, whatever was installed here before (no
// image is pulled either: the root is this machine's). runc, not Debian
// 12's crun, which refuses this host's hybrid cgroups; no network but the
// container's own loopback, with CAP_NET_ADMIN in it (ip route, to check
// rt_protos.d).
type sandbox struct {
	t      *testing.T
	podman string
	name   string
	// dist is where the directory given to newSandbox is seen inside.
	dist string
}

// newSandbox starts a sandbox with share (the packages) read-only at
// s.dist. Its container, overlay and tmpfs go at the end of the test.
func newSandbox(t *testing.T, share string) *sandbox {
	t.Helper()
	needRoot(t, "the packages install into a podman container on an overlay of this machine's root (mount, podman)")
	needTool(t, "runc", "runc")
	dir := t.TempDir()
	podman := filepath.Join(podmanWrapper(t, dir), "podman")
	layer, root := filepath.Join(dir, "layer"), filepath.Join(dir, "root")
	for _, d := range []string{layer, root} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The upper layer on a tmpfs: overlayfs refuses an upper directory
	// inside its lower one (/), and the writes never reach the disk.
	mustRun(t, nil, "mount", "-t", "tmpfs", "-o", "size=1g,mode=0700", "ovnbgp-sandbox", layer)
	t.Cleanup(func() { unmount(t, layer) })
	upper, work := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, nil, "mount", "-t", "overlay", "-o", "lowerdir=/,upperdir="+upper+",workdir="+work, "ovnbgp-sandbox", root)
	t.Cleanup(func() { unmount(t, root) })

	id := make([]byte, 4)
	_, _ = rand.Read(id)
	s := &sandbox{t: t, podman: podman, name: "ovnbgp-pkgtest-" + hex.EncodeToString(id), dist: "/mnt/ovnbgp-pkgtest"}
	// --rootfs: the first argument is the root directory, not an image.
	out, err := runIn(dir, nil, podman, "run", "--detach", "--name", s.name, "--rootfs",
		"--runtime", "runc", "--network", "none", "--cap-add", "NET_ADMIN",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--volume", share+":"+s.dist+":ro", "--env", "DEBIAN_FRONTEND=noninteractive",
		root, "/bin/sleep", "infinity")
	if err != nil {
		t.Fatalf("podman run (the sandbox): %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := runIn(dir, nil, podman, "rm", "--force", "--time", "0", s.name); err != nil {
			t.Errorf("podman rm %s: %v\n%s", s.name, err, out)
		}
	})
	return s
}

// unmount detaches a mount of the test's (lazily: a process still in it
// cannot keep it on this machine's tree).
func unmount(t *testing.T, dir string) {
	if out, err := runIn("", nil, "umount", "--lazy", dir); err != nil {
		t.Errorf("umount %s: %v\n%s", dir, err, out)
	}
}

// run runs a command in the sandbox.
func (s *sandbox) run(name string, args ...string) (string, error) {
	return runIn("", nil, s.podman, append([]string{"exec", s.name, name}, args...)...)
}

// mustRun runs a command in the sandbox and fails the test if it fails.
func (s *sandbox) mustRun(name string, args ...string) string {
	s.t.Helper()
	out, err := s.run(name, args...)
	if err != nil {
		s.t.Fatalf("in the sandbox: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// sh runs a shell script in the sandbox, with args as $1...
func (s *sandbox) sh(script string, args ...string) (string, error) {
	return s.run("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
}

// modes is each path's mode in the sandbox as ls and dpkg-deb print it
// (-rw-r--r--, drwx------), "" for an absent one.
func (s *sandbox) modes(paths []string) map[string]string {
	s.t.Helper()
	out, err := s.sh(`for p; do if [ -e "$p" ] || [ -L "$p" ]; then stat -c '%A %n' -- "$p"; else echo "absent $p"; fi; done`, paths...)
	if err != nil {
		s.t.Fatalf("in the sandbox: stat: %v\n%s", err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		mode, p, ok := strings.Cut(l, " ")
		if !ok {
			s.t.Fatalf("in the sandbox: stat: %q", l)
		}
		if mode == "absent" {
			mode = ""
		}
		m[p] = mode
	}
	return m
}

// exists reports whether path exists in the sandbox.
func (s *sandbox) exists(path string) bool {
	s.t.Helper()
	return s.modes([]string{path})[path] != ""
}

// processesOf lists the processes in the sandbox whose executable is exe.
func (s *sandbox) processesOf(exe string) []string {
	s.t.Helper()
	out, _ := s.sh(`for e in /proc/[0-9]*/exe; do t=$(readlink "$e") && echo "${e%/exe} $t"; done; true`)
	var pids []string
	for _, l := range strings.Split(out, "\n") {
		if p, target, ok := strings.Cut(l, " "); ok && (target == exe || target == exe+" (deleted)") {
			pids = append(pids, strings.TrimPrefix(p, "/proc/"))
		}
	}
	return pids
}

// forget makes the sandbox as if ovnbgp had never been installed on this
// machine: its packages purged from the sandbox's dpkg and rpm databases,
// its files and directories removed (from the overlay only).
func (s *sandbox) forget(paths []string) {
	s.t.Helper()
	out, err := s.sh(`
if dpkg-query -W -f '${Status}' ovnbgp 2>/dev/null | grep -qv not-installed; then dpkg -P ovnbgp; fi
if rpm -q ovnbgp >/dev/null 2>&1; then rpm -e --nodeps --noscripts --force-debian ovnbgp; fi
rm -rf -- /etc/ovnbgp /var/lib/ovnbgp /run/ovnbgp "$@"`, paths...)
	if err != nil {
		s.t.Fatalf("in the sandbox: removing an ovnbgp of this machine's: %v\n%s", err, out)
	}
}
