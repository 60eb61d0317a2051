package bgp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/ovnbgp/ovnbgp/model"
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
		prov.ln.mu.Lock()
		defer prov.ln.mu.Unlock()
		n := len(prov.ln.pending[l.addr(2)])
		return n == 1, "pending connections: " + strings.Repeat("x", n)
	})

	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	// sessionTimeout (30 s) is far below gobgp's 240 s OpenSent hold.
	waitEstablished(t, node, "tor")
	if st := peerState(t, prov, "node"); st.State != model.StateEstablished {
		t.Errorf("provider's view: %+v", st)
	}
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
	prov.ln.mu.Lock()
	prov.ln.openWait = time.Second
	prov.ln.mu.Unlock()
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
	if err := handoffTo(server.NewBgpServer(), make(chan net.Conn)); err != nil {
		t.Fatal(err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && errors.As(err, &ne) && ne.Timeout()
}

var _ = context.Background
