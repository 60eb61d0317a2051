package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Scheme is an OVSDB connection method (ovsdb(7) "active" methods).
type Scheme string

// The OVSDB connection methods ovnbgp speaks.
const (
	SchemeUnix Scheme = "unix"
	SchemeTCP  Scheme = "tcp"
	SchemeSSL  Scheme = "ssl"
)

// Endpoint is one OVN Northbound remote, parsed: unix:PATH, tcp:HOST:PORT or
// ssl:HOST:PORT.
type Endpoint struct {
	Scheme Scheme
	// Path is the socket path of a unix: endpoint.
	Path string
	// Host and Port are those of a tcp: or ssl: endpoint (Host without the
	// brackets of an IPv6 address).
	Host string
	Port int
}

// String writes the endpoint as ovsdb(7) and libovsdb read it.
func (e Endpoint) String() string {
	if e.Scheme == SchemeUnix {
		return "unix:" + e.Path
	}
	return string(e.Scheme) + ":" + net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// Endpoints is ovn.northbound parsed: one or more remotes (a clustered NB).
type Endpoints []Endpoint

// NeedTLS reports whether an endpoint is ssl:.
func (es Endpoints) NeedTLS() bool {
	for _, e := range es {
		if e.Scheme == SchemeSSL {
			return true
		}
	}
	return false
}

// Strings writes each endpoint.
func (es Endpoints) Strings() []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return out
}

// String is the comma-separated list, as ovn.northbound is written.
func (es Endpoints) String() string { return strings.Join(es.Strings(), ",") }

// Endpoints parses Northbound (ParseNorthbound).
func (o OVN) Endpoints() (Endpoints, error) { return ParseNorthbound(o.Northbound) }

// ParseNorthbound parses a comma-separated list of OVSDB remotes (unix:PATH,
// tcp:HOST:PORT, ssl:HOST:PORT; IPv6 hosts in brackets). It is ovnbgp's only
// parser of NB endpoints: Validate reports its errors, package ovn dials
// what it returns. The error lists every bad endpoint.
func ParseNorthbound(s string) (Endpoints, error) {
	eps, errs := parseNorthbound(s)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return eps, nil
}

func parseNorthbound(s string) (Endpoints, []error) {
	var eps Endpoints
	var errs []error
	for f := range strings.SplitSeq(s, ",") {
		ep := strings.TrimSpace(f)
		if ep == "" {
			continue
		}
		e, err := parseEndpoint(ep)
		if err != nil {
			errs = append(errs, err)
		}
		if e.Scheme != "" {
			eps = append(eps, e) // a bad ssl: endpoint still wants TLS files
		}
	}
	if len(eps) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no endpoint given (e.g. unix:/var/run/ovn-ic/ovnnb_db.sock, tcp:HOST:6641)"))
	}
	return eps, errs
}

// parseEndpoint parses one remote; on error, the Endpoint still has the
// scheme when it is a known one.
func parseEndpoint(ep string) (Endpoint, error) {
	scheme, rest, _ := strings.Cut(ep, ":")
	switch s := Scheme(scheme); s {
	case SchemeUnix:
		if rest == "" {
			return Endpoint{}, fmt.Errorf("%q: unix: needs a socket path", ep)
		}
		return Endpoint{Scheme: s, Path: rest}, nil
	case SchemeTCP, SchemeSSL:
		h, port, err := splitHostPort(rest, false)
		if err != nil {
			return Endpoint{Scheme: s}, fmt.Errorf("%q: %v (write %s:HOST:PORT, IPv6 hosts in brackets)", ep, err, s)
		}
		return Endpoint{Scheme: s, Host: h, Port: port}, nil
	}
	return Endpoint{}, fmt.Errorf("%q is not unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT", ep)
}

// splitHostPort reads "HOST:PORT" (IPv6 hosts in brackets); an empty host
// is allowed only if emptyHost.
func splitHostPort(hp string, emptyHost bool) (string, int, error) {
	h, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not HOST:PORT", hp)
	}
	if h == "" && !emptyHost {
		return "", 0, errors.New("the host is missing")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number in 1..65535", port)
	}
	return h, n, nil
}
