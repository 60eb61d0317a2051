package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// host is what Load reads from the machine besides the config file: the
// hostname and addresses for defaults, secret and TLS files. Tests fake it.
type host struct {
	hostname func() (string, error)
	// kubeletNodeName is KUBELET_NODE_NAME of the kubelet's environment
	// file on OpenShift ("" when there is none): kubeletNodeName.
	kubeletNodeName func() string
	interfaceAddrs  func() ([]net.Addr, error)
	getenv          func(string) string
	// readFile reads a regular file of at most limit bytes and returns
	// its information (readRegular).
	readFile func(path string, limit int64) ([]byte, fs.FileInfo, error)
	stat     func(string) (fs.FileInfo, error)
	// skipSecrets: passwordFile is recorded, not read (LoadOptions).
	skipSecrets bool
}

// systemHost reads the real machine.
func systemHost() host {
	return host{
		hostname: os.Hostname,
		kubeletNodeName: func() string {
			b, _, err := readRegular(KubeletNodeEnv, 64<<10)
			if err != nil {
				return ""
			}
			return kubeletNodeName(b)
		},
		interfaceAddrs: net.InterfaceAddrs,
		getenv:         os.Getenv,
		readFile:       readRegular,
		stat:           os.Stat,
	}
}

// Load reads the configuration file at path; see Parse. It reads only a
// regular file (a symlink to one is followed) of at most MaxConfigSize
// bytes, and never blocks on a FIFO or a device.
func Load(path string) (*Config, error) {
	return LoadContext(context.Background(), path)
}

// LoadContext is Load that stops when ctx is done: decoding checks ctx as
// it goes and returns an error saying it stopped. The work of decoding is
// bounded anyway (see Parse); ctx lets a caller stop sooner.
func LoadContext(ctx context.Context, path string) (*Config, error) {
	return LoadWith(ctx, path, LoadOptions{})
}

// LoadOptions change what LoadWith reads besides the file. The zero value
// is Load's behaviour.
type LoadOptions struct {
	// SkipSecrets records each peer's passwordFile without reading it:
	// Password stays empty and PasswordFile keeps the reference (a path,
	// or credential:NAME, whose syntax is still checked). For callers
	// that look at the config but never open a session, such as `ovnbgp
	// doctor`, which runs outside the unit (no $CREDENTIALS_DIRECTORY)
	// and checks the secrets itself. The daemon never sets it.
	SkipSecrets bool
}

// LoadWith is LoadContext with options.
func LoadWith(ctx context.Context, path string, o LoadOptions) (*Config, error) {
	data, _, err := readRegular(path, MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	h := systemHost()
	h.skipSecrets = o.SkipSecrets
	return parseContext(ctx, data, path, h)
}

// Parse decodes a configuration document, fills defaults, reads each peer's
// passwordFile into Password and validates the result. name (usually the
// file's path) prefixes error messages. On any problem it returns a nil
// Config and Errors listing every problem with its key path and line.
//
// The document is decoded from the yaml.v3 node tree, not through viper:
// see the comment at the top of decode.go for why. A document larger than
// MaxConfigSize, or one whose anchors and merge keys expand beyond a fixed
// budget (a YAML alias bomb), is refused with an error saying so.
func Parse(data []byte, name string) (*Config, error) {
	return parse(data, name, systemHost())
}

// ParseContext is Parse that stops when ctx is done (see LoadContext). The
// daemon parses a config sent through the control socket (`ovnbgp plan
// --config`) with it: the CLI reads the file, the one parser reads the text.
func ParseContext(ctx context.Context, data []byte, name string) (*Config, error) {
	return parseContext(ctx, data, name, systemHost())
}

func parse(data []byte, name string, h host) (*Config, error) {
	return parseContext(context.Background(), data, name, h)
}

func parseContext(ctx context.Context, data []byte, name string, h host) (*Config, error) {
	if len(data) > MaxConfigSize {
		return nil, Errors{{File: name, Msg: fmt.Sprintf("the document is %d bytes long; at most %d are read", len(data), MaxConfigSize)}}
	}
	root, err := parseYAML(data)
	if err != nil {
		return nil, Errors{fieldErrorOf(name, err)}
	}
	c := &Config{}
	c.setDefaults()
	d := newDecoder(ctx)
	if root != nil {
		d.decode(root, reflect.ValueOf(c).Elem(), "")
	}
	if d.stopped {
		d.errs[0].File = name
		return nil, d.errs
	}
	c.deriveDefaults(h)

	errs := d.errs
	skip := d.failed
	secrets := c.readSecrets(h)
	for _, e := range secrets {
		skip[e.Path] = true
	}
	errs = append(errs, secrets...)
	for _, e := range c.validate(h) {
		if !failedUnder(skip, e.Path) {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return c, nil
	}
	for i := range errs {
		errs[i].File = name
		if errs[i].Line == 0 {
			errs[i].Line = lineOf(d.lines, errs[i].Path)
		}
	}
	errs.sort()
	return nil, errs
}

// parseYAML parses one YAML document into its root node; nil for an empty
// document.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		return nil, fmt.Errorf("yaml: line %d: only one YAML document is allowed (remove the \"---\")", next.Line)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// fieldErrorOf turns a YAML syntax error ("yaml: line 3: ...") into a
// FieldError with that line.
func fieldErrorOf(name string, err error) FieldError {
	msg, _ := strings.CutPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(num); err == nil {
				return FieldError{File: name, Line: line, Msg: "invalid YAML: " + text}
			}
		}
	}
	return FieldError{File: name, Msg: "invalid YAML: " + msg}
}

