package ovn

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/ovnbgp/ovnbgp/config"
)

// parseEndpoints splits a comma-separated OVSDB remote list (ovsdb(7)
// "active" connection methods: unix:PATH, tcp:HOST:PORT, ssl:HOST:PORT) and
// checks each. It reports whether any endpoint needs TLS.
func parseEndpoints(s string) (eps []string, needTLS bool, err error) {
	for _, f := range strings.Split(s, ",") {
		ep := strings.TrimSpace(f)
		if ep == "" {
			continue
		}
		scheme, rest, ok := strings.Cut(ep, ":")
		if !ok {
			return nil, false, fmt.Errorf("ovn endpoint %q: want unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT", ep)
		}
		switch scheme {
		case "unix":
			if rest == "" {
				return nil, false, fmt.Errorf("ovn endpoint %q: empty socket path", ep)
			}
		case "tcp", "ssl":
			host, port, err := net.SplitHostPort(rest)
			if err != nil || host == "" || port == "" {
				return nil, false, fmt.Errorf("ovn endpoint %q: want %s:HOST:PORT (IPv6 hosts in brackets)", ep, scheme)
			}
			needTLS = needTLS || scheme == "ssl"
		default:
			return nil, false, fmt.Errorf("ovn endpoint %q: unknown method %q (want unix, tcp or ssl)", ep, scheme)
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, false, fmt.Errorf("ovn endpoint: none given")
	}
	return eps, needTLS, nil
}

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
