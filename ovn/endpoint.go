package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/ovnbgp/ovnbgp/config"
)

// tlsConfig builds the client TLS configuration for ssl: endpoints from
// the configured files: the CA that signed the server's certificate, and the
// client certificate and key OVN's ovsdb-server asks for. The server's
// certificate is verified as usual, so it must name the endpoint's host in
// its subject alternative names.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if t.CAFile == "" {
		return nil, fmt.Errorf("ovn.tls.caFile is required for ssl: endpoints")
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("ovn.tls.caFile: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ovn.tls.caFile %s: no PEM certificate in it", t.CAFile)
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
	case t.CertFile == "" || t.KeyFile == "":
		return nil, fmt.Errorf("ovn.tls: certFile and keyFile go together (certFile %q, keyFile %q)", t.CertFile, t.KeyFile)
	default:
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("ovn.tls.certFile/keyFile: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
