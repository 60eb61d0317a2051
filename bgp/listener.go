package bgp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ovnbgp owns the BGP listener instead of gobgp (see doc.go, "The
// listener"), for two faults of gobgp v4.8.0's:
//
//   - its accept loop returns for good on the first accept error, such as
//     EMFILE when the process runs out of descriptors: the port then
//     queues connections that nobody accepts, until a restart;
//   - it hands a connection to the peer's state machine before the peer
//     said anything: a connection from the peer's address that sends no
//     OPEN keeps the peer in OpenSent for the 240 s OpenSent hold time,
//     and gobgp closes every other connection from that peer meanwhile.
//
// The listener accepts, keeps accepting after errors (backing off as
// net/http does), drops connections from addresses that are not peers,
// waits for the whole OPEN message, and only then hands the connection
// (with the bytes it read) to gobgp. TCP MD5 keys and the TTL settings are
// set as gobgp sets them on its own listener; a peer whose key cannot be
// set is refused. The NOTIFICATIONs a peer sends on these connections are
// read as they go by, as on those ovnbgp dials (dialer.go).

// Listener defaults.
const (
	// openWait is how long a connection may stay silent before the
	// listener closes it. It does not block anything meanwhile: a silent
	// connection is not handed to gobgp, so a second connection that
	// sends its OPEN gets through at once. It is long enough for a peer
	// that uses RFC 4271's DelayOpen (FRR's "timers delayopen", at most
	// 240 s, and it sends its OPEN when that expires).
	openWait = 4 * time.Minute
	// maxPendingPerPeer bounds the silent connections held per peer
	// address; a new one closes the oldest.
	maxPendingPerPeer = 4
	// maxAcceptBackoff caps the pause after an accept error.
	maxAcceptBackoff = time.Second
)

// bgpHeaderLen is the length of a BGP message header (RFC 4271 4.1).
const bgpHeaderLen = 19

// listenPeer is what the listener needs to know about a peer.
type listenPeer struct {
	name string
	asn  uint32
	// source is the peer's sourceAddress (gobgp takes only connections
	// to it, unless an interface is set).
	source   netip.Addr
	password string
	// iface is the peer's interface; when it is a VRF, its MD5 key is
	// bound to that VRF (as gobgp does).
	iface string
	// minTTL is GTSM's minimum TTL (RFC 5082), 0 if off.
	minTTL int
}

// listener accepts BGP connections on the speaker's port and hands those
// that start with an OPEN to gobgp.
type listener struct {
	log *zap.Logger
	// tap is told of every NOTIFICATION a peer sends on a connection the
	// listener accepted (gobgp does not log those it receives before
	// Established).
	tap func(addr string, sent bool, code, subcode uint8, communication string)
	// decide says what becomes of a peer's connection that sent its OPEN
	// (see collision.go); nil hands every one over.
	decide  func(p listenPeer, addr netip.Addr, open []byte, c *openConn) verdict
	handoff chan net.Conn
	// openWait is guarded by mu (tests shorten it).
	openWait time.Duration
	lns      []*net.TCPListener
	// done is closed by close. wg counts the listener's goroutines, which
	// it owns: an acceptLoop per socket (newListener) and an awaitOpen per
	// connection held (accepted). close ends them (it closes the sockets
	// and the held connections, whose reads then fail, and done) and waits
	// for them; the Speaker's shutdown calls it.
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	peers   map[netip.Addr]listenPeer
	pending map[netip.Addr][]*waiting
	// kick is closed (and replaced) when gobgp's state for a peer
	// changed: connections waiting for Active look again.
	kick chan struct{}
	// logged rate-limits the per-connection log lines: when each
	// (message, address) was last logged.
	logged map[string]time.Time
}

// waiting is a connection from a peer's address the listener holds: until
// it sent its whole OPEN, and then until gobgp's Serve loop took it. It
// counts toward maxPendingPerPeer all that time; evict closes it.
type waiting struct {
	c     *net.TCPConn
	evict chan struct{}
	// deferred: it sent its OPEN and waits for gobgp to be Active; the
	// dialer holds off meanwhile. Guarded by the listener's mu.
	deferred bool
}

// logLimit is how often the listener logs a line per message and address.
const logLimit = time.Minute

// maxLogged bounds the rate limiter's memory; past it, old entries go.
const maxLogged = 4096

// infoLimited logs at Info at most once per logLimit per message and
// address, and at Debug otherwise; the caller holds mu.
func (l *listener) infoLimited(msg string, addr netip.Addr, fields ...zap.Field) {
	now := time.Now()
	key := msg + "|" + addr.String()
	if last, ok := l.logged[key]; ok && now.Sub(last) < logLimit {
		l.log.Debug(msg, append(fields, zap.Stringer("address", addr))...)
		return
	}
	if len(l.logged) >= maxLogged {
		for k, t := range l.logged {
			if now.Sub(t) >= logLimit {
				delete(l.logged, k)
			}
		}
		if len(l.logged) >= maxLogged {
			clear(l.logged)
		}
	}
	l.logged[key] = now
	l.log.Info(msg, append(fields, zap.Stringer("address", addr), zap.String("rateLimit", "one line per address per minute"))...)
}

// newListener listens on port on every address (0.0.0.0, and :: when the
// host has IPv6) and starts accepting. Connections that pass go to handoff;
// the NOTIFICATIONs peers send on them go to tap (may be nil).
func newListener(log *zap.Logger, port int, handoff chan net.Conn,
	tap func(addr string, sent bool, code, subcode uint8, communication string),
	decide func(p listenPeer, addr netip.Addr, open []byte, c *openConn) verdict) (*listener, error) {
	l := &listener{
		log:      log,
		tap:      tap,
		decide:   decide,
		kick:     make(chan struct{}),
		handoff:  handoff,
		openWait: openWait,
		done:     make(chan struct{}),
		peers:    map[netip.Addr]listenPeer{},
		pending:  map[netip.Addr][]*waiting{},
		logged:   map[string]time.Time{},
	}
	nets := []string{"tcp4"}
	if ipv6Available() {
		nets = append(nets, "tcp6")
	}
	for _, network := range nets {
		host := "0.0.0.0"
		if network == "tcp6" {
			host = "::"
		}
		lc := net.ListenConfig{Control: func(network, _ string, c syscall.RawConn) error {
			// The SYN-ACK and everything before gobgp takes over go out
			// with TTL 255, so that a GTSM peer accepts them (gobgp does
			// the same on its listener).
			return setTTL(c, network == "tcp6", 255)
		}}
		// MPTCP sockets refuse TCP MD5 and GTSM.
		lc.SetMultipathTCP(false)
		ln, err := lc.Listen(context.Background(), network, net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			l.close()
			return nil, fmt.Errorf("listen on %s port %d: %w", network, port, err)
		}
		l.lns = append(l.lns, ln.(*net.TCPListener))
	}
	for _, ln := range l.lns {
		l.wg.Add(1)
		go l.acceptLoop(ln)
	}
	return l, nil
}

// setPeers makes the listener accept connections from exactly these peers
// and sets or removes their TCP MD5 keys on the listening sockets (the
// kernel checks the signature of the SYN already). A peer whose key could
// not be set is kept out (MD5 fails closed): its connections are closed
// until a later setPeers sets the key.
func (l *listener) setPeers(peers map[netip.Addr]listenPeer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	peers = maps.Clone(peers)
	var errs []error
	for addr, old := range l.peers {
		if p, ok := peers[addr]; ok && p.password == old.password && p.iface == old.iface {
			continue
		}
		if old.password != "" {
			if err := l.setMD5(addr, old.iface, ""); err != nil {
				errs = append(errs, fmt.Errorf("peer %q: remove the TCP MD5 key of %v from the listener: %w", old.name, addr, err))
			}
		}
	}
	for addr, p := range peers {
		if old, ok := l.peers[addr]; ok && old.password == p.password && old.iface == p.iface {
			continue
		}
		if p.password != "" {
			if err := l.setMD5(addr, p.iface, p.password); err != nil {
				errs = append(errs, fmt.Errorf("peer %q: set the TCP MD5 key of %v on the listener (connections from it are refused until it is set): %w", p.name, addr, err))
				// Remove whatever part of the key was set, and keep the
				// address out: without its key, the kernel would let
				// unsigned connections in.
				_ = l.setMD5(addr, p.iface, "")
				delete(peers, addr)
			}
		}
	}
	l.peers = peers
	// Connections waiting from a peer that is gone are dropped.
	for addr, ws := range l.pending {
		if _, ok := peers[addr]; !ok {
			for _, w := range ws {
				w.close()
			}
			delete(l.pending, addr)
		}
	}
	return errors.Join(errs...)
}

// setMD5 sets (or, with an empty key, removes) the TCP MD5 key for addr on
// the listening socket of addr's family; for a peer reached through a VRF
// device, the key is bound to the VRF's index.
func (l *listener) setMD5(addr netip.Addr, iface, key string) error {
	sig, err := md5Sig(addr, iface, key)
	if err != nil {
		return err
	}
	v6 := addr.Is6() && !addr.Is4In6()
	var errs []error
	for _, ln := range l.lns {
		if isV6Listener(ln) != v6 {
			continue
		}
		rc, err := ln.SyscallConn()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptTCPMD5Sig(int(fd), unix.IPPROTO_TCP, unix.TCP_MD5SIG_EXT, sig)
		}); err != nil {
			errs = append(errs, err)
		}
		if serr != nil && !(key == "" && errors.Is(serr, unix.ENOENT)) {
			errs = append(errs, serr)
		}
	}
	return errors.Join(errs...)
}

