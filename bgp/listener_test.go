package bgp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestSilentConnectionIsNoHostage: a TCP connection from the peer's
// address that sends nothing does not keep the real session out. gobgp
// alone takes such a connection into OpenSent for 240 s and closes every
// other connection from the peer meanwhile.
func TestSilentConnectionIsNoHostage(t *testing.T) {
	parallel(t)
	l := newLab(t, 28)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")

	// The silent connection, from the node's address, before the node
	// speaker exists.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: l.addr(2).AsSlice()}}
	silent, err := d.Dial("tcp", netip.AddrPortFrom(l.addr(3), uint16(port)).String())
	if err != nil {
		t.Fatalf("silent connection: %v", err)
	}
	defer silent.Close()
	eventually(t, 10*time.Second, "the provider holds the silent connection", func() (bool, string) {
		prov.tr.ln.mu.Lock()
		defer prov.tr.ln.mu.Unlock()
		n := len(prov.tr.ln.pending[l.addr(2)])
		return n == 1, "pending connections: " + strings.Repeat("x", n)
	})

	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	// sessionTimeout (30 s) is far below gobgp's 240 s OpenSent hold.
	waitEstablished(t, node, "tor")
	waitEstablished(t, prov, "node") // the passive side may still be in OpenConfirm
	// The silent connection is still open, and was never gobgp's.
	_ = silent.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := silent.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
		t.Errorf("the silent connection got data or was closed: %v", err)
	}
}

// TestSilentConnectionClosed: the listener closes a connection that sends
// no OPEN within its wait, and one that sends something else at once.
func TestSilentConnectionClosed(t *testing.T) {
	parallel(t)
	l := newLab(t, 29)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	prov.tr.ln.mu.Lock()
	prov.tr.ln.openWait = time.Second
	prov.tr.ln.mu.Unlock()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: l.addr(2).AsSlice()}}
	addr := netip.AddrPortFrom(l.addr(3), uint16(port)).String()

	silent, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("silent connection: read = %v, want it closed by the listener", err)
	}

	garbage, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	if _, err := garbage.Write([]byte(strings.Repeat("GET / HTTP/1.0\r\n", 2))); err != nil {
		t.Fatal(err)
	}
	_ = garbage.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := garbage.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("non-BGP connection: read = %v, want it closed by the listener", err)
	}
	if !strings.Contains(l.logs(), "sent no OPEN") {
		t.Errorf("the listener did not log why it closed the connections")
	}
}

