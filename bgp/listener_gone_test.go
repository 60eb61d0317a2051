package bgp

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// TestListenerDropsDeferredClosedByPeer: a connection that waited with the
// listener (gobgp could not take it: the peer was administratively down
// after maxPrefixes) and that the peer closed meanwhile is not handed to
// gobgp when it can take one again: gobgp would send its OPEN into a dead
// connection, fail (write-failed) and hold the peer idle for seconds. The
// peer's next connection goes instead. Found by the e2e
// TestHostileMaxPrefixes: the session came back 10 s after the hold ended.
func TestListenerDropsDeferredClosedByPeer(t *testing.T) {
	parallel(t)
	l := newLab(t, 98)
	peerAddr := l.addr(9)
	var v atomic.Int32
	v.Store(int32(waitActive))
	port := freePort(t)
	ch := make(chan net.Conn)
	ln, err := newListener(l.logger(), port, ch, nil, func(listenPeer, netip.Addr, []byte, *openConn) verdict {
		return verdict(v.Load())
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ln.close)
	if err := ln.setPeers(map[netip.Addr]listenPeer{peerAddr: {name: "p"}}); err != nil {
		t.Fatal(err)
	}
	c := dialFrom(t, peerAddr, port)
	if _, err := c.Write(openMsg()); err != nil {
		t.Fatal(err)
	}
	eventually(t, sessionTimeout, "the connection is deferred", func() (bool, string) {
		return ln.deferring(peerAddr), "not deferring"
	})
	c.Close() // the peer gives up
	v.Store(int32(handOver))
	ln.stateChanged()
	eventually(t, sessionTimeout, "the waiting connection settled", func() (bool, string) {
		return !ln.deferring(peerAddr), "still deferring"
	})
	c2 := dialFrom(t, peerAddr, port)
	if _, err := c2.Write(openMsg()); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		defer got.Close()
		if got.RemoteAddr().String() != c2.LocalAddr().String() {
			t.Fatalf("gobgp got the connection from %s, which the peer had closed; want the new one from %s", got.RemoteAddr(), c2.LocalAddr())
		}
	case <-time.After(sessionTimeout):
		t.Fatal("the peer's new connection was not handed over")
	}
}