// isVRF reports whether the network device is a VRF (its uevent says
// DEVTYPE=vrf).
func isVRF(iface string) bool {
	b, err := os.ReadFile("/sys/class/net/" + iface + "/uevent")
	return err == nil && hasLine(string(b), "DEVTYPE=vrf")
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

func isV6Listener(ln *net.TCPListener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.To4() == nil
}

// acceptLoop accepts until the listener is closed. Accept errors (EMFILE,
// ENFILE, ENOBUFS, ECONNABORTED…) pause the loop, 5 ms doubling up to 1 s,
// and never end it.
func (l *listener) acceptLoop(ln *net.TCPListener) {
	defer l.wg.Done()
	var delay time.Duration
	var lastLog time.Time
	failures := 0
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			failures++
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else {
				delay = min(2*delay, maxAcceptBackoff)
			}
			if time.Since(lastLog) >= 10*time.Second {
				l.log.Warn("bgp listener: accept failed; retrying", zap.Stringer("address", ln.Addr()),
					zap.Int("failures", failures), zap.Duration("retryIn", delay), zap.Error(err))
				lastLog = time.Now()
			}
			select {
			case <-time.After(delay):
			case <-l.done:
				return
			}
			continue
		}
		if failures > 0 {
			l.log.Info("bgp listener: accepting again", zap.Stringer("address", ln.Addr()), zap.Int("failures", failures))
			failures, delay, lastLog = 0, 0, time.Time{}
		}
		l.accepted(c)
	}
}

