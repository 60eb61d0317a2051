package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// DefaultNorthboundSockets are the unix sockets looked for, in this order,
// while ovn.northbound is unset: OpenShift 4.14 and later (interconnect
// mode), where ovnkube-node's run-ovn volume is the host path
// /var/run/ovn-ic, then OVN's own run directory. A new slice each call.
func DefaultNorthboundSockets() []string {
	return []string{"/var/run/ovn-ic/ovnnb_db.sock", "/var/run/ovn/ovnnb_db.sock"}
}

// NBSource says where the NB endpoints come from.
type NBSource string

// The sources of the NB endpoints.
const (
	// NBConfigured: ovn.northbound is set, and dialled as it is written.
	NBConfigured NBSource = "configured"
	// NBDiscovered: ovn.northbound is unset; the endpoints are the sockets
	// of ovn.northboundSockets that exist, looked for before each attempt.
	NBDiscovered NBSource = "discovered"
)

// What a look at one candidate socket found.
const (
	NBSocket    = "socket"
	NBAbsent    = "absent"
	NBNotSocket = "not a socket"
)

// NBCandidate is one socket path looked at, and what was there: NBSocket,
// NBAbsent, NBNotSocket, or the error of the look.
type NBCandidate struct {
	Path  string `json:"path"`
	State string `json:"state"`
}

func (c NBCandidate) String() string { return c.Path + " (" + c.State + ")" }

// NBTarget is how ovnbgp reaches NB: the configured endpoints, or the
// sockets to look for. Every part of ovnbgp that talks to NB (the daemon,
// doctor, config validate) gets it from OVN.Target and asks Find, so they
// all say the same.
type NBTarget struct {
	Source NBSource
	// Configured are the endpoints of ovn.northbound (NBConfigured).
	Configured Endpoints
	// Sockets are the paths looked for, in order (NBDiscovered).
	Sockets []string
}

// Target is ovn.northbound parsed, or, when it is unset, the sockets of
// ovn.northboundSockets (DefaultNorthboundSockets when that is empty too).
func (o OVN) Target() (NBTarget, error) {
	if strings.TrimSpace(o.Northbound) != "" {
		if len(o.NorthboundSockets) > 0 {
			return NBTarget{}, errors.New("ovn.northboundSockets is only used while ovn.northbound is unset")
		}
		eps, err := ParseNorthbound(o.Northbound)
		if err != nil {
			return NBTarget{}, err
		}
		return NBTarget{Source: NBConfigured, Configured: eps}, nil
	}
	socks := o.NorthboundSockets
	if len(socks) == 0 {
		socks = DefaultNorthboundSockets()
	}
	for _, s := range socks {
		if !strings.HasPrefix(s, "/") {
			return NBTarget{}, fmt.Errorf("ovn.northboundSockets: %q is not an absolute path", s)
		}
	}
	return NBTarget{Source: NBDiscovered, Sockets: append([]string(nil), socks...)}, nil
}

// Find returns the endpoints to dial now. Configured: the endpoints as
// written, nothing tried. Discovered: every candidate that is a unix
// socket now, in order (a client takes the first that answers), and what
// each candidate was. It reads the file system each call: call it before
// each attempt, so that a socket that appears later is found.
func (t NBTarget) Find() (Endpoints, []NBCandidate) {
	if t.Source != NBDiscovered {
		return t.Configured, nil
	}
	var eps Endpoints
	tried := make([]NBCandidate, 0, len(t.Sockets))
	for _, p := range t.Sockets {
		c := NBCandidate{Path: p, State: NBSocket}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			c.State = NBAbsent
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			c.State = err.Error()
		case fi.Mode().Type() != fs.ModeSocket:
			c.State = NBNotSocket
		default:
			eps = append(eps, Endpoint{Scheme: SchemeUnix, Path: p})
		}
		tried = append(tried, c)
	}
	return eps, tried
}

// String says what the target is: the configured endpoints, or where the
// sockets are looked for.
func (t NBTarget) String() string {
	if t.Source != NBDiscovered {
		return t.Configured.String()
	}
	return "discovered from " + strings.Join(t.Sockets, " then ")
}

// NotFound is the error of a Find that found no socket: it names every
// path and what was there, and how to fix it.
func (t NBTarget) NotFound(tried []NBCandidate) error {
	parts := make([]string, len(tried))
	for i, c := range tried {
		parts[i] = c.String()
	}
	return fmt.Errorf("ovn.northbound is unset and no NB socket was found (tried %s); ovnbgp keeps looking: "+
		"OVN-Kubernetes' ovnkube-node creates it when it starts (on OpenShift 4.14 and later at /var/run/ovn-ic/ovnnb_db.sock). "+
		"If this node's NB is elsewhere, set ovn.northbound", strings.Join(parts, ", "))
}

// Equal reports whether o and p reach NB the same way and read the same
// tables (a reload that changes them reconnects).
func (o OVN) Equal(p OVN) bool {
	return o.Northbound == p.Northbound && o.TLS == p.TLS && slices.Equal(o.NorthboundSockets, p.NorthboundSockets) && o.Workloads == p.Workloads
}
