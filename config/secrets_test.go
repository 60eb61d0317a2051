package config

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const secret = "s3cr3t-md5"

// writeSecret writes content to a new file in dir and returns its path.
func writeSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func withPasswordFile(t *testing.T, file string) string {
	return edit(t, afterTorA, afterTorA+"      passwordFile: "+file+"\n")
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"newline", secret + "\n", secret},
		{"crlf", secret + "\r\n", secret},
		{"no newline", secret, secret},
		{"inner spaces kept", " a b \n", " a b "},
		{"group-readable", secret + "\n", secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := writeSecret(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.content)
			if tt.name == "group-readable" {
				if err := os.Chmod(f, 0o640); err != nil {
					t.Fatal(err)
				}
			}
			c := mustParse(t, withPasswordFile(t, f))
			if got := c.BGP.Peers[0].Password; got != tt.want {
				t.Errorf("Password = %q, want %q", got, tt.want)
			}
			if c.BGP.Peers[0].PasswordFile != f {
				t.Errorf("PasswordFile = %q, want %q", c.BGP.Peers[0].PasswordFile, f)
			}
		})
	}
}

func TestPasswordFileProblems(t *testing.T) {
	dir := t.TempDir()
	empty := writeSecret(t, dir, "empty", "\n")
	long := writeSecret(t, dir, "long", strings.Repeat("x", 81))
	worldReadable := writeSecret(t, dir, "world", secret)
	if err := os.Chmod(worldReadable, 0o644); err != nil {
		t.Fatal(err)
	}
	groupReadable := writeSecret(t, dir, "group", secret)
	if err := os.Chmod(groupReadable, 0o640); err != nil {
		t.Fatal(err)
	}
	blank := writeSecret(t, dir, "blank", " \t \n")
	twoLines := writeSecret(t, dir, "two-lines", secret+"\nsecond\n")
	crInside := writeSecret(t, dir, "cr-inside", "ab\rcd\n")
	tests := []struct {
		name, file string
		env        map[string]string
		want       want
	}{
		{name: "missing", file: filepath.Join(dir, "nope"),
			want: want{"bgp.peers[0].passwordFile", fmt.Sprintf("cannot read %q: no such file or directory", filepath.Join(dir, "nope")), 10}},
		{name: "empty", file: empty, want: want{"bgp.peers[0].passwordFile", fmt.Sprintf("%q is empty", empty), 10}},
		{name: "too long", file: long, want: want{"bgp.peers[0].passwordFile", "81 bytes long; TCP MD5 allows at most 80", 10}},
		{name: "world-readable", file: worldReadable,
			want: want{"bgp.peers[0].passwordFile", "is readable by every user (mode 0644): run chmod o-rwx on it", 10}},
		{name: "whitespace only", file: blank, want: want{"bgp.peers[0].passwordFile", "holds only white space", 10}},
		{name: "two lines", file: twoLines, want: want{"bgp.peers[0].passwordFile", "holds more than one line", 10}},
		{name: "carriage return inside", file: crInside, want: want{"bgp.peers[0].passwordFile", "holds more than one line", 10}},
		{name: "credential without systemd", file: "credential:tor-a",
			want: want{"bgp.peers[0].passwordFile", "$CREDENTIALS_DIRECTORY is not set", 10}},
		{name: "credential with a path", file: "credential:../etc/shadow", env: map[string]string{"CREDENTIALS_DIRECTORY": dir},
			want: want{"bgp.peers[0].passwordFile", "a credential name is a plain file name", 10}},
		{name: "credential missing", file: "credential:tor-z", env: map[string]string{"CREDENTIALS_DIRECTORY": dir},
			want: want{"bgp.peers[0].passwordFile", filepath.Join(dir, "tor-z"), 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, withPasswordFile(t, tt.file), fakeHost(tt.env))
			checkErrors(t, errs, tt.want)
			if strings.Contains(errs.Error(), secret) {
				t.Errorf("an error shows the secret: %v", errs)
			}
		})
	}
}

