package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
// against the deb's, its config files and scripts. Then, when nothing of
// ovnbgp is installed on this machine, it installs the deb with dpkg -i:
// files and modes on disk, `ovnbgp version` from /usr/bin, the unit
// verified by systemd-analyze, the service neither enabled nor started, a
// local edit of the config kept over a reinstall; and purges it: every file
// is gone, and every directory the package made.
func TestPackages(t *testing.T) {
	needRoot(t, "dpkg -i installs into /")
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

	installAndPurge(t, deb, bin, files, dirs)
}

// installAndPurge installs the deb on this machine, checks it, and purges
// it. It refuses to touch a machine where ovnbgp is already installed.
func installAndPurge(t *testing.T, deb, bin string, files, dirs map[string]string) {
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "ovnbgp").Output(); err == nil && len(out) > 0 && !strings.Contains(string(out), "not-installed") {
		refuse(t, "the ovnbgp package is installed on this machine ("+string(out)+"): not installing over it; dpkg -P ovnbgp first")
	}
	for p := range files {
		if _, err := os.Lstat(p); err == nil {
			refuse(t, p+" exists on this machine: not installing over it")
		}
	}
	existed := map[string]bool{}
	for d := range dirs {
		if _, err := os.Lstat(d); err == nil {
			existed[d] = true
		}
	}
	for _, p := range []string{"/etc/ovnbgp", "/var/lib/ovnbgp", "/run/ovnbgp"} {
		if _, err := os.Lstat(p); err == nil {
			refuse(t, p+" exists on this machine: not installing over it")
		}
	}
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	purged := false
	t.Cleanup(func() {
		if !purged {
			_, _ = runIn("", env, "dpkg", "-P", "ovnbgp")
		}
		_ = os.RemoveAll("/var/lib/ovnbgp") // made by this test, checked absent before
	})
	mustRun(t, env, "dpkg", "-i", deb)

	for p, mode := range files {
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("installed: %v", err)
			continue
		}
		if got := st.Mode().String(); got != mode {
			t.Errorf("installed %s has mode %s, want %s", p, got, mode)
		}
	}
	if got, want := mustRun(t, nil, "/usr/bin/ovnbgp", "version", "-o", "json"), mustRun(t, nil, bin, "version", "-o", "json"); got != want {
		t.Errorf("/usr/bin/ovnbgp version -o json:\n%s\nwant\n%s", got, want)
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		out, err := runIn("", nil, sa, "verify", "--man=no", "/usr/lib/systemd/system/ovnbgp.service")
		if err != nil || len(parseWarnings(out, "ovnbgp.service")) > 0 {
			t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
		}
	}
	if m, _ := filepath.Glob("/etc/systemd/system/*.wants/ovnbgp.service"); len(m) > 0 {
		t.Errorf("installing enabled the service: %q", m)
	}
	if pids := processesOf("/usr/bin/ovnbgp"); len(pids) > 0 {
		t.Errorf("installing started /usr/bin/ovnbgp (pids %v)", pids)
	}

	// A local edit of the config survives a reinstall (a conffile).
	conf := "/etc/ovnbgp/config.yaml"
	edited := mustRead(t, conf) + "# edited on this node\n"
	if err := os.WriteFile(conf, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, env, "dpkg", "-i", deb)
	if got := mustRead(t, conf); got != edited {
		t.Errorf("reinstalling replaced the edited %s", conf)
	}

	// The daemon's state, as systemd's StateDirectory= and a drain make it:
	// a purge removes it.
	if err := os.MkdirAll("/var/lib/ovnbgp", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/var/lib/ovnbgp/drain.json", []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	mustRun(t, env, "dpkg", "-P", "ovnbgp")
	purged = true
	for p := range files {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after dpkg -P", p)
		}
	}
	for d := range dirs {
		if _, err := os.Lstat(d); err == nil && !existed[d] {
			t.Errorf("directory %s, made by the package, is left after dpkg -P", d)
		}
	}
	for _, p := range []string{"/var/lib/ovnbgp", "/run/ovnbgp"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after dpkg -P", p)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "ovnbgp").Output(); err == nil && strings.Contains(string(out), "installed") && !strings.Contains(string(out), "not-installed") {
		t.Errorf("dpkg still knows ovnbgp after dpkg -P: %s", out)
	}
}

// refuse stops a test that would change a machine it must not touch: a
// failure under CI=true (CI's machine must be clean), a skip elsewhere.
func refuse(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// processesOf lists the pids whose executable is exe.
func processesOf(exe string) []string {
	var pids []string
	m, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range m {
		if target, err := os.Readlink(p); err == nil && (target == exe || target == exe+" (deleted)") {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}
