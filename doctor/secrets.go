package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
)

// unitName is the systemd unit whose LoadCredential= lines feed
// $CREDENTIALS_DIRECTORY (packaging/systemd/ovnbgp.service).
const unitName = "ovnbgp.service"

// unitDirs are where systemd looks for unit files and drop-ins, first
// wins for the unit file itself.
func unitDirs() []string {
	return []string{"etc/systemd/system", "run/systemd/system", "usr/local/lib/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"}
}

// credStores are where systemd looks, in its order, for the source of
// LoadCredential=NAME (or of a relative source path), and with suffix
// ".encrypted" for LoadCredentialEncrypted=.
func credStores(suffix string) []string {
	var out []string
	for _, d := range []string{"etc", "run", "usr/local/lib", "usr/lib"} {
		out = append(out, d+"/credstore"+suffix)
	}
	return out
}

// checkSecrets: each peer's passwordFile holds a secret the daemon will
// accept. Doctor loads the config without reading secrets (it runs outside
// the unit, where $CREDENTIALS_DIRECTORY is not set) and checks them here
// by config.CheckSecret's rules: a file directly; a credential:NAME in
// $CREDENTIALS_DIRECTORY when doctor runs with one, else in the running
// unit's copy (/run/credentials/ovnbgp.service/NAME), else in the file the
// unit's LoadCredential=NAME:PATH names. When no unit file names it the
// result is a warning: systemd checks it at start. The secret is never
// shown.
func checkSecrets(_ context.Context, s *state) []Result {
	const id = "secrets"
	if s.cfg == nil {
		return needConfig(id)
	}
	fsys := s.env.Files()
	var creds map[string]loadCredential
	var out []Result
	for i, p := range s.cfg.BGP.Peers {
		if p.PasswordFile == "" {
			continue
		}
		who := "peer " + p.Name + ": "
		keyFix := fmt.Sprintf("bgp.peers[%d].passwordFile", i)
		ref, err := config.ParseSecretRef(p.PasswordFile)
		if err != nil { // the config check refused it already
			out = append(out, fail(id, "fix "+keyFix, "%s%v", who, err))
			continue
		}
		if ref.Path != "" {
			if !path.IsAbs(ref.Path) {
				out = append(out, warn(id, "give "+keyFix+" as an absolute path",
					"%s%s is a relative path: the daemon reads it relative to its working directory (/ under systemd)", who, ref.Path))
				continue
			}
			out = append(out, secretFile(fsys, id, who, ref.Path, "write the secret alone on one line into "+ref.Path+" (chmod 0600), or fix "+keyFix))
			continue
		}
		name := ref.Credential
		who += "credential " + name + ": "
		if dir := s.env.Getenv("CREDENTIALS_DIRECTORY"); dir != "" {
			out = append(out, secretFile(fsys, id, who, path.Join(dir, name), "fix the credential's source (LoadCredential="+name+":PATH)"))
			continue
		}
		if copyPath := "/run/credentials/" + unitName + "/" + name; exists(fsys, copyPath) {
			out = append(out, secretFile(fsys, id, who+"the running unit's copy ", copyPath, "fix the source file of the unit's LoadCredential="+name+":PATH, then systemctl restart ovnbgp"))
			continue
		}
		if creds == nil {
			creds = unitCredentials(fsys)
		}
		lc, ok := creds[name]
		if !ok {
			out = append(out, warn(id, "add LoadCredential="+name+":PATH to the unit (systemctl edit ovnbgp), PATH holding the secret alone on one line (chmod 0600)",
				"%sis read at start from $CREDENTIALS_DIRECTORY, which LoadCredential=%s:PATH fills: no %s unit file here names it; checked at start: LoadCredential=%s:PATH must exist",
				strings.TrimSuffix(who, ": ")+" ", name, unitName, name))
			continue
		}
		out = append(out, lc.check(fsys, id, who))
	}
	if len(out) == 0 {
		return []Result{skip(id, "no peer has a passwordFile")}
	}
	return out
}

