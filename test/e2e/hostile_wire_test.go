package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// A small raw-socket BGP speaker for the hostile-input suite: byte builders
// for OPEN, KEEPALIVE, UPDATE and NOTIFICATION (RFC 4271 4), and a session
// that dials the daemon from an address of the tor namespace. It sends what
// the test gives it, byte for byte, malformed or not; ExaBGP cannot.

const (
	bgpOpen         = 1
	bgpUpdate       = 2
	bgpNotification = 3
	bgpKeepalive    = 4
)

// bgpMsg frames body as a BGP message of type typ (marker, length, type).
func bgpMsg(typ byte, body []byte) []byte {
	b := make([]byte, 19, 19+len(body))
	for i := range 16 {
		b[i] = 0xff
	}
	binary.BigEndian.PutUint16(b[16:], uint16(19+len(body)))
	b[18] = typ
	return append(b, body...)
}

// openMsg is an OPEN: version, 2-octet AS, hold time, BGP identifier and
// the optional parameters as given (their length is counted here).
func openMsg(version byte, as uint16, hold uint16, id netip.Addr, params []byte) []byte {
	b := []byte{version, byte(as >> 8), byte(as), byte(hold >> 8), byte(hold)}
	b = append(b, id.AsSlice()...)
	b = append(b, byte(len(params)))
	return bgpMsg(bgpOpen, append(b, params...))
}

// capParam is an optional parameter of type 2 (capabilities) holding caps.
func capParam(caps ...[]byte) []byte {
	var v []byte
	for _, c := range caps {
		v = append(v, c...)
	}
	return append([]byte{2, byte(len(v))}, v...)
}

func capability(code byte, val []byte) []byte {
	return append([]byte{code, byte(len(val))}, val...)
}

// capMP is the multiprotocol capability (RFC 4760) for afi/safi.
func capMP(afi uint16, safi byte) []byte {
	return capability(1, []byte{byte(afi >> 8), byte(afi), 0, safi})
}

// cap4Octet is the four-octet AS capability (RFC 6793).
func cap4Octet(as uint32) []byte {
	return capability(65, binary.BigEndian.AppendUint32(nil, as))
}

// stdOpen is the OPEN of a well-behaved eBGP speaker: IPv4 unicast, four-
// octet AS, hold time 90 s (the daemon's 9 s wins).
func stdOpen(as uint32, id netip.Addr) []byte {
	return openMsg(4, uint16(as), 90, id, capParam(capMP(1, 1), cap4Octet(as)))
}

// attr is a path attribute; the extended-length flag is set when val
// needs it.
func attr(flags, typ byte, val []byte) []byte {
	if len(val) > 255 || flags&0x10 != 0 {
		return append([]byte{flags | 0x10, typ, byte(len(val) >> 8), byte(len(val))}, val...)
	}
	return append([]byte{flags, typ, byte(len(val))}, val...)
}

func attrOrigin(v byte) []byte { return attr(0x40, 1, []byte{v}) }

// attrASPath4 is an AS_PATH of one AS_SEQUENCE of four-octet ASNs.
func attrASPath4(asns ...uint32) []byte {
	v := []byte{2, byte(len(asns))}
	for _, a := range asns {
		v = binary.BigEndian.AppendUint32(v, a)
	}
	return attr(0x40, 2, v)
}

// attrASPath2 is an AS_PATH of one AS_SEQUENCE of two-octet ASNs (a peer
// without the four-octet AS capability).
func attrASPath2(asns ...uint16) []byte {
	v := []byte{2, byte(len(asns))}
	for _, a := range asns {
		v = binary.BigEndian.AppendUint16(v, a)
	}
	return attr(0x40, 2, v)
}

func attrNextHop(a netip.Addr) []byte { return attr(0x40, 3, a.AsSlice()) }

// nlri encodes prefixes as NLRI (length in bits, then the significant
// octets).
func nlri(ps ...netip.Prefix) []byte {
	var b []byte
	for _, p := range ps {
		n := (p.Bits() + 7) / 8
		b = append(b, byte(p.Bits()))
		b = append(b, p.Addr().AsSlice()[:n]...)
	}
	return b
}

// updateMsg is an UPDATE with the given withdrawn routes, path attributes
// and NLRI, their lengths counted here.
func updateMsg(withdrawn, attrs, reach []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(withdrawn)))
	b = append(b, withdrawn...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(attrs)))
	b = append(b, attrs...)
	return bgpMsg(bgpUpdate, append(b, reach...))
}

func notificationMsg(code, sub byte, data []byte) []byte {
	return bgpMsg(bgpNotification, append([]byte{code, sub}, data...))
}