// failedUnder reports whether path is at or inside a path that failed.
func failedUnder(failed map[string]bool, path string) bool {
	for p := path; ; p = parentPath(p) {
		if failed[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// lineOf is the line of path, or of its nearest ancestor present in the
// document (a missing key is reported where its parent is).
func lineOf(lines map[string]int, path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := lines[p]; ok {
			return l
		}
	}
	return 0
}

// readSecrets reads each peer's passwordFile into Password; with
// h.skipSecrets it only checks the reference.
func (c *Config) readSecrets(h host) Errors {
	var r report
	for i := range c.BGP.Peers {
		p := &c.BGP.Peers[i]
		if p.PasswordFile == "" {
			continue
		}
		if h.skipSecrets {
			if _, err := ParseSecretRef(p.PasswordFile); err != nil {
				r.add(key(index("bgp.peers", i), "passwordFile"), "%v", err)
			}
			continue
		}
		secret, err := readSecret(h, p.PasswordFile)
		if err != nil {
			r.add(key(index("bgp.peers", i), "passwordFile"), "%v", err)
			continue
		}
		p.Password = secret
	}
	return r.errs
}

// maxMD5KeyLen is the kernel's TCP_MD5SIG_MAXKEYLEN.
const maxMD5KeyLen = 80

// credentialPrefix marks a passwordFile that names a systemd credential.
const credentialPrefix = "credential:"

// SecretRef is where a peer's passwordFile points: a systemd credential
// (read from $CREDENTIALS_DIRECTORY/Credential, i.e. systemd's
// LoadCredential=Credential:PATH) or a file (Path). One is set.
type SecretRef struct {
	Credential string
	Path       string
}

// ParseSecretRef splits a passwordFile value: "credential:NAME" names a
// credential (NAME a plain file name), anything else a file.
func ParseSecretRef(passwordFile string) (SecretRef, error) {
	name, ok := strings.CutPrefix(passwordFile, credentialPrefix)
	if !ok {
		return SecretRef{Path: passwordFile}, nil
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return SecretRef{}, fmt.Errorf("%q: a credential name is a plain file name, e.g. credential:tor-a-md5", passwordFile)
	}
	return SecretRef{Credential: name}, nil
}

// readSecret reads a TCP MD5 secret from file, or from
// $CREDENTIALS_DIRECTORY/NAME for "credential:NAME" (systemd's
// LoadCredential=), without its trailing newline. Its errors name the file
// but never the secret.
func readSecret(h host, file string) (string, error) {
	ref, err := ParseSecretRef(file)
	if err != nil {
		return "", err
	}
	path := ref.Path
	if ref.Credential != "" {
		dir := h.getenv("CREDENTIALS_DIRECTORY")
		if dir == "" {
			return "", fmt.Errorf("%q: $CREDENTIALS_DIRECTORY is not set (run under systemd with LoadCredential=%s:PATH)", file, ref.Credential)
		}
		path = filepath.Join(dir, ref.Credential)
	}
	data, fi, err := h.readFile(path, MaxSecretFileSize)
	if err != nil {
		return "", err
	}
	if err := CheckSecret(path, data, fi.Mode()); err != nil {
		return "", err
	}
	return secretOf(data), nil
}

// secretOf is a secret file's content without its trailing newline.
func secretOf(data []byte) string { return strings.TrimRight(string(data), "\r\n") }

// CheckSecret checks the content and mode of a secret file read from path
// as Load does: not readable by every user, one non-blank line of at most
// 80 bytes (a trailing newline is dropped). Its errors name path and say
// how to fix it, never the secret.
func CheckSecret(path string, data []byte, mode fs.FileMode) error {
	if perm := mode.Perm(); perm&0o004 != 0 {
		return fmt.Errorf("%q is readable by every user (mode %04o): run chmod o-rwx on it (group-readable is fine)", path, perm)
	}
	secret := secretOf(data)
	switch {
	case secret == "":
		return fmt.Errorf("%q is empty", path)
	case strings.ContainsAny(secret, "\r\n"):
		return fmt.Errorf("%q holds more than one line: write the secret alone on one line", path)
	case strings.TrimSpace(secret) == "":
		return fmt.Errorf("%q holds only white space", path)
	case len(secret) > maxMD5KeyLen:
		return fmt.Errorf("the secret in %q is %d bytes long; TCP MD5 allows at most %d", path, len(secret), maxMD5KeyLen)
	}
	return nil
}
