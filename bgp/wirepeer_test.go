package bgp

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// wirePeer is a scripted BGP speaker on the wire (as ExaBGP is in the e2e
// tests): it listens on a loopback address, answers the node's OPEN with
// its own (IPv4 and IPv6 unicast, 4-byte ASN) and then sends exactly the
// UPDATEs a test builds, including those a real router never sends. The
// node's side is the real gobgp.
type wirePeer struct {
	t    testing.TB
	asn  uint32
	id   netip.Addr
	ln   net.Listener
	mu   sync.Mutex
	conn net.Conn
	up   chan struct{}
	// gr: the OPEN offers graceful restart (RFC 4724) for both families,
	// forwarding preserved, so the node keeps this peer's paths stale
	// when the session drops without a NOTIFICATION.
	gr bool
	// notifs are the NOTIFICATIONs the node sent, in order.
	notifs []*bgppkt.BGPNotification
	// sent counts, per prefix, the UPDATEs announcing it (IPv4 NLRI).
	sent map[netip.Prefix]int
	// withdrawn counts, per prefix, the UPDATEs withdrawing it (IPv4).
	withdrawn map[netip.Prefix]int
}

// newWirePeer listens on addr:port; each connection the node makes
// replaces the previous one (a reset session comes back by itself).
func newWirePeer(t testing.TB, addr netip.Addr, port int, asn uint32) *wirePeer {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		t.Fatalf("wire peer: listen: %v", err)
	}
	w := &wirePeer{t: t, asn: asn, id: addr, ln: ln, up: make(chan struct{}, 8)}
	t.Cleanup(func() {
		ln.Close()
		w.mu.Lock()
		if w.conn != nil {
			w.conn.Close()
		}
		w.mu.Unlock()
	})
	go w.accept()
	return w
}

func (w *wirePeer) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		go w.serve(c)
	}
}

func readMessage(r io.Reader) (*bgppkt.BGPMessage, error) {
	hdr := make([]byte, bgppkt.BGP_HEADER_LENGTH)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(hdr[16:18]))
	copy(buf, hdr)
	if _, err := io.ReadFull(r, buf[len(hdr):]); err != nil {
		return nil, err
	}
	return bgppkt.ParseBGPMessage(buf)
}

func (w *wirePeer) serve(c net.Conn) {
	if _, err := readMessage(c); err != nil { // the node's OPEN
		c.Close()
		return
	}
	caps := []bgppkt.ParameterCapabilityInterface{
		bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC),
		bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv6_UC),
		bgppkt.NewCapFourOctetASNumber(w.asn),
	}
	w.mu.Lock()
	if w.gr {
		caps = append(caps, bgppkt.NewCapGracefulRestart(false, false, 120, []*bgppkt.CapGracefulRestartTuple{
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv4_UC, true),
			bgppkt.NewCapGracefulRestartTuple(bgppkt.RF_IPv6_UC, true),
		}))
	}
	w.mu.Unlock()
	open, err := bgppkt.NewBGPOpenMessage(uint16(w.asn), 90, w.id, []bgppkt.OptionParameterInterface{bgppkt.NewOptionParameterCapability(caps)})
	if err != nil {
		w.t.Errorf("wire peer: open: %v", err)
		c.Close()
		return
	}
	if err := writeMessage(c, open); err != nil || writeMessage(c, bgppkt.NewBGPKeepAliveMessage()) != nil {
		c.Close()
		return
	}
	w.mu.Lock()
	if w.conn != nil {
		w.conn.Close()
	}
	w.conn = c
	w.mu.Unlock()
	w.up <- struct{}{}
	// Keep the session: read (and drop) what the node sends, and send a
	// keepalive now and then.
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				w.mu.Lock()
				_ = writeMessage(c, bgppkt.NewBGPKeepAliveMessage())
				w.mu.Unlock()
			}
		}
	}()
	for {
		m, err := readMessage(c)
		if err != nil {
			close(done)
			c.Close()
			return
		}
		if n, ok := m.Body.(*bgppkt.BGPNotification); ok {
			w.mu.Lock()
			w.notifs = append(w.notifs, n)
			w.mu.Unlock()
		}
		if u, ok := m.Body.(*bgppkt.BGPUpdate); ok {
			w.mu.Lock()
			for _, n := range u.NLRI {
				if p, err := netip.ParsePrefix(n.NLRI.String()); err == nil {
					if w.sent == nil {
						w.sent = map[netip.Prefix]int{}
					}
					w.sent[p]++
				}
			}
			gone := u.WithdrawnRoutes
			for _, a := range u.PathAttributes {
				if un, ok := a.(*bgppkt.PathAttributeMpUnreachNLRI); ok {
					gone = append(gone, un.Value...)
				}
			}
			for _, n := range gone {
				if p, err := netip.ParsePrefix(n.NLRI.String()); err == nil {
					if w.withdrawn == nil {
						w.withdrawn = map[netip.Prefix]int{}
					}
					w.withdrawn[p]++
				}
			}
			w.mu.Unlock()
		}
	}
}