// TestHandoffField: the gobgp version in go.mod still has the field the
// listener hands connections through.
func TestHandoffField(t *testing.T) {
	srv := server.NewBgpServer()
	defer srv.Stop()
	if err := handoffTo(srv, make(chan net.Conn)); err != nil {
		t.Fatal(err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && errors.As(err, &ne) && ne.Timeout()
}

// openMsg is a minimal valid OPEN (version 4, AS 64512, hold 90, router
// ID 127.0.0.2, no parameters).
func openMsg() []byte {
	b := []byte(strings.Repeat("\xff", 16))
	b = append(b, 0, 29, 1, 4, 0xfc, 0x00, 0, 90, 127, 0, 0, 2, 0)
	return b
}

// bareListener is a listener on 127.0.<n>.1 with no gobgp behind it:
// handed-over connections queue in the returned channel, which nobody
// reads unless the test does.
func bareListener(t *testing.T, l *lab, peers map[netip.Addr]listenPeer) (*listener, chan net.Conn, int) {
	t.Helper()
	port := freePort(t)
	ch := make(chan net.Conn)
	ln, err := newListener(l.logger(), port, ch, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.close)
	if err := ln.setPeers(peers); err != nil {
		t.Fatal(err)
	}
	return ln, ch, port
}

func dialFrom(t *testing.T, from netip.Addr, port int) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
	to := "127.0.0.1"
	if from.Is6() {
		to = "::1"
	}
	c, err := d.Dial("tcp", net.JoinHostPort(to, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("dial from %v: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func numWaiting(ln *listener, a netip.Addr) int {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return len(ln.pending[a])
}

// closedByPeer waits (generously) for the listener to close c.
func closedByPeer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, err := c.Read(make([]byte, 512))
		if err == nil {
			continue
		}
		if isTimeout(err) {
			t.Fatalf("%s: still open after 30 s", what)
		}
		return
	}
}

// TestHalfOpenIsNoHostage: a connection that sends only the OPEN's
// 19-byte header stays with the listener, and the real session comes up.
// Handed to gobgp, it would wait 240 s in OpenSent for the body and
// refuse the real connection meanwhile.
func TestHalfOpenIsNoHostage(t *testing.T) {
	parallel(t)
	l := newLab(t, 35)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: l.addr(2).AsSlice()}}
	half, err := d.Dial("tcp", netip.AddrPortFrom(l.addr(3), uint16(port)).String())
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := half.Write(openMsg()[:bgpHeaderLen]); err != nil {
		t.Fatal(err)
	}
	// The listener holds it (it waits for the body): not gobgp.
	eventually(t, 10*time.Second, "the provider's listener holds the half OPEN", func() (bool, string) {
		n := numWaiting(prov.tr.ln, l.addr(2))
		return n == 1, fmt.Sprintf("%d waiting", n)
	})
	// Then the real peer dials.
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	waitEstablished(t, node, "tor")
	if n := numWaiting(prov.tr.ln, l.addr(2)); n != 1 {
		t.Errorf("the half OPEN is no longer held by the listener (%d waiting)", n)
	}
}

// TestOpenTooLongClosed: an OPEN header announcing more than 4096 bytes is
// refused at once.
func TestOpenTooLongClosed(t *testing.T) {
	parallel(t)
	l := newLab(t, 36)
	peer := netip.MustParseAddr("127.0.0.2")
	_, _, port := bareListener(t, l, map[netip.Addr]listenPeer{peer: {name: "p"}})
	c := dialFrom(t, peer, port)
	m := openMsg()
	m[16], m[17] = 0x10, 0x01 // 4097
	if _, err := c.Write(m[:bgpHeaderLen]); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, c, "an OPEN of 4097 bytes")
}

// TestMD5KeyFailureKeepsPeerOut: when the listener cannot set a peer's
// TCP MD5 key, that address is refused (MD5 fails closed), instead of
// letting unsigned connections in.
func TestMD5KeyFailureKeepsPeerOut(t *testing.T) {
	parallel(t)
	l := newLab(t, 37)
	peer := netip.MustParseAddr("127.0.0.2")
	port := freePort(t)
	ln, err := newListener(l.logger(), port, make(chan net.Conn), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.close()
	// The kernel refuses keys longer than 80 bytes (TCP_MD5SIG_MAXKEYLEN).
	err = ln.setPeers(map[netip.Addr]listenPeer{peer: {name: "p", password: strings.Repeat("k", 81)}})
	if err == nil || !strings.Contains(err.Error(), `peer "p"`) {
		t.Fatalf("setPeers with an unusable key: %v, want an error naming the peer", err)
	}
	c := dialFrom(t, peer, port)
	closedByPeer(t, c, "a connection from a peer whose key could not be set")
	if n := numWaiting(ln, peer); n != 0 {
		t.Errorf("%d connections held from a peer without its key", n)
	}
	// A good key later admits it.
	if err := ln.setPeers(map[netip.Addr]listenPeer{peer: {name: "p"}}); err != nil {
		t.Fatal(err)
	}
	c2 := dialFrom(t, peer, port)
	eventually(t, 10*time.Second, "the peer admitted again", func() (bool, string) {
		n := numWaiting(ln, peer)
		return n == 1, fmt.Sprintf("%d waiting", n)
	})
	_ = c2
}

// TestAddrOfKeepsZone: a link-local peer is matched with its zone, as
// gobgp keys it (fe80::1%eth0).
func TestAddrOfKeepsZone(t *testing.T) {
	got := addrOf(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 179})
	if want := netip.MustParseAddr("fe80::1%eth0"); got != want {
		t.Errorf("addrOf(fe80::1%%eth0) = %v, want %v", got, want)
	}
	if got := addrOf(&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1")}); got != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("addrOf(::ffff:10.0.0.1) = %v", got)
	}
}

