package bgp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/config"
)

// ovnbgp dials its peers itself (see doc.go, "Dialing"): every peer is
// passive in gobgp, and the dialer hands each connection it makes to
// gobgp's Serve loop as the listener does with those it accepts. gobgp
// v4.8.0 keeps a NOTIFICATION it receives during the OPEN exchange on a
// connection it dialed to itself (its event says only "invalid-msg"); on
// a connection handed over, ovnbgp's sniffer reads it as it goes by, as
// on accepted ones.
//
// The dialer redoes what gobgp's connectLoop (pkg/server/fsm.go) and
// netutils.DialerControl did: a connect-retry timer with RFC 4271's jitter
// (75 to 100 % of connectRetry), a connect timeout of connectRetry less a
// second (2 s at least), the source address bound, SO_BINDTODEVICE on the
// interface (a VRF too), the TTL (GTSM's 255 and IP_MINTTL /
// IPV6_MINHOPCOUNT, the multihop TTL, or 1 for a directly connected eBGP
// peer), the TCP MD5 key (bound to the VRF's index for a VRF) before the
// SYN, no keepalives (the hold timer does that job) and no MPTCP. Unlike
// gobgp, it dials at once the first time (gobgp waited 1.5 to 2 s), and it
// dials only while gobgp's state machine for the peer waits for a
// connection (Active): never while a session is opening or Established.

// minConnectRetry is the shortest wait between two dials of a peer (the
// shortest connectRetry config accepts).
const minConnectRetry = time.Second

// dialPeer is what the dialer needs to know about a peer.
type dialPeer struct {
	name   string
	addr   netip.Addr
	port   int
	source netip.Addr
	// iface is SO_BINDTODEVICE's device (a VRF or a link), "" for none.
	iface    string
	password string
	// ttl is the TTL (hop limit) of outgoing packets, 0 for the kernel's
	// default; minTTL is GTSM's minimum incoming TTL, 0 if off.
	ttl, minTTL int
	retry       time.Duration
}

// dialPeerOf is how the dialer reaches p from a speaker of AS localASN: the
// socket options gobgp's dialer set for it.
func dialPeerOf(p config.Peer, localASN uint32) dialPeer {
	d := dialPeer{
		name: p.Name, addr: p.Address, port: p.Port, source: p.SourceAddress,
		iface: p.Interface, password: p.Password, retry: p.ConnectRetry,
	}
	if d.port == 0 {
		d.port = 179
	}
	if d.retry == 0 {
		d.retry = config.DefaultConnectRetry
	}
	d.retry = max(d.retry, minConnectRetry)
	switch {
	case p.TTLSecurity:
		d.ttl = 255
		d.minTTL = 256 - max(int(p.EBGPMultihop), 1)
	case p.ASN != localASN && p.EBGPMultihop > 0:
		d.ttl = int(p.EBGPMultihop)
	case p.ASN != localASN:
		d.ttl = 1 // a directly connected eBGP peer (RFC 4271 5.1.3 and gobgp)
	}
	return d
}

// dialer keeps one goroutine per peer that dials it (run), and owns it:
// setPeers starts it, and setPeers, remove and close end it and wait for
// it (dialing.stop) before they return. The Speaker's shutdown calls
// close. d.mu is held while a loop is waited for, and a loop takes gate.mu,
// sess.mu and the listener's mu (dialReady, claimDialed): d.mu comes before
// those (the Speaker's lock order).
type dialer struct {
	log     *zap.Logger
	handoff chan<- net.Conn
	// tap is told of every NOTIFICATION a peer sends on a connection the
	// dialer made.
	tap func(addr string, sent bool, code, subcode uint8, communication string)
	// ready reports whether gobgp's state machine for the peer at addr
	// waits for a connection.
	ready func(addr netip.Addr) bool
	// claim records c as the connection gobgp gets for addr, unless it
	// has another one open (see collision.go); nil claims every one.
	claim func(addr netip.Addr, c *openConn) bool

	mu     sync.Mutex
	closed bool
	peers  map[netip.Addr]*dialing
}

// dialing is one peer's dial loop.
type dialing struct {
	p      dialPeer
	cancel context.CancelFunc
	// kick wakes the loop when gobgp's state for the peer changed.
	kick chan struct{}
	done chan struct{}
}

func newDialer(log *zap.Logger, handoff chan<- net.Conn, ready func(netip.Addr) bool,
	claim func(netip.Addr, *openConn) bool,
	tap func(addr string, sent bool, code, subcode uint8, communication string)) *dialer {
	return &dialer{log: log, handoff: handoff, ready: ready, claim: claim, tap: tap, peers: map[netip.Addr]*dialing{}}
}

// setPeers makes the dialer dial exactly these peers: loops of peers that
// are gone or changed stop (a dial under way is aborted) before setPeers
// returns; new ones start and dial as soon as gobgp waits for them.
func (d *dialer) setPeers(peers map[netip.Addr]dialPeer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	for addr, g := range d.peers {
		if p, ok := peers[addr]; !ok || p != g.p {
			g.stop()
			delete(d.peers, addr)
		}
	}
	for addr, p := range peers {
		if _, ok := d.peers[addr]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		g := &dialing{p: p, cancel: cancel, kick: make(chan struct{}, 1), done: make(chan struct{})}
		d.peers[addr] = g
		go d.run(ctx, g)
	}
}

// remove stops dialing addr at once.
func (d *dialer) remove(addr netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.peers[addr]; g != nil {
		g.stop()
		delete(d.peers, addr)
	}
}

// stateChanged wakes addr's loop: gobgp's state for it changed.
func (d *dialer) stateChanged(addr netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.peers[addr]; g != nil {
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}
}

