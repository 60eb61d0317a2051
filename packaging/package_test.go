package packaging

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/cmd"
)

// packageFile is a file of the packages: its mode, and where its content
// comes from (a file of the repository, relative to packaging/, or "" for
// generated content checked apart).
type packageFile struct {
	mode string // as dpkg-deb -c prints it
	src  string
}

// wantPackageFiles is every file the deb holds (directories apart), with
// the zsh completion at Debian's path; the rpm holds the same with zsh's
// own path (zshRPM).
func wantPackageFiles(t *testing.T) map[string]packageFile {
	t.Helper()
	files := map[string]packageFile{
		"/usr/bin/ovnbgp":                               {"-rwxr-xr-x", ""},
		"/usr/lib/systemd/system/ovnbgp.service":        {"-rw-r--r--", ""},
		"/usr/lib/tmpfiles.d/ovnbgp.conf":               {"-rw-r--r--", tmpfilesFile},
		"/etc/iproute2/rt_protos.d/ovnbgp.conf":         {"-rw-r--r--", "rt_protos.d/ovnbgp.conf"},
		"/etc/ovnbgp/config.yaml":                       {"-rw-------", "../config.example.yaml"},
		"/usr/share/bash-completion/completions/ovnbgp": {"-rw-r--r--", ""},
		zshDeb: {"-rw-r--r--", ""},
		"/usr/share/fish/vendor_completions.d/ovnbgp.fish": {"-rw-r--r--", ""},
	}
	// A man page for every command a user sees.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		files["/usr/share/man/man1/"+strings.ReplaceAll(c.CommandPath(), " ", "-")+".1.gz"] = packageFile{"-rw-r--r--", ""}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := cmd.NewRootCommand(&bytes.Buffer{})
	root.InitDefaultCompletionCmd()
	walk(root)
	return files
}

const (
	zshDeb = "/usr/share/zsh/vendor-completions/_ovnbgp" // Debian's zsh fpath
	zshRPM = "/usr/share/zsh/site-functions/_ovnbgp"     // Fedora's, RHEL's
)

var wantConffiles = []string{"/etc/iproute2/rt_protos.d/ovnbgp.conf", "/etc/ovnbgp/config.yaml"}