// TestHandoffCountsTowardCap: connections that sent their OPEN but that
// gobgp has not taken yet still count toward the 4 per peer: a fifth
// closes the oldest, instead of goroutines piling up behind a busy gobgp.
func TestHandoffCountsTowardCap(t *testing.T) {
	parallel(t)
	l := newLab(t, 38)
	peer := netip.MustParseAddr("127.0.0.2")
	ln, _, port := bareListener(t, l, map[netip.Addr]listenPeer{peer: {name: "p"}})
	var cs []*net.TCPConn
	for i := 1; i <= maxPendingPerPeer; i++ {
		c := dialFrom(t, peer, port)
		if _, err := c.Write(openMsg()); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		eventually(t, 10*time.Second, "the listener counts the connection waiting for gobgp", func() (bool, string) {
			n := numWaiting(ln, peer)
			return n == i, fmt.Sprintf("%d counted, want %d", n, i)
		})
	}
	c := dialFrom(t, peer, port)
	if _, err := c.Write(openMsg()); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, cs[0], "the oldest connection waiting for gobgp")
	if n := numWaiting(ln, peer); n != maxPendingPerPeer {
		t.Errorf("%d connections counted, want %d", n, maxPendingPerPeer)
	}
}

// TestOldestSilentEvicted: a fifth silent connection from a peer's
// address closes the oldest; the others stay.
func TestOldestSilentEvicted(t *testing.T) {
	parallel(t)
	l := newLab(t, 39)
	peer := netip.MustParseAddr("127.0.0.2")
	ln, _, port := bareListener(t, l, map[netip.Addr]listenPeer{peer: {name: "p"}})
	var cs []*net.TCPConn
	for i := 1; i <= maxPendingPerPeer; i++ {
		cs = append(cs, dialFrom(t, peer, port))
		eventually(t, 10*time.Second, "the listener holds the connection", func() (bool, string) {
			n := numWaiting(ln, peer)
			return n == i, fmt.Sprintf("%d waiting", n)
		})
	}
	cs = append(cs, dialFrom(t, peer, port))
	closedByPeer(t, cs[0], "the oldest silent connection")
	ln.mu.Lock()
	defer ln.mu.Unlock()
	for i, w := range ln.pending[peer] {
		if got, want := w.c.RemoteAddr().String(), cs[i+1].LocalAddr().String(); got != want {
			t.Errorf("waiting[%d] is %s, want %s", i, got, want)
		}
	}
}

// TestNonPeerClosedAtOnce: a connection from an address that is not a
// peer reads EOF at once (well before the OPEN wait), and is logged.
func TestNonPeerClosedAtOnce(t *testing.T) {
	parallel(t)
	l := newLab(t, 40)
	_, _, port := bareListener(t, l, map[netip.Addr]listenPeer{netip.MustParseAddr("127.0.0.2"): {name: "p"}})
	for range 3 {
		closedByPeer(t, dialFrom(t, netip.MustParseAddr("127.0.0.9"), port), "a connection from a non-peer")
	}
	if n := strings.Count(l.logs(), "not a peer"); n != 1 {
		t.Errorf("%d Info lines for 3 connections from one non-peer in a minute, want 1 (rate-limited):\n%s", n, l.logs())
	}
}

