package ovn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// testCA is a throw-away certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

// issue writes a certificate and key for cn signed by ca, and returns the
// two file names.
func (ca *testCA) issue(t *testing.T, dir, cn string, serial int64, ips ...net.IP) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+"-cert.pem"), filepath.Join(dir, cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRealServerSSL(t *testing.T) {
	dir := shortDir(t)
	ca := newCA(t, dir, "ovn")
	srvCert, srvKey := ca.issue(t, dir, "ovnnb", 2, net.ParseIP("127.0.0.1"))
	cliCert, cliKey := ca.issue(t, dir, "ovnbgp", 3)
	s := ovsdbtest.Start(t, "", ovsdbtest.WithSSL(srvKey, srvCert, ca.file))
	s.MustNBCtl("ls-add", "node1", "--", "set", "logical_switch", "node1", "other_config:subnet=10.128.0.0/23")
	log := zaptest.NewLogger(t)

	p := make(poker, 1)
	c, err := ovn.Dial(context.Background(), config.OVN{
		Northbound: s.SSLEndpoint(),
		TLS:        config.TLS{CAFile: ca.file, CertFile: cliCert, KeyFile: cliKey},
	}, log, p.notify)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, 10*time.Second, snapshotIs(c, model.Snapshot{Node: "node1", Networks: []model.Network{
		{Name: "default", Topology: "layer3", Subnets: []model.Subnet{sub("10.128.0.0/23", "Logical_Switch node1 other_config:subnet")}},
	}}))

	// A client certificate from another CA is refused: never synced, and
	// the error says why.
	other := newCA(t, dir, "other")
	badCert, badKey := other.issue(t, dir, "intruder", 4)
	bad, err := ovn.Dial(context.Background(), config.OVN{
		Northbound: s.SSLEndpoint(),
		TLS:        config.TLS{CAFile: ca.file, CertFile: badCert, KeyFile: badKey},
	}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	eventually(t, 10*time.Second, func() (bool, string) {
		st := bad.Status()
		return st.Attempts >= 1 && st.LastError != "", "no failed attempt recorded"
	})
	if _, ok := bad.Snapshot("node1"); ok || bad.Connected() {
		t.Error("a client with a foreign certificate synced")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := shortDir(t)
	ca := newCA(t, dir, "ovn")
	cert, key := ca.issue(t, dir, "c", 2)
	notPEM := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(notPEM, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tls := range map[string]config.TLS{
		"no CA":         {},
		"CA not PEM":    {CAFile: notPEM},
		"cert, no key":  {CAFile: ca.file, CertFile: cert},
		"key, no cert":  {CAFile: ca.file, KeyFile: key},
		"key not a key": {CAFile: ca.file, CertFile: cert, KeyFile: notPEM},
	} {
		if c, err := ovn.Dial(context.Background(), config.OVN{Northbound: "ssl:127.0.0.1:9641", TLS: tls}, nil, nil); err == nil {
			c.Close()
			t.Errorf("%s: Dial: no error", name)
		}
	}
	c, err := ovn.Dial(context.Background(), config.OVN{Northbound: "ssl:127.0.0.1:9641",
		TLS: config.TLS{CAFile: ca.file, CertFile: cert, KeyFile: key}}, nil, nil)
	if err != nil {
		t.Fatalf("good TLS files: %v", err)
	}
	c.Close()
}