// announced is how many UPDATEs announced p so far.
func (w *wirePeer) announced(p netip.Prefix) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent[p]
}

// withdrawals is how many UPDATEs withdrew p so far.
func (w *wirePeer) withdrawals(p netip.Prefix) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.withdrawn[p]
}

// notifications are the NOTIFICATIONs the node sent so far.
func (w *wirePeer) notifications() []*bgppkt.BGPNotification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*bgppkt.BGPNotification(nil), w.notifs...)
}

func writeMessage(c net.Conn, m *bgppkt.BGPMessage) error {
	b, err := m.Serialize()
	if err != nil {
		return err
	}
	_, err = c.Write(b)
	return err
}

// send writes UPDATEs on the current session.
func (w *wirePeer) send(msgs ...*bgppkt.BGPMessage) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		w.t.Fatalf("wire peer: no session")
	}
	for _, m := range msgs {
		if err := writeMessage(w.conn, m); err != nil {
			w.t.Fatalf("wire peer: send: %v", err)
		}
	}
}

// announce is an UPDATE for prefixes (one family) with AS path asPath
// (AS_SEQUENCE, or an AS_SET with set), next hop nh and extra attributes.
func announce(t testing.TB, nh netip.Addr, asPath []uint32, set bool, extra []bgppkt.PathAttributeInterface, prefixes ...string) *bgppkt.BGPMessage {
	t.Helper()
	typ := uint8(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ)
	if set {
		typ = bgppkt.BGP_ASPATH_ATTR_TYPE_SET
	}
	attrs := []bgppkt.PathAttributeInterface{
		bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{bgppkt.NewAs4PathParam(typ, asPath)}),
	}
	var nlri []bgppkt.PathNLRI
	for _, p := range prefixes {
		n, err := bgppkt.NewIPAddrPrefix(pfx(p))
		if err != nil {
			t.Fatal(err)
		}
		nlri = append(nlri, bgppkt.PathNLRI{NLRI: n})
	}
	if pfx(prefixes[0]).Addr().Is6() {
		mp, err := bgppkt.NewPathAttributeMpReachNLRI(bgppkt.RF_IPv6_UC, nlri, nh)
		if err != nil {
			t.Fatal(err)
		}
		return bgppkt.NewBGPUpdateMessage(nil, append(append(attrs, mp), extra...), nil)
	}
	n, err := bgppkt.NewPathAttributeNextHop(nh)
	if err != nil {
		t.Fatal(err)
	}
	return bgppkt.NewBGPUpdateMessage(nil, append(append(attrs, n), extra...), nlri)
}

// withdraw is an UPDATE withdrawing prefixes (one family).
func withdraw(t testing.TB, prefixes ...string) *bgppkt.BGPMessage {
	t.Helper()
	var nlri []bgppkt.PathNLRI
	for _, p := range prefixes {
		n, err := bgppkt.NewIPAddrPrefix(pfx(p))
		if err != nil {
			t.Fatal(err)
		}
		nlri = append(nlri, bgppkt.PathNLRI{NLRI: n})
	}
	if pfx(prefixes[0]).Addr().Is6() {
		mp, err := bgppkt.NewPathAttributeMpUnreachNLRI(bgppkt.RF_IPv6_UC, nlri)
		if err != nil {
			t.Fatal(err)
		}
		return bgppkt.NewBGPUpdateMessage(nil, []bgppkt.PathAttributeInterface{mp}, nil)
	}
	return bgppkt.NewBGPUpdateMessage(nlri, nil, nil)
}