// accepted keeps a connection from a peer's address until it sends an
// OPEN, and closes any other at once.
func (l *listener) accepted(c *net.TCPConn) {
	remote := addrOf(c.RemoteAddr())
	l.mu.Lock()
	p, ok := l.peers[remote]
	if !ok || l.closed {
		if !l.closed {
			l.infoLimited("bgp listener: closed a connection from an address that is not a peer (or whose TCP MD5 key could not be set)", remote)
		}
		l.mu.Unlock()
		c.Close()
		return
	}
	ws := l.pending[remote]
	if len(ws) >= maxPendingPerPeer {
		l.infoLimited("bgp listener: too many connections from the peer's address waiting for an OPEN or for gobgp; closed the oldest",
			remote, zap.String("peer", p.name))
		ws[0].close()
		ws = ws[1:]
	}
	w := &waiting{c: c, evict: make(chan struct{})}
	l.pending[remote] = append(ws, w)
	wait := l.openWait
	l.mu.Unlock()

	_ = c.SetKeepAlive(false) // as gobgp: the hold timer does that job
	if p.minTTL > 0 {
		// GTSM from the first segment after the handshake (gobgp sets it
		// again when it takes the connection).
		if rc, err := c.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = setMinTTL(int(fd), remote.Is6(), p.minTTL) })
		}
	}
	l.wg.Add(1)
	go l.awaitOpen(p, remote, w, wait)
}