// TestSetPeersDropsWaiting: connections waiting from a peer that is
// removed are closed.
func TestSetPeersDropsWaiting(t *testing.T) {
	parallel(t)
	l := newLab(t, 41)
	peer := netip.MustParseAddr("127.0.0.2")
	ln, _, port := bareListener(t, l, map[netip.Addr]listenPeer{peer: {name: "p"}})
	c := dialFrom(t, peer, port)
	eventually(t, 10*time.Second, "the listener holds the connection", func() (bool, string) {
		n := numWaiting(ln, peer)
		return n == 1, fmt.Sprintf("%d waiting", n)
	})
	if err := ln.setPeers(map[netip.Addr]listenPeer{}); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, c, "a connection from a removed peer")
}

// TestListenerIPv6: the tcp6 listener hands a peer's connection over, and
// a peer dialing over IPv6 with an MD5 password gets Established (the
// IPv6 layout of the kernel's MD5 key).
func TestListenerIPv6(t *testing.T) {
	parallel(t)
	if !ipv6Available() {
		t.Fatal("no IPv6 on this host: the tcp6 listener cannot be tested")
	}
	l := newLab(t, 42)
	lo := netip.MustParseAddr("::1")
	port := freePort(t)
	prov := l.speaker("provider6", config.BGP{
		ASN: provASN, RouterID: netip.MustParseAddr("127.0.42.3"), ListenPort: port,
		Peers: []config.Peer{{Name: "node", Address: lo, ASN: nodeASN, Passive: true, Password: "s3cret",
			HoldTime: 90 * time.Second, ConnectRetry: 5 * time.Second, Families: []config.Family{config.IPv6}}},
	})
	node := l.speaker("node6", config.BGP{
		ASN: nodeASN, RouterID: netip.MustParseAddr("127.0.42.2"), ListenPort: -1,
		Peers: []config.Peer{{Name: "tor", Address: lo, ASN: provASN, Port: port, Password: "s3cret",
			HoldTime: 90 * time.Second, ConnectRetry: 5 * time.Second, Families: []config.Family{config.IPv6}}},
	})
	waitEstablished(t, node, "tor")
	// The passive side reaches Established when our KEEPALIVE arrives,
	// which may be after the dialer got the provider's one.
	waitEstablished(t, prov, "node")
}

func TestBFDResetterField(t *testing.T) {
	srv := server.NewBgpServer()
	defer srv.Stop()
	if err := bfdTo(srv, bfdResetter{srv: srv, keep: func(string) bool { return false }}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUnsupportedOptionalParameter: an OPEN with an optional parameter
// other than capabilities (type 1, the deprecated authentication) is
// answered with NOTIFICATION 2/4 Unsupported Optional Parameter and closed
// (RFC 4271 6.2); gobgp v4.8.0 alone accepts it. An OPEN with only
// capabilities goes to gobgp. Found by the hostile-input suite
// (test/e2e TestHostileInput/cases/open-unsupported-optional-parameter).
func TestOpenUnsupportedOptionalParameter(t *testing.T) {
	parallel(t)
	l := newLab(t, 39)
	peer := netip.MustParseAddr("127.0.0.2")
	_, ch, port := bareListener(t, l, map[netip.Addr]listenPeer{peer: {name: "p"}})

	// optional parameters: capabilities (one empty capability 1), then type 1
	bad := append(openMsg()[:28], 8, 2, 2, 1, 0, 1, 2, 0, 0)
	bad[17] = byte(len(bad))
	c := dialFrom(t, peer, port)
	if _, err := c.Write(bad); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, 21)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("no NOTIFICATION: %v", err)
	}
	if got[18] != 3 || got[19] != 2 || got[20] != 4 {
		t.Fatalf("got message type %d, %d/%d: want NOTIFICATION 2/4", got[18], got[19], got[20])
	}
	closedByPeer(t, c, "an OPEN with an unsupported optional parameter")

	// control: capabilities only are handed over
	good := append(openMsg()[:28], 4, 2, 2, 1, 0)
	good[17] = byte(len(good))
	c2 := dialFrom(t, peer, port)
	if _, err := c2.Write(good); err != nil {
		t.Fatal(err)
	}
	select {
	case hc := <-ch:
		hc.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("an OPEN with capabilities only was not handed over")
	}
}
