package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/ovnbgp/ovnbgp/config"
)

// maxTLSFileSize caps each TLS file read (a certificate chain is a few KB).
const maxTLSFileSize = 1 << 20

// tlsConfig builds the client TLS configuration for ssl: endpoints from
// the configured files: the CA that signed the server's certificate, and the
// client certificate and key OVN's ovsdb-server asks for. The server's
// certificate is verified as usual, so it must name the endpoint's host in
// its subject alternative names.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if t.CAFile == "" {
		return nil, fmt.Errorf("ovn.tls.caFile is required for ssl: endpoints")
	}
	pem, err := config.ReadRegularFile(t.CAFile, maxTLSFileSize)
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
		certPEM, err := config.ReadRegularFile(t.CertFile, maxTLSFileSize)
		if err != nil {
			return nil, fmt.Errorf("ovn.tls.certFile: %w", err)
		}
		keyPEM, err := config.ReadRegularFile(t.KeyFile, maxTLSFileSize)
		if err != nil {
			return nil, fmt.Errorf("ovn.tls.keyFile: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("ovn.tls.certFile/keyFile: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