// close evicts w: its goroutine stops waiting, and the connection is
// closed. The caller holds the listener's mu.
func (w *waiting) close() {
	select {
	case <-w.evict:
	default:
		close(w.evict)
		w.c.Close()
	}
}

// release takes w off the waiting list; the caller holds mu.
func (l *listener) release(remote netip.Addr, w *waiting) {
	ws := l.pending[remote]
	for i, x := range ws {
		if x == w {
			l.pending[remote] = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(l.pending[remote]) == 0 {
		delete(l.pending, remote)
	}
}

// awaitOpen reads the whole OPEN message; a valid one hands the
// connection to gobgp, anything else (silence, garbage, EOF, an OPEN cut
// short) closes it. gobgp waits 240 s in OpenSent for the rest of a
// message it started reading, so nothing short of a whole OPEN goes to
// it. The connection counts toward maxPendingPerPeer until gobgp took it.
func (l *listener) awaitOpen(p listenPeer, remote netip.Addr, w *waiting, wait time.Duration) {
	defer l.wg.Done()
	c := w.c
	msg, err := readOpen(c, wait)

	l.mu.Lock()
	evicted := false
	select {
	case <-w.evict:
		evicted = true
	default:
	}
	closed := l.closed
	if err != nil || evicted || closed {
		l.release(remote, w)
		if err != nil && !evicted && !closed {
			l.infoLimited("bgp listener: closed a connection from the peer's address that sent no OPEN", remote,
				zap.String("peer", p.name), zap.Error(err))
		}
		l.mu.Unlock()
		c.Close()
		return
	}
	l.mu.Unlock()

	if why := unsupportedOptParam(msg); why != "" {
		// gobgp v4.8.0 accepts it; RFC 4271 6.2 says NOTIFICATION 2/4
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(notification(2, 4))
		l.infoLimited("bgp listener: refused an OPEN (NOTIFICATION 2/4 Unsupported Optional Parameter)", remote,
			zap.String("peer", p.name), zap.String("error", why))
		l.mu.Lock()
		l.release(remote, w)
		l.mu.Unlock()
		c.Close()
		return
	}
	oc := &openConn{TCPConn: c, head: msg, sniff: newSniffer(l.tap, remote), fixOverrun: overrunLogger(l.log, p.name, remote)}
	if !l.settle(p, remote, w, oc, time.Now().Add(wait)) {
		return
	}
	l.log.Debug("bgp listener: OPEN received, connection handed to gobgp", zap.String("peer", p.name), zap.Stringer("address", remote))
	select {
	case l.handoff <- oc:
	case <-w.evict:
		oc.Close() // settle may have booked it as gobgp's: mark it closed
	case <-l.done:
		oc.Close()
	}
	l.mu.Lock()
	l.release(remote, w)
	l.mu.Unlock()
}

// settle decides, with decide, whether the connection goes to gobgp (true),
// is closed (false), or waits (until deadline) for gobgp to be Active
// and then goes to gobgp.
func (l *listener) settle(p listenPeer, remote netip.Addr, w *waiting, oc *openConn, deadline time.Time) bool {
	if l.decide == nil {
		return true
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		l.mu.Lock()
		w.deferred = false
		l.mu.Unlock()
	}()
	for {
		l.mu.Lock()
		kick := l.kick // before deciding: a change meanwhile wakes us
		l.mu.Unlock()
		var v verdict
		if timer != nil && peerGone(oc.TCPConn) {
			// It waited, and the peer closed it meanwhile: gobgp would
			// send its OPEN into it, fail and hold the peer idle. Checked
			// before decide, which books what it hands over as gobgp's
			// connection (collision.go).
			l.log.Debug("bgp listener: dropped a waiting connection the peer closed", zap.String("peer", p.name), zap.Stringer("address", remote))
			v = closeIt
		} else {
			v = l.decide(p, remote, oc.head, oc)
		}
		if v == handOver {
			return true
		}
		l.mu.Lock()
		if v == closeIt {
			l.release(remote, w)
			l.mu.Unlock()
			oc.Close() // marks it closed for the collision gate too
			return false
		}
		w.deferred = true
		l.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		select {
		case <-kick:
			continue
		case <-timer.C:
			l.infoLimited("bgp listener: closed a peer's connection that waited for the session to be ready for it", remote,
				zap.String("peer", p.name))
		case <-w.evict:
		case <-l.done:
		}
		l.mu.Lock()
		l.release(remote, w)
		l.mu.Unlock()
		w.c.Close()
		return false
	}
}

// peerGone reports whether the peer closed c (its FIN or a reset is
// pending), without consuming what it sent.
func peerGone(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = (n == 0 && err == nil) || err == unix.ECONNRESET
		return true
	})
	return gone
}