// secretFile checks the secret file at abs (an absolute path) without
// ever blocking on it: it must be a regular file of at most
// config.MaxSecretFileSize bytes that config.CheckSecret accepts.
func secretFile(fsys fs.FS, id, who, abs, fix string) Result {
	fi, err := fs.Stat(fsys, strings.TrimPrefix(abs, "/"))
	switch {
	case notExist(err):
		return fail(id, fix, "%s%s does not exist", who, abs)
	case err != nil:
		return warn(id, "run doctor as root on the node", "%scannot read %s: %v", who, abs, err)
	case fi.IsDir():
		return fail(id, fix, "%s%s is a directory, not a regular file", who, abs)
	case !fi.Mode().IsRegular():
		return fail(id, fix, "%s%s is not a regular file (%s)", who, abs, fi.Mode().Type())
	case fi.Size() > config.MaxSecretFileSize:
		return fail(id, fix, "%s%s is larger than %d bytes: not a secret file", who, abs, config.MaxSecretFileSize)
	}
	data, err := fs.ReadFile(fsys, strings.TrimPrefix(abs, "/"))
	if err != nil {
		return warn(id, "run doctor as root on the node", "%scannot read %s: %v", who, abs, err)
	}
	if err := config.CheckSecret(abs, data, fi.Mode()); err != nil {
		return fail(id, fix, "%s%v", who, err)
	}
	return pass(id, "%s%s holds a secret (mode %04o)", who, abs, fi.Mode().Perm())
}

func exists(fsys fs.FS, abs string) bool {
	_, err := fs.Stat(fsys, strings.TrimPrefix(abs, "/"))
	return err == nil
}

// loadCredential is one LoadCredential= or LoadCredentialEncrypted= line.
type loadCredential struct {
	name, source string // source "" = the credential stores, by name
	encrypted    bool
	unitFile     string // where the line is
}

func (lc loadCredential) directive() string {
	d := "LoadCredential="
	if lc.encrypted {
		d = "LoadCredentialEncrypted="
	}
	d += lc.name
	if lc.source != "" {
		d += ":" + lc.source
	}
	return d
}

// check finds the file lc names (an absolute source, or a name in the
// credential stores) and checks it; an encrypted one only exists (systemd
// decrypts it at start, and the daemon checks the result).
func (lc loadCredential) check(fsys fs.FS, id, who string) Result {
	where := fmt.Sprintf("%s%s (%s): ", who, lc.directive(), lc.unitFile)
	fix := "fix " + lc.directive() + " in " + lc.unitFile + ", or write the secret alone on one line into its file (chmod 0600)"
	file := lc.source
	if !path.IsAbs(file) {
		stores := credStores("")
		if lc.encrypted {
			stores = credStores(".encrypted")
		}
		want := file
		if want == "" {
			want = lc.name
		}
		file = ""
		for _, d := range stores {
			if exists(fsys, "/"+path.Join(d, want)) {
				file = "/" + path.Join(d, want)
				break
			}
		}
		if file == "" {
			return fail(id, fix, "%sno credential store holds %s (/%s): the unit will not start", where, want, strings.Join(stores, ", /"))
		}
	}
	if lc.encrypted {
		if !exists(fsys, file) {
			return fail(id, fix, "%s%s does not exist: the unit will not start", where, file)
		}
		return pass(id, "%s%s exists (encrypted: systemd decrypts and ovnbgp checks it at start)", where, file)
	}
	r := secretFile(fsys, id, where, file, fix)
	if r.Status == Fail && strings.HasSuffix(r.Finding, " does not exist") {
		r.Finding += ": the unit will not start"
	}
	return r
}

// unitCredentials reads the LoadCredential= and LoadCredentialEncrypted=
// lines of ovnbgp.service (the first unit file found in unitDirs) and of
// its drop-ins (ovnbgp.service.d/*.conf in every unit directory, in file
// name order), by credential name; a later line for a name wins.
func unitCredentials(fsys fs.FS) map[string]loadCredential {
	var files []string
	for _, d := range unitDirs() {
		if f := path.Join(d, unitName); exists(fsys, "/"+f) {
			files = append(files, f)
			break
		}
	}
	var dropIns []string
	for _, d := range unitDirs() {
		ents, _ := fs.ReadDir(fsys, path.Join(d, unitName+".d"))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".conf") {
				dropIns = append(dropIns, path.Join(d, unitName+".d", e.Name()))
			}
		}
	}
	slices.SortStableFunc(dropIns, func(a, b string) int { return strings.Compare(path.Base(a), path.Base(b)) })
	out := map[string]loadCredential{}
	for _, f := range append(files, dropIns...) {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || (k != "LoadCredential" && k != "LoadCredentialEncrypted") || v == "" {
				continue
			}
			name, source, _ := strings.Cut(v, ":")
			out[name] = loadCredential{name: name, source: source, encrypted: k == "LoadCredentialEncrypted", unitFile: "/" + f}
		}
	}
	return out
}