func mustRun(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runIn("", env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// debListing is `dpkg-deb -c`: path -> mode, for files and directories.
func debListing(t *testing.T, deb string) (files, dirs map[string]string) {
	t.Helper()
	files, dirs = map[string]string{}, map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(mustRun(t, nil, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c: %q", l)
		}
		p := strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")
		if strings.HasPrefix(f[0], "d") {
			dirs[p] = f[0]
		} else {
			files[p] = f[0]
		}
	}
	return files, dirs
}

// TestPackages builds the deb and the rpm with `make package` and checks
// them: the deb's files, modes and conffiles; their contents against the
// repository (the unit differs only by ExecStart=/usr/bin/ovnbgp; the
// completions and man pages are the binary's own); the rpm's file list
// against the deb's, its config files and scripts. Then it installs each,
// as root, in a sandbox of its own (sandbox_test.go: a podman container on
// an overlay of this machine's root, so this machine is left as it was,
// whatever of ovnbgp it holds): files and modes, `ovnbgp version` from
// /usr/bin, the unit verified by systemd-analyze, the service neither
// enabled nor started, proto ovnbgp known to ip, the tmpfiles entry, a
// local edit of the config kept over a reinstall; and removes it (dpkg -P,
// rpm -e): every file is gone, and for the deb every directory the package
// made and the daemon's state.
func TestPackages(t *testing.T) {
	for _, tool := range []struct{ name, pkg string }{{"dpkg", "dpkg"}, {"dpkg-deb", "dpkg"}, {"rpm", "rpm"}} {
		needTool(t, tool.name, tool.pkg)
	}
	dir := t.TempDir()
	bin, dist := filepath.Join(dir, "ovnbgp"), filepath.Join(dir, "dist")
	if out, err := runIn("..", nil, "make", "-s", "package", "BIN="+bin, "DIST="+dist, "VERSION=v1.2.3-4-gabcdef0"); err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dist, "*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("make package made %q and %q, want one deb and one rpm", debs, rpms)
	}
	deb, rpm := debs[0], rpms[0]

	// git describe v1.2.3-4-gabcdef0: 4 commits after v1.2.3, so after
	// 1.2.3 in both package managers' order.
	if got := strings.TrimSpace(mustRun(t, nil, "dpkg-deb", "-f", deb, "Version")); got != "1.2.3+git4.gabcdef0-1" {
		t.Errorf("deb version %q, want 1.2.3+git4.gabcdef0-1", got)
	}
	if got := mustRun(t, nil, "rpm", "-qp", "--qf", "%{VERSION}-%{RELEASE}", rpm); got != "1.2.3+git4.gabcdef0-1" {
		t.Errorf("rpm version %q, want 1.2.3+git4.gabcdef0-1", got)
	}

	want := wantPackageFiles(t)
	files, dirs := debListing(t, deb)
	for p, w := range want {
		if got, ok := files[p]; !ok {
			t.Errorf("the deb lacks %s", p)
		} else if got != w.mode {
			t.Errorf("the deb's %s has mode %s, want %s", p, got, w.mode)
		}
	}
	for p := range files {
		if _, ok := want[p]; !ok {
			t.Errorf("the deb holds %s, which this test does not know", p)
		}
	}
	if got := dirs["/etc/ovnbgp"]; got != "drwx------" {
		t.Errorf("the deb's /etc/ovnbgp has mode %q, want drwx------", got)
	}
	if got := strings.Fields(mustRun(t, nil, "dpkg-deb", "-I", deb, "conffiles")); !slices.Equal(slices.Sorted(slices.Values(got)), wantConffiles) {
		t.Errorf("the deb's conffiles are %q, want %q", got, wantConffiles)
	}

	// Contents, from the deb unpacked.
	x := filepath.Join(dir, "x")
	mustRun(t, nil, "dpkg-deb", "-x", deb, x)
	for p, w := range want {
		if w.src == "" {
			continue
		}
		if got, err := os.ReadFile(filepath.Join(x, p)); err != nil || string(got) != mustRead(t, w.src) {
			t.Errorf("the deb's %s is not %s byte for byte (%v)", p, w.src, err)
		}
	}
	unit := mustRead(t, unitFile)
	wantUnit := strings.Replace(unit, "\nExecStart=/usr/local/bin/ovnbgp ", "\nExecStart=/usr/bin/ovnbgp ", 1)
	if wantUnit == unit {
		t.Fatalf("%s has no ExecStart=/usr/local/bin/ovnbgp", unitFile)
	}
	if got := mustRead(t, filepath.Join(x, "/usr/lib/systemd/system/ovnbgp.service")); got != wantUnit {
		t.Errorf("the deb's unit is not %s with ExecStart=/usr/bin/ovnbgp", unitFile)
	}
	for shell, p := range map[string]string{"bash": "/usr/share/bash-completion/completions/ovnbgp", "zsh": zshDeb, "fish": "/usr/share/fish/vendor_completions.d/ovnbgp.fish"} {
		if got, gen := mustRead(t, filepath.Join(x, p)), mustRun(t, nil, bin, "completion", shell); got != gen {
			t.Errorf("the deb's %s is not `ovnbgp completion %s`", p, shell)
		}
	}
	if page := mustRun(t, nil, "sh", "-c", "gzip -dc "+filepath.Join(x, "/usr/share/man/man1/ovnbgp-routes-learned.1.gz")); !strings.Contains(page, "ovnbgp-routes-learned") || !strings.Contains(page, "--rejected") {
		t.Errorf("ovnbgp-routes-learned.1 does not document the command:\n%s", page)
	}

	// The rpm: the same files (zsh's path apart) and the same config files.
	rpmFiles := strings.Fields(mustRun(t, nil, "rpm", "-qlp", rpm))
	var wantRPM []string
	for p := range files {
		if p == zshDeb {
			p = zshRPM
		}
		wantRPM = append(wantRPM, p)
	}
	wantRPM = append(wantRPM, "/etc/ovnbgp")
	slices.Sort(wantRPM)
	if slices.Sort(rpmFiles); !slices.Equal(rpmFiles, wantRPM) {
		t.Errorf("rpm -qlp lists\n  %q\nthe deb holds\n  %q", rpmFiles, wantRPM)
	}
	if got := strings.Fields(mustRun(t, nil, "rpm", "-qp", "--configfiles", rpm)); !slices.Equal(slices.Sorted(slices.Values(got)), wantConffiles) {
		t.Errorf("the rpm's config files are %q, want %q", got, wantConffiles)
	}
	for _, l := range strings.Split(strings.TrimSpace(mustRun(t, nil, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags} %{FILEMODES:perms}\n]", rpm)), "\n") {
		f := strings.Fields(l)
		if slices.Contains(wantConffiles, f[0]) && (len(f) != 3 || f[1] != "cn") {
			t.Errorf("rpm: %s is not %%config(noreplace): %q", f[0], l)
		}
		if w, ok := want[f[0]]; ok && f[len(f)-1] != w.mode {
			t.Errorf("rpm: %s has mode %s, want %s", f[0], f[len(f)-1], w.mode)
		}
	}
	for _, scripts := range []string{mustRun(t, nil, "rpm", "-qp", "--scripts", rpm), mustRead(t, "nfpm/postinstall.sh") + mustRead(t, "nfpm/preremove.sh") + mustRead(t, "nfpm/postremove.sh")} {
		for _, l := range strings.Split(scripts, "\n") {
			if l = strings.TrimSpace(l); strings.HasPrefix(l, "#") {
				continue
			}
			for _, verb := range []string{"start", "restart", "enable", "try-restart", "reload-or-restart"} {
				if strings.Contains(l, "systemctl "+verb+" ") || strings.Contains(l, "systemctl --now") || strings.Contains(l, "enable --now") {
					t.Errorf("a package script starts or enables the service: %q", l)
				}
			}
		}
	}

	// Installed, reinstalled and removed, each in a sandbox (sandbox_test.go)
	// of its own: this machine's root under an overlay, never the machine,
	// which is checked to be as it was.
	var paths []string
	for _, m := range []map[string]string{files, dirs} {
		paths = append(paths, slices.Collect(maps.Keys(m))...)
	}
	paths = append(paths, zshRPM, "/etc/ovnbgp", "/var/lib/ovnbgp", "/run/ovnbgp", "/root/.rpmdb")
	before := hostState(paths)
	defer func() {
		after := hostState(paths)
		for p := range before {
			if before[p] != after[p] {
				t.Errorf("this machine's %s changed: %s, now %s", p, before[p], after[p])
			}
		}
	}()
	installed := maps.Clone(files)
	installed["/etc/ovnbgp"] = dirs["/etc/ovnbgp"]
	t.Run("deb", func(t *testing.T) { installDeb(t, deb, bin, installed, dirs) })
	rpmInstalled := maps.Clone(installed)
	rpmInstalled[zshRPM] = rpmInstalled[zshDeb]
	delete(rpmInstalled, zshDeb)
	t.Run("rpm", func(t *testing.T) { installRPM(t, rpm, bin, rpmInstalled) })
}

// testRoute is the route checkInstalled adds in the sandbox's own network
// namespace with proto ovnbgp.
const testRoute = "192.0.2.0/24"

// checkInstalled checks, in s, what the deb and the rpm install alike: the
// files (and /etc/ovnbgp) with their modes, `ovnbgp version` from
// /usr/bin, the unit verified by systemd-analyze, the service neither
// enabled nor started, `ip route` knowing proto ovnbgp (rt_protos.d), and
// the tmpfiles entry making the unit's runtime directory, as the package
// script has systemd-tmpfiles do where systemd runs.
func checkInstalled(t *testing.T, s *sandbox, files map[string]string, bin string) {
	t.Helper()
	got := s.modes(slices.Collect(maps.Keys(files)))
	for p, mode := range files {
		if got[p] == "" {
			t.Errorf("installed: %s is missing", p)
		} else if got[p] != mode {
			t.Errorf("installed %s has mode %s, want %s", p, got[p], mode)
		}
	}
	if got, want := s.mustRun("/usr/bin/ovnbgp", "version", "-o", "json"), mustRun(t, nil, bin, "version", "-o", "json"); got != want {
		t.Errorf("/usr/bin/ovnbgp version -o json:\n%s\nwant\n%s", got, want)
	}
	if s.exists("/usr/bin/systemd-analyze") {
		out, err := s.run("systemd-analyze", "verify", "--man=no", "/usr/lib/systemd/system/ovnbgp.service")
		if err != nil || len(parseWarnings(out, "ovnbgp.service")) > 0 {
			t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
		}
	}
	if out, _ := s.sh("ls -d /etc/systemd/system/*.wants/ovnbgp.service 2>/dev/null; true"); strings.TrimSpace(out) != "" {
		t.Errorf("installing enabled the service: %q", out)
	}
	if pids := s.processesOf("/usr/bin/ovnbgp"); len(pids) > 0 {
		t.Errorf("installing started /usr/bin/ovnbgp (pids %v)", pids)
	}

	s.mustRun("ip", "link", "set", "lo", "up")
	s.mustRun("ip", "route", "add", testRoute, "dev", "lo", "proto", "ovnbgp")
	if out := s.mustRun("ip", "route", "show", testRoute); !strings.Contains(out, "proto ovnbgp") {
		t.Errorf("ip route show %s with rt_protos.d/ovnbgp.conf installed: %q, want proto ovnbgp", testRoute, out)
	}
	s.mustRun("ip", "route", "del", testRoute, "dev", "lo")

	s.mustRun("systemd-tmpfiles", "--create", "/usr/lib/tmpfiles.d/ovnbgp.conf")
	if got := s.modes([]string{"/run/ovnbgp"})["/run/ovnbgp"]; got != "drwxr-xr-x" {
		t.Errorf("systemd-tmpfiles --create of the installed entry: /run/ovnbgp is %q, want drwxr-xr-x", got)
	}
}

// checkRemoved checks, in s, that what checkInstalled found is gone: ip
// no longer knows proto ovnbgp.
func checkRemoved(t *testing.T, s *sandbox) {
	t.Helper()
	if out, err := s.run("ip", "route", "add", testRoute, "dev", "lo", "proto", "ovnbgp"); err == nil {
		t.Errorf("after the removal ip still knows proto ovnbgp: %s", out)
	}
}

// installDeb installs the deb with dpkg -i in a sandbox and checks it
// (checkInstalled, dpkg --verify), keeps a local edit of the config over a
// reinstall (a conffile), and purges it with the daemon's state present:
// every file is gone, every directory the package made, the state and
// the runtime directory.
func installDeb(t *testing.T, deb, bin string, files, dirs map[string]string) {
	s := newSandbox(t, filepath.Dir(deb))
	s.forget(slices.Collect(maps.Keys(files)))
	existed := map[string]bool{}
	for d, mode := range s.modes(slices.Collect(maps.Keys(dirs))) {
		existed[d] = mode != ""
	}
	pkg := s.dist + "/" + filepath.Base(deb)
	s.mustRun("dpkg", "-i", pkg)
	checkInstalled(t, s, files, bin)
	if out, err := s.run("dpkg", "--verify", "ovnbgp"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("dpkg --verify ovnbgp: %v\n%s", err, out)
	}

	// A local edit of the config survives a reinstall (a conffile).
	const conf = "/etc/ovnbgp/config.yaml"
	edited := editConfig(t, s, conf)
	s.mustRun("dpkg", "-i", pkg)
	if got := s.mustRun("cat", conf); got != edited {
		t.Errorf("reinstalling replaced the edited %s", conf)
	}

	// The daemon's state, as systemd's StateDirectory= and a drain make it:
	// a purge removes it.
	s.mustRun("sh", "-c", "mkdir -p -m 0700 /var/lib/ovnbgp && echo '{}' >/var/lib/ovnbgp/drain.json")

	s.mustRun("dpkg", "-P", "ovnbgp")
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	for d := range dirs {
		paths = append(paths, d)
	}
	left := s.modes(append(paths, "/var/lib/ovnbgp", "/run/ovnbgp"))
	for p := range files {
		if left[p] != "" {
			t.Errorf("%s is left after dpkg -P", p)
		}
	}
	for d := range dirs {
		if left[d] != "" && !existed[d] {
			t.Errorf("directory %s, made by the package, is left after dpkg -P", d)
		}
	}
	for _, p := range []string{"/var/lib/ovnbgp", "/run/ovnbgp"} {
		if left[p] != "" {
			t.Errorf("%s is left after dpkg -P", p)
		}
	}
	if out, err := s.run("dpkg-query", "-W", "-f", "${Status}", "ovnbgp"); err == nil && strings.Contains(out, "installed") && !strings.Contains(out, "not-installed") {
		t.Errorf("dpkg still knows ovnbgp after dpkg -P: %s", out)
	}
	checkRemoved(t, s)
}

// installRPM installs the rpm with rpm -i in a sandbox and checks it
// (checkInstalled, rpm -V), keeps a local edit of the config over a
// reinstall (%config(noreplace)), and erases it: every file is gone, the
// edited config kept as config.yaml.rpmsave, as rpm keeps a changed
// config file.
func installRPM(t *testing.T, rpm, bin string, files map[string]string) {
	s := newSandbox(t, filepath.Dir(rpm))
	s.forget(slices.Collect(maps.Keys(files)))
	pkg := s.dist + "/" + filepath.Base(rpm)
	// --nodeps: the sandbox's root is Debian's, whose rpm database is
	// empty (nothing in it provides the scripts' /bin/sh); --force-debian
	// quiets Debian's rpm, which would have us use alien.
	s.mustRun("rpm", "-i", "--nodeps", "--force-debian", pkg)
	checkInstalled(t, s, files, bin)
	if out, err := s.run("rpm", "-V", "ovnbgp"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("rpm -V ovnbgp: %v\n%s", err, out)
	}

	const conf = "/etc/ovnbgp/config.yaml"
	edited := editConfig(t, s, conf)
	s.mustRun("rpm", "-i", "--replacepkgs", "--nodeps", "--force-debian", pkg)
	if got := s.mustRun("cat", conf); got != edited {
		t.Errorf("reinstalling replaced the edited %s", conf)
	}
	if s.exists(conf + ".rpmnew") {
		t.Errorf("reinstalling the same rpm wrote %s.rpmnew", conf)
	}

	s.mustRun("rpm", "-e", "--force-debian", "ovnbgp")
	left := s.modes(slices.Collect(maps.Keys(files)))
	for p := range files {
		if left[p] != "" && p != "/etc/ovnbgp" {
			t.Errorf("%s is left after rpm -e", p)
		}
	}
	if got, err := s.run("cat", conf+".rpmsave"); err != nil || got != edited {
		t.Errorf("rpm -e did not keep the edited %s as %s.rpmsave: %v\n%s", conf, conf, err, got)
	}
	if out, _ := s.run("ls", "-A", "/etc/ovnbgp"); strings.TrimSpace(out) != "config.yaml.rpmsave" {
		t.Errorf("after rpm -e /etc/ovnbgp holds %q, want only config.yaml.rpmsave", out)
	}
	if out, err := s.run("rpm", "-q", "ovnbgp"); err == nil {
		t.Errorf("rpm still knows ovnbgp after rpm -e: %s", out)
	}
	checkRemoved(t, s)
}

// editConfig appends a line to the installed config in s, as an operator
// would, and returns the edited content.
func editConfig(t *testing.T, s *sandbox, conf string) string {
	t.Helper()
	s.mustRun("sh", "-c", "echo '# edited on this node' >>"+conf)
	edited := s.mustRun("cat", conf)
	if !strings.HasSuffix(edited, "# edited on this node\n") {
		t.Fatalf("editing %s in the sandbox: it holds\n%s", conf, edited)
	}
	return edited
}

// hostState is what this machine holds at each path (a file's mode, size
// and time, a directory's mode, or "absent"), and the dpkg status of
// ovnbgp, to compare before and after the sandboxes.
func hostState(paths []string) map[string]string {
	m := map[string]string{}
	for _, p := range paths {
		if st, err := os.Lstat(p); err != nil {
			m[p] = "absent"
		} else if st.IsDir() {
			m[p] = st.Mode().String() // others may add to /etc or /usr/share
		} else {
			m[p] = fmt.Sprintf("%s %d %s", st.Mode(), st.Size(), st.ModTime().Format(time.RFC3339Nano))
		}
	}
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "ovnbgp").CombinedOutput()
	m["dpkg-query -W ovnbgp"] = fmt.Sprintf("%q (%v)", out, err)
	return m
}