// stateChanged wakes the connections waiting for gobgp to be Active.
func (l *listener) stateChanged() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.kick)
	l.kick = make(chan struct{})
}

// deferring reports whether a connection from addr waits for gobgp to be
// Active (the dialer holds off then).
func (l *listener) deferring(addr netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.pending[addr] {
		if w.deferred {
			return true
		}
	}
	return false
}

// maxOpenLen is the longest OPEN (RFC 4271 4.1; RFC 8654's extended
// messages apply only after the OPEN exchange).
const maxOpenLen = 4096

// readOpen reads one whole OPEN message within wait.
func readOpen(c net.Conn, wait time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	head := make([]byte, bgpHeaderLen, maxOpenLen)
	if _, err := io.ReadFull(c, head); err != nil {
		return nil, err
	}
	if err := checkOpenHeader(head); err != nil {
		return nil, err
	}
	length := int(binary.BigEndian.Uint16(head[16:18]))
	msg := head[:length]
	if _, err := io.ReadFull(c, msg[bgpHeaderLen:]); err != nil {
		return nil, fmt.Errorf("OPEN of %d bytes cut short: %w", length, err)
	}
	return msg, nil
}

// unsupportedOptParam says which optional parameter of the whole OPEN msg
// is not capabilities (type 2), "" if none (RFC 4271 4.2, 6.2; RFC 5492).
// The extended format of RFC 9072 (the first type 255) is left to gobgp,
// as is a parameter field that does not parse.
func unsupportedOptParam(msg []byte) string {
	if len(msg) < 29 {
		return ""
	}
	n := int(msg[28])
	params := msg[29:]
	if n > len(params) || (n > 0 && params[0] == 255) {
		return ""
	}
	params = params[:n]
	for len(params) >= 2 {
		typ, plen := params[0], int(params[1])
		if typ != 2 {
			return fmt.Sprintf("optional parameter of type %d (only 2, capabilities, is supported)", typ)
		}
		if 2+plen > len(params) {
			return ""
		}
		params = params[2+plen:]
	}
	return ""
}