// close stops every loop; it is idempotent.
func (d *dialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	for addr, g := range d.peers {
		g.stop()
		delete(d.peers, addr)
	}
}

// stop ends the loop and waits for it (at once: a dial under way is
// aborted by the context).
func (g *dialing) stop() {
	g.cancel()
	<-g.done
}

// run dials g's peer whenever gobgp waits for a connection, at most once
// per jittered connectRetry, and hands each connection to gobgp.
func (d *dialer) run(ctx context.Context, g *dialing) {
	defer close(g.done)
	p := g.p
	log := d.log.With(zap.String("peer", p.name), zap.Stringer("address", p.addr))
	var wait time.Duration // the first dial goes at once
	failures := 0
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		for !d.ready(p.addr) {
			select {
			case <-g.kick:
			case <-ctx.Done():
				return
			}
		}
		// RFC 4271 10: ConnectRetryTimer jittered to 75-100 % of its value.
		wait = time.Duration((0.75 + 0.25*rand.Float64()) * float64(p.retry))
		c, err := dial(ctx, p)
		if ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			failures++
			if failures == 1 || failures%60 == 0 {
				log.Info("dial failed; retrying", zap.Int("failures", failures), zap.Duration("retryIn", wait), zap.Error(err))
			} else {
				log.Debug("dial failed; retrying", zap.Int("failures", failures), zap.Duration("retryIn", wait), zap.Error(err))
			}
			continue
		}
		failures = 0
		oc := &openConn{TCPConn: c, sniff: newSniffer(d.tap, p.addr), fixOverrun: overrunLogger(d.log, p.name, p.addr)}
		if !d.ready(p.addr) || (d.claim != nil && !d.claim(p.addr, oc)) {
			// A session opened meanwhile on a connection the peer
			// dialed: gobgp sent no OPEN on this one, so the peer sees
			// no collision, only this connection closed.
			log.Debug("dialed, but a session is opening already: closed the new connection")
			oc.Close()
			continue
		}
		log.Debug("dialed, connection handed to gobgp", zap.Stringer("local", c.LocalAddr()))
		select {
		case d.handoff <- oc:
		case <-ctx.Done():
			oc.Close()
			return
		}
	}
}

// dial connects to p as gobgp's connectLoop did.
func dial(ctx context.Context, p dialPeer) (*net.TCPConn, error) {
	nd := net.Dialer{
		// gobgp: connectRetry less a second, 2 s at least.
		Timeout:   max(p.retry-time.Second, 2*time.Second),
		KeepAlive: -1,
		Control: func(network, _ string, rc syscall.RawConn) error {
			return dialControl(rc, p, network == "tcp6")
		},
	}
	// MPTCP sockets refuse TCP MD5 and GTSM.
	nd.SetMultipathTCP(false)
	if p.source.IsValid() {
		nd.LocalAddr = &net.TCPAddr{IP: p.source.AsSlice(), Zone: p.source.Zone()}
	}
	network := "tcp4"
	if p.addr.Is6() {
		network = "tcp6"
	}
	c, err := nd.DialContext(ctx, network, net.JoinHostPort(p.addr.String(), strconv.Itoa(p.port)))
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// dialControl sets the socket options of a dial before connect, in
// gobgp's order: TCP MD5, TTL, minimum TTL, device.
func dialControl(rc syscall.RawConn, p dialPeer, v6 bool) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = setDialOpts(int(fd), p, v6)
	})
	if err != nil {
		return err
	}
	return serr
}

func setDialOpts(fd int, p dialPeer, v6 bool) error {
	if p.password != "" {
		sig, err := md5Sig(p.addr, p.iface, p.password)
		if err != nil {
			return err
		}
		if err := unix.SetsockoptTCPMD5Sig(fd, unix.IPPROTO_TCP, unix.TCP_MD5SIG_EXT, sig); err != nil {
			return fmt.Errorf("set the TCP MD5 key: %w", err)
		}
	}
	if p.ttl > 0 {
		var err error
		if v6 {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, p.ttl)
		} else {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_TTL, p.ttl)
		}
		if err != nil {
			return fmt.Errorf("set TTL %d: %w", p.ttl, err)
		}
	}
	if p.minTTL > 0 {
		if err := setMinTTL(fd, v6, p.minTTL); err != nil {
			return fmt.Errorf("set the minimum TTL %d (ttlSecurity): %w", p.minTTL, err)
		}
	}
	if p.iface != "" {
		if err := unix.BindToDevice(fd, p.iface); err != nil {
			return fmt.Errorf("bind to interface %s: %w", p.iface, err)
		}
	}
	return nil
}

// md5Sig is the TCP_MD5SIG_EXT argument that sets (or, with an empty key,
// removes) the key for addr; for a peer reached through a VRF device, the
// key is bound to the VRF's index (as gobgp does).
func md5Sig(addr netip.Addr, iface, key string) (*unix.TCPMD5Sig, error) {
	sig := unix.TCPMD5Sig{Keylen: uint16(len(key))}
	copy(sig.Key[:], key)
	if iface != "" && isVRF(iface) {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return nil, fmt.Errorf("vrf %s: %w", iface, err)
		}
		sig.Flags |= unix.TCP_MD5SIG_FLAG_IFINDEX
		sig.Ifindex = int32(ifi.Index)
	}
	if addr.Is6() && !addr.Is4In6() {
		sig.Addr.Family = unix.AF_INET6
		b := addr.As16()
		copy(sig.Addr.Data[6:], b[:])
	} else {
		sig.Addr.Family = unix.AF_INET
		b := addr.Unmap().As4()
		copy(sig.Addr.Data[2:], b[:])
	}
	return &sig, nil
}
