package doctor

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// TestCheckSecrets: each peer's passwordFile, as the daemon will read it:
// a file is read and checked by config.CheckSecret's rules; a
// credential:NAME from $CREDENTIALS_DIRECTORY, the running unit's copy, or
// the file the unit's LoadCredential= names; a warning when no unit file
// names it (it is checked at start).
func TestCheckSecrets(t *testing.T) {
	peer := func(file string) string {
		return strings.Replace(baseConfig, "asn: 65001}", "asn: 65001, passwordFile: \""+file+"\"}", 1)
	}
	const good = "s3cr3t\n"
	secret := func(data string, mode uint32) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(data), Mode: fs.FileMode(mode)}
	}
	dropIn := func(line string) fstest.MapFS {
		return fstest.MapFS{
			"etc/systemd/system/ovnbgp.service":                   {Data: []byte("[Service]\n# LoadCredential=tor-a:/etc/ovnbgp/secrets/commented\nExecStart=/usr/local/bin/ovnbgp daemon\n")},
			"etc/systemd/system/ovnbgp.service.d/10-secrets.conf": {Data: []byte("[Service]\n" + line + "\n")},
		}
	}
	with := func(fsys fstest.MapFS, path string, f *fstest.MapFile) fstest.MapFS {
		fsys[path] = f
		return fsys
	}
	for _, tc := range []struct {
		name string
		env  *fakeEnv
		doc  string
		want []string
	}{
		{"no passwordFile", &fakeEnv{}, baseConfig, []string{"skip:no peer has a passwordFile"}},
		{"no config", &fakeEnv{}, "", []string{"skip:needs a valid config"}},
		{"file", &fakeEnv{files: fstest.MapFS{"etc/ovnbgp/tor-a": secret(good, 0o640)}}, peer("/etc/ovnbgp/tor-a"),
			[]string{"pass:peer tor-a: /etc/ovnbgp/tor-a holds a secret (mode 0640)"}},
		{"file readable by all", &fakeEnv{files: fstest.MapFS{"etc/ovnbgp/tor-a": secret(good, 0o644)}}, peer("/etc/ovnbgp/tor-a"),
			[]string{"fail:peer tor-a: \"/etc/ovnbgp/tor-a\" is readable by every user"}},
		{"file of two lines", &fakeEnv{files: fstest.MapFS{"etc/ovnbgp/tor-a": secret("a\nb\n", 0o600)}}, peer("/etc/ovnbgp/tor-a"),
			[]string{"fail:holds more than one line"}},
		{"file missing", &fakeEnv{}, peer("/etc/ovnbgp/tor-a"), []string{"fail:peer tor-a: /etc/ovnbgp/tor-a does not exist"}},
		{"file is a directory", &fakeEnv{files: fstest.MapFS{"etc/ovnbgp/tor-a/x": secret(good, 0o600)}}, peer("/etc/ovnbgp/tor-a"),
			[]string{"fail:is a directory, not a regular file"}},
		{"relative file", &fakeEnv{}, peer("secrets/tor-a"), []string{"warn:relative"}},
		{"credential in $CREDENTIALS_DIRECTORY", &fakeEnv{env: map[string]string{"CREDENTIALS_DIRECTORY": "/run/credentials/x.service"},
			files: fstest.MapFS{"run/credentials/x.service/tor-a": secret(good, 0o400)}}, peer("credential:tor-a"),
			[]string{"pass:peer tor-a: credential tor-a: /run/credentials/x.service/tor-a holds a secret"}},
		{"credential of the running unit", &fakeEnv{files: fstest.MapFS{"run/credentials/ovnbgp.service/tor-a": secret(good, 0o400)}}, peer("credential:tor-a"),
			[]string{"pass:credential tor-a: the running unit's copy /run/credentials/ovnbgp.service/tor-a holds a secret"}},
		{"credential the unit loads", &fakeEnv{files: with(dropIn("LoadCredential=tor-a:/etc/ovnbgp/secrets/tor-a"), "etc/ovnbgp/secrets/tor-a", secret(good, 0o600))}, peer("credential:tor-a"),
			[]string{"pass:credential tor-a: LoadCredential=tor-a:/etc/ovnbgp/secrets/tor-a (/etc/systemd/system/ovnbgp.service.d/10-secrets.conf): /etc/ovnbgp/secrets/tor-a holds a secret"}},
		{"credential the unit loads from a missing file", &fakeEnv{files: dropIn("LoadCredential=tor-a:/etc/ovnbgp/secrets/tor-a")}, peer("credential:tor-a"),
			[]string{"fail:/etc/ovnbgp/secrets/tor-a does not exist: the unit will not start"}},
		{"credential the unit loads, bad content", &fakeEnv{files: with(dropIn("LoadCredential=tor-a:/etc/ovnbgp/secrets/tor-a"), "etc/ovnbgp/secrets/tor-a", secret("\n", 0o600))}, peer("credential:tor-a"),
			[]string{"fail:is empty"}},
		{"credential from the credential store", &fakeEnv{files: with(dropIn("LoadCredential=tor-a"), "etc/credstore/tor-a", secret(good, 0o600))}, peer("credential:tor-a"),
			[]string{"pass:/etc/credstore/tor-a holds a secret"}},
		{"credential not in the store", &fakeEnv{files: dropIn("LoadCredential=tor-a:tor-a-md5")}, peer("credential:tor-a"),
			[]string{"fail:no credential store holds tor-a-md5"}},
		{"encrypted credential", &fakeEnv{files: with(dropIn("LoadCredentialEncrypted=tor-a:/etc/ovnbgp/tor-a.cred"), "etc/ovnbgp/tor-a.cred", secret("Whxqht+dQJax1aZeCGLxmiAAAAABAAAADAAAABAAAAC\n", 0o600))}, peer("credential:tor-a"),
			[]string{"pass:/etc/ovnbgp/tor-a.cred exists (encrypted: systemd decrypts and ovnbgp checks it at start)"}},
		{"credential no unit names", &fakeEnv{files: dropIn("Environment=X=1")}, peer("credential:tor-a"),
			[]string{"warn:peer tor-a: credential tor-a is read at start from $CREDENTIALS_DIRECTORY, which LoadCredential=tor-a:PATH fills: no ovnbgp.service unit file here names it"}},
		{"credential in the packaged unit", &fakeEnv{files: fstest.MapFS{
			"usr/lib/systemd/system/ovnbgp.service": {Data: []byte("[Service]\nLoadCredential = tor-a:/etc/ovnbgp/secrets/tor-a\n")},
			"etc/ovnbgp/secrets/tor-a":              secret(good, 0o600)}}, peer("credential:tor-a"),
			[]string{"pass:(/usr/lib/systemd/system/ovnbgp.service)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := run(t, checkSecrets, tc.env, tc.doc)
			expect(t, rs, tc.want...)
			if strings.Contains(dump(rs), "s3cr3t") {
				t.Errorf("a result shows the secret:\n%s", dump(rs))
			}
		})
	}
}