func keepaliveMsg() []byte { return bgpMsg(bgpKeepalive, nil) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// dialFrom opens a TCP connection from local (an address of namespace ns)
// to remote.
func dialFrom(ns string, local netip.Addr, remote netip.AddrPort) (*net.TCPConn, error) {
	var c net.Conn
	err := lab.InNetns(ns, func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}, Timeout: 10 * time.Second}
		var err error
		c, err = d.Dial("tcp", remote.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// rawMsg is one message the daemon sent.
type rawMsg struct {
	typ  byte
	body []byte
}

// notification is a NOTIFICATION the daemon sent.
type notification struct{ code, sub byte }

func (n notification) String() string { return fmt.Sprintf("NOTIFICATION %d/%d", n.code, n.sub) }

// rawSession is one TCP connection to the daemon's port 179 driven by the
// test: it sends exactly the bytes it is given; a reader records what the
// daemon sends, and once established a keepalive loop keeps the session.
type rawSession struct {
	conn *net.TCPConn
	msgs chan rawMsg // every message read; closed when the connection ends

	wmu    sync.Mutex
	mu     sync.Mutex
	notif  *notification
	err    error // why the reader stopped
	closed chan struct{}
	stop   chan struct{}
	once   sync.Once
	// peerOpen is the daemon's OPEN body (establish).
	peerOpen []byte
}

func newRawSession(ns string, local netip.Addr, remote netip.AddrPort) (*rawSession, error) {
	c, err := dialFrom(ns, local, remote)
	if err != nil {
		return nil, err
	}
	s := &rawSession{conn: c, msgs: make(chan rawMsg, 4096), closed: make(chan struct{}), stop: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *rawSession) read() {
	r := bufio.NewReaderSize(s.conn, 1<<16)
	defer close(s.closed)
	defer close(s.msgs)
	for {
		h := make([]byte, 19)
		if _, err := io.ReadFull(r, h); err != nil {
			s.setErr(err)
			return
		}
		n := int(binary.BigEndian.Uint16(h[16:]))
		if n < 19 {
			s.setErr(fmt.Errorf("message length %d", n))
			return
		}
		body := make([]byte, n-19)
		if _, err := io.ReadFull(r, body); err != nil {
			s.setErr(err)
			return
		}
		if h[18] == bgpNotification && len(body) >= 2 {
			s.mu.Lock()
			if s.notif == nil {
				s.notif = &notification{body[0], body[1]}
			}
			s.mu.Unlock()
		}
		select {
		case s.msgs <- rawMsg{h[18], body}:
		default: // nobody reads (UPDATEs of the daemon's advertisements): drop
		}
	}
}

func (s *rawSession) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// Notified is the first NOTIFICATION the daemon sent, or nil.
func (s *rawSession) Notified() *notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notif
}

// Send writes msgs, each as given.
func (s *rawSession) Send(msgs ...[]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, m := range msgs {
		if _, err := s.conn.Write(m); err != nil {
			return err
		}
	}
	return nil
}

// Establish sends open and waits for the daemon's OPEN and KEEPALIVE (a
// NOTIFICATION or the end of the connection is an error naming it), then
// keeps the session with a KEEPALIVE every second.
func (s *rawSession) Establish(open []byte, timeout time.Duration) error {
	if err := s.Send(open); err != nil {
		return err
	}
	deadline := time.After(timeout)
	gotOpen := false
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				if n := s.Notified(); n != nil {
					return fmt.Errorf("daemon sent %s", n)
				}
				return fmt.Errorf("connection ended before Established: %v", s.readErr())
			}
			switch m.typ {
			case bgpOpen:
				gotOpen = true
				s.peerOpen = m.body
				if err := s.Send(keepaliveMsg()); err != nil {
					return err
				}
			case bgpKeepalive:
				if gotOpen {
					go s.keepalive()
					return nil
				}
			case bgpNotification:
				return fmt.Errorf("daemon sent %s", notification{m.body[0], m.body[1]})
			}
		case <-deadline:
			return fmt.Errorf("not Established within %s (OPEN received: %v)", timeout, gotOpen)
		}
	}
}

func (s *rawSession) readErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *rawSession) keepalive() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if s.Send(keepaliveMsg()) != nil {
				return
			}
		case <-s.stop:
			return
		case <-s.closed:
			return
		}
	}
}

// WaitClosed waits until the daemon ends the connection and returns the
// NOTIFICATION it sent before (nil: none).
func (s *rawSession) WaitClosed(timeout time.Duration) (*notification, error) {
	for {
		select {
		case _, ok := <-s.msgs:
			if !ok {
				return s.Notified(), nil
			}
		case <-time.After(timeout):
			return s.Notified(), fmt.Errorf("connection still open after %s", timeout)
		}
	}
}

// Drain discards what the daemon sends until the connection ends (for a
// session whose messages nobody waits for).
func (s *rawSession) Drain() {
	go func() {
		for range s.msgs {
		}
	}()
}

// PeerCapability reports whether the daemon's OPEN carries capability
// code.
func (s *rawSession) PeerCapability(code byte) bool {
	b := s.peerOpen
	if len(b) < 10 {
		return false
	}
	params := b[10:]
	for len(params) >= 2 {
		typ, n := params[0], int(params[1])
		if len(params) < 2+n {
			return false
		}
		if typ == 2 {
			caps := params[2 : 2+n]
			for len(caps) >= 2 {
				if caps[0] == code {
					return true
				}
				caps = caps[min(len(caps), 2+int(caps[1])):]
			}
		}
		params = params[2+n:]
	}
	return false
}

// Close ends the session (the keepalive loop and the connection).
func (s *rawSession) Close() {
	s.once.Do(func() {
		close(s.stop)
		_ = s.conn.Close()
	})
}