// notification is a NOTIFICATION message with code and subcode.
func notification(code, subcode byte) []byte {
	b := make([]byte, bgpHeaderLen, bgpHeaderLen+2)
	for i := range 16 {
		b[i] = 0xff
	}
	binary.BigEndian.PutUint16(b[16:18], bgpHeaderLen+2)
	b[18] = 3
	return append(b, code, subcode)
}

// checkOpenHeader accepts a BGP header of type OPEN (RFC 4271 4.1, 4.2).
func checkOpenHeader(h []byte) error {
	for _, b := range h[:16] {
		if b != 0xff {
			return errors.New("the first 16 bytes are not a BGP marker")
		}
	}
	length := binary.BigEndian.Uint16(h[16:18])
	if h[18] != 1 {
		return fmt.Errorf("the first message is of type %d, not OPEN (1)", h[18])
	}
	if length < 29 || length > maxOpenLen {
		return fmt.Errorf("OPEN message of length %d (29 to %d)", length, maxOpenLen)
	}
	return nil
}

// close stops accepting and closes the listening sockets and the
// connections still waiting for an OPEN, and returns once every goroutine
// of the listener has returned. Connections handed to gobgp are gobgp's.
// It is idempotent.
func (l *listener) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	close(l.done)
	for _, ln := range l.lns {
		ln.Close()
	}
	for addr, ws := range l.pending {
		for _, w := range ws {
			w.close()
		}
		delete(l.pending, addr)
	}
	l.mu.Unlock()
	l.wg.Wait()
	// Connections handed over that gobgp's Serve loop never read.
	for {
		select {
		case c := <-l.handoff:
			c.Close()
		default:
			return
		}
	}
}

// openConn is an accepted connection whose first bytes (the OPEN header)
// were already read: Read returns them first. It embeds *net.TCPConn, so
// gobgp can still set socket options through SyscallConn. Everything gobgp
// reads also goes through sniff, which spots the peer's NOTIFICATIONs.
type openConn struct {
	*net.TCPConn
	head  []byte
	sniff *sniffer
	// closed is set by Close (gobgp's or ovnbgp's), and closing closed.
	closed              atomic.Bool
	closeOnce, chanOnce sync.Once
	closing             chan struct{}
	// admit, when set, is called with each whole message (framed
	// reads) before gobgp reads any of it; it may hold the message back
	// for a while (prefixAdmit) and gets closing to give up on.
	admit func(msg []byte, closing <-chan struct{})
	// fixOverrun, when set, makes Read frame the stream into whole
	// messages and pass each UPDATE through withdrawOnAttrOverrun (RFC
	// 7606 4, which gobgp gets wrong), calling fixOverrun for each one
	// rewritten. gobgp reads one message at a time from one goroutine.
	fixOverrun func()
	in, out    []byte // framing: bytes read, whole messages to hand out
	rbuf       []byte
}

func (c *openConn) Close() error {
	c.closed.Store(true)
	c.closeOnce.Do(func() { close(c.closingCh()) })
	return c.TCPConn.Close()
}

func (c *openConn) closingCh() chan struct{} {
	c.chanOnce.Do(func() { c.closing = make(chan struct{}) })
	return c.closing
}

func (c *openConn) Read(b []byte) (int, error) {
	if c.fixOverrun != nil || len(c.out) > 0 {
		return c.readFramed(b)
	}
	if len(c.head) > 0 {
		n := copy(b, c.head)
		c.head = c.head[n:]
		c.sniff.feed(b[:n])
		return n, nil
	}
	n, err := c.TCPConn.Read(b)
	c.sniff.feed(b[:n])
	return n, err
}