func TestPasswordCredential(t *testing.T) {
	dir := t.TempDir()
	writeSecret(t, dir, "tor-a-md5", secret+"\n")
	c, err := parse([]byte(withPasswordFile(t, "credential:tor-a-md5")), "config.yaml",
		fakeHost(map[string]string{"CREDENTIALS_DIRECTORY": dir}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BGP.Peers[0].Password; got != secret {
		t.Errorf("Password = %q, want %q", got, secret)
	}

	// Parse reads the real environment.
	t.Setenv("CREDENTIALS_DIRECTORY", dir)
	c, err = Parse([]byte(withPasswordFile(t, "credential:tor-a-md5")), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BGP.Peers[0].Password; got != secret {
		t.Errorf("Parse: Password = %q, want %q", got, secret)
	}
}

// TestPasswordNeverPrinted marshals and prints a config holding a password
// every way the daemon and CLI do.
func TestPasswordNeverPrinted(t *testing.T) {
	f := writeSecret(t, t.TempDir(), "md5", secret+"\n")
	c := mustParse(t, withPasswordFile(t, f))
	if c.BGP.Peers[0].Password != secret {
		t.Fatalf("password not read")
	}
	r := c.Redacted()
	if r.BGP.Peers[0].Password != "" || !r.BGP.Peers[0].PasswordRedacted {
		t.Errorf("Redacted peer: Password %q, PasswordRedacted %v; want \"\", true", r.BGP.Peers[0].Password, r.BGP.Peers[0].PasswordRedacted)
	}
	if r.BGP.Peers[0].PasswordFile != f {
		t.Errorf("Redacted dropped passwordFile")
	}
	if c.BGP.Peers[0].Password != secret {
		t.Errorf("Redacted changed the original")
	}
	for _, cfg := range []struct {
		name string
		c    *Config
	}{{"original", c}, {"redacted", r}} {
		outputs := map[string]func() (string, error){
			"json": func() (string, error) { b, err := json.Marshal(cfg.c); return string(b), err },
			"yaml": func() (string, error) { b, err := yaml.Marshal(cfg.c); return string(b), err },
			"%v":   func() (string, error) { return fmt.Sprintf("%v", cfg.c), nil },
			"%+v":  func() (string, error) { return fmt.Sprintf("%+v", *cfg.c), nil },
			"%#v":  func() (string, error) { return fmt.Sprintf("%#v", cfg.c.BGP.Peers), nil },
			"%s":   func() (string, error) { return fmt.Sprintf("%s", cfg.c.BGP.Peers[0]), nil },
		}
		for how, out := range outputs {
			s, err := out()
			if err != nil {
				t.Fatalf("%s %s: %v", cfg.name, how, err)
			}
			if strings.Contains(s, secret) {
				t.Errorf("%s config printed with %s shows the password:\n%s", cfg.name, how, s)
			}
			if (how == "json" || how == "yaml") && !strings.Contains(s, RedactedPassword) {
				t.Errorf("%s config printed with %s does not show that a password is set:\n%s", cfg.name, how, s)
			}
		}
	}
}

// TestLoadSkipSecrets: with LoadOptions.SkipSecrets a passwordFile is
// recorded, not read: a credential: peer loads without
// $CREDENTIALS_DIRECTORY, a missing file is no error, Password stays
// empty and PasswordFile keeps the reference. The reference's syntax is
// still checked. Without the option the same file fails (the daemon's
// load is unchanged).
func TestLoadSkipSecrets(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cred := write("cred.yaml", withPasswordFile(t, "credential:tor-a"))
	missing := write("missing.yaml", withPasswordFile(t, filepath.Join(dir, "nope")))
	for _, f := range []string{cred, missing} {
		c, err := LoadWith(context.Background(), f, LoadOptions{SkipSecrets: true})
		if err != nil {
			t.Fatalf("%s with SkipSecrets: %v", f, err)
		}
		p := c.BGP.Peers[0]
		if p.Password != "" || p.PasswordFile == "" {
			t.Errorf("%s: Password %q, PasswordFile %q: want the reference kept and nothing read", f, p.Password, p.PasswordFile)
		}
		if _, err := Load(f); err == nil || !strings.Contains(err.Error(), "bgp.peers[0].passwordFile") {
			t.Errorf("Load(%s) without the option = %v, want the passwordFile error", f, err)
		}
	}
	if c, _ := LoadWith(context.Background(), cred, LoadOptions{SkipSecrets: true}); c != nil && c.BGP.Peers[0].PasswordFile != "credential:tor-a" {
		t.Errorf("PasswordFile = %q, want credential:tor-a", c.BGP.Peers[0].PasswordFile)
	}
	bad := write("bad.yaml", withPasswordFile(t, "credential:../etc/shadow"))
	_, err := LoadWith(context.Background(), bad, LoadOptions{SkipSecrets: true})
	if err == nil || !strings.Contains(err.Error(), "a credential name is a plain file name") {
		t.Errorf("bad credential name with SkipSecrets = %v, want the name refused", err)
	}
}

// TestSecretRefAndCheck: the exported pieces doctor checks secrets with
// are the ones Load reads them with.
func TestSecretRefAndCheck(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want SecretRef
		err  string
	}{
		{"/etc/ovnbgp/tor-a", SecretRef{Path: "/etc/ovnbgp/tor-a"}, ""},
		{"credential:tor-a", SecretRef{Credential: "tor-a"}, ""},
		{"credential:", SecretRef{}, "a credential name is a plain file name"},
		{"credential:a/b", SecretRef{}, "a credential name is a plain file name"},
	} {
		got, err := ParseSecretRef(tc.in)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("ParseSecretRef(%q) = %+v, %v; want %+v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		data string
		mode os.FileMode
		err  string
	}{
		{secret + "\n", 0o600, ""},
		{secret + "\n", 0o640, ""},
		{secret + "\n", 0o644, "readable by every user (mode 0644)"},
		{"\n", 0o600, "is empty"},
		{"a\nb\n", 0o600, "more than one line"},
		{strings.Repeat("x", 81), 0o600, "81 bytes long"},
	} {
		err := CheckSecret("/s", []byte(tc.data), tc.mode)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckSecret(%q, %o) = %v, want %q", tc.data, tc.mode, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("CheckSecret error shows the secret: %v", err)
		}
	}
}