// readFramed is Read with fixOverrun: it hands out whole messages only,
// each UPDATE checked. A read error (a deadline, EOF) is returned as is,
// the bytes of a message not yet whole kept for the next call.
func (c *openConn) readFramed(b []byte) (int, error) {
	for len(c.out) == 0 {
		if len(c.head) > 0 {
			c.in, c.head = append(c.in, c.head...), nil
		}
		if len(c.in) >= bgpHeaderLen {
			n := int(binary.BigEndian.Uint16(c.in[16:18]))
			if n < bgpHeaderLen {
				// not BGP any more: hand the rest over unframed, gobgp
				// ends the session
				c.out, c.in, c.fixOverrun = c.in, nil, nil
				break
			}
			if len(c.in) >= n {
				msg, fixed := withdrawOnAttrOverrun(c.in[:n:n])
				if fixed && c.fixOverrun != nil {
					c.fixOverrun()
				}
				if c.admit != nil {
					c.admit(msg, c.closingCh())
				}
				c.out, c.in = msg, c.in[n:]
				break
			}
		}
		if c.rbuf == nil {
			c.rbuf = make([]byte, 1<<16)
		}
		n, err := c.TCPConn.Read(c.rbuf)
		c.in = append(c.in, c.rbuf[:n]...)
		if err != nil && n == 0 {
			return 0, err
		}
	}
	n := copy(b, c.out)
	c.out = c.out[n:]
	c.sniff.feed(b[:n])
	return n, nil
}

// newSniffer reports the NOTIFICATIONs read from the peer at remote to
// tap (nil: none).
func newSniffer(tap func(addr string, sent bool, code, subcode uint8, communication string), remote netip.Addr) *sniffer {
	if tap == nil {
		return nil
	}
	addr := remote.String()
	return &sniffer{tap: func(code, sub uint8) { tap(addr, false, code, sub, "") }}
}

// sniffer follows the BGP message boundaries of a byte stream and calls
// tap with the code and subcode of each NOTIFICATION. It stops at the first
// malformed header (gobgp ends the session then anyway). gobgp reads from
// one goroutine at a time, so it needs no lock.
type sniffer struct {
	tap       func(code, subcode uint8)
	hdr       [bgpHeaderLen]byte
	hn        int // header bytes seen
	remaining int // body bytes still to come
	typ       byte
	code      [2]byte
	cn        int
	dead      bool
}

func (s *sniffer) feed(p []byte) {
	if s == nil {
		return
	}
	for len(p) > 0 && !s.dead {
		if s.hn < bgpHeaderLen {
			n := copy(s.hdr[s.hn:], p)
			s.hn += n
			p = p[n:]
			if s.hn == bgpHeaderLen {
				length := int(binary.BigEndian.Uint16(s.hdr[16:18]))
				if length < bgpHeaderLen {
					s.dead = true
					return
				}
				s.typ, s.remaining, s.cn = s.hdr[18], length-bgpHeaderLen, 0
				s.done()
			}
			continue
		}
		n := min(len(p), s.remaining)
		for i := 0; i < n && s.typ == 3 && s.cn < 2; i++ {
			s.code[s.cn] = p[i]
			s.cn++
		}
		s.remaining -= n
		p = p[n:]
		s.done()
	}
}

// done ends the current message once its body is complete.
func (s *sniffer) done() {
	if s.remaining > 0 {
		return
	}
	if s.typ == 3 && s.cn == 2 {
		s.tap(s.code[0], s.code[1])
	}
	s.hn = 0
}

func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(t.IP); ok {
			// gobgp keys a link-local peer by its zone (fe80::1%eth0).
			return ip.Unmap().WithZone(t.Zone)
		}
	}
	return netip.Addr{}
}

func setTTL(c syscall.RawConn, v6 bool, ttl int) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, ttl)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, ttl)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

func setMinTTL(fd int, v6 bool, ttl int) error {
	if v6 {
		return unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MINHOPCOUNT, ttl)
	}
	return unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MINTTL, ttl)
}
