package vrf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Batched route writes. vishvananda/netlink sends one message and waits
// for its ack per route; a 100k-route import spent most of its time in
// those round trips. Here many RTM_NEWROUTE / RTM_DELROUTE messages go in
// one sendmsg on a long-lived socket of our own. The kernel handles them
// in order and answers a failed one with an error (matched back to its
// operation by sequence number) whether it asked for an ack or not; only
// the last asks (NLM_F_ACK), so once its answer is in, every message
// before it without an error succeeded. (An ack per message doubled the
// messages read back: a quarter of the kernel side's CPU in a large
// import.)

const (
	// batchMessages and batchBytes bound one sendmsg: 256 answers of
	// ~1 KiB of socket memory each fit easily in batchRcvBuf, and 64 KiB is far
	// below the socket's send buffer (a request larger than sk_sndbuf is
	// refused).
	batchMessages = 256
	batchBytes    = 64 << 10
	// batchRcvBuf is the receive buffer asked for the batch socket, so
	// the acks of a whole batch queue up without an overflow (a lost ack
	// leaves an operation's outcome unknown).
	batchRcvBuf = 4 << 20
	// ackTimeout bounds the wait for the acks of one batch.
	ackTimeoutSec = 30
)

// nlSocket is a blocking NETLINK_ROUTE socket for batched requests, one
// exchange at a time (the Manager's hmu).
type nlSocket struct {
	fd  int
	seq uint32
	// portID is the socket's netlink port: the kernel puts it in the
	// route events its requests cause, which tells our own writes apart.
	portID uint32
	// sends counts the sendmsg calls (tests: a batch is one).
	sends atomic.Int64
	// wbuf and rbuf are exchange's send and receive buffers, kept for
	// the next batch (a 100k import is ~400 batches: issue 18).
	wbuf, rbuf []byte
}

// openSocket opens the batch socket in ns (nil: the current namespace).
func openSocket(ns *netns.NsHandle) (*nlSocket, error) {
	fd, err := socketIn(ns)
	if err != nil {
		return nil, fmt.Errorf("open netlink batch socket: %w", err)
	}
	s := &nlSocket{fd: fd}
	// SO_RCVBUFFORCE passes the rmem_max limit (root); SO_RCVBUF is the
	// best effort otherwise.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, batchRcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, batchRcvBuf)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1<<20)
	// Error acks carry the failed request's header only (not the whole
	// request), and the kernel's message when it has one.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	tv := unix.Timeval{Sec: ackTimeoutSec}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink batch socket receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind netlink batch socket: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	nl, ok := sa.(*unix.SockaddrNetlink)
	if err != nil || !ok || nl.Pid == 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink batch socket has no port id (%v)", err)
	}
	s.portID = nl.Pid
	return s, nil
}

// socketIn creates the socket inside ns, on a locked thread that is moved
// back to its own namespace afterwards.
func socketIn(ns *netns.NsHandle) (int, error) {
	if ns == nil {
		return unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := netns.Get()
	if err != nil {
		return -1, fmt.Errorf("current netns: %w", err)
	}
	defer cur.Close()
	if err := netns.Set(*ns); err != nil {
		return -1, fmt.Errorf("enter netns %s: %w", *ns, err)
	}
	fd, serr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err := netns.Set(cur); err != nil {
		// The thread is stuck in the other namespace: never unlock it,
		// so the runtime ends it instead of reusing it.
		runtime.LockOSThread()
		if serr == nil {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("return from netns %s: %w", *ns, err)
	}
	return fd, serr
}

func (s *nlSocket) close() { unix.Close(s.fd) }

// exchange sends msgs (each a whole netlink message with NLM_F_ACK whose
// sequence number was given by s.next) in one sendmsg, the ack asked of
// the last only, and returns each message's result in order: nil, or the
// kernel's error (a syscall.Errno, wrapped with the kernel's text when it
// gave one).
func (s *nlSocket) exchange(msgs [][]byte) []error {
	res := make([]error, len(msgs))
	if len(msgs) == 0 {
		return res
	}
	first := binary.NativeEndian.Uint32(msgs[0][8:12])
	if s.wbuf == nil {
		s.wbuf, s.rbuf = make([]byte, 0, batchBytes), make([]byte, 64<<10)
	}
	buf := s.wbuf[:0]
	defer func() { s.wbuf = buf[:0] }()
	for i, m := range msgs {
		at := len(buf)
		buf = append(buf, m...)
		if i < len(msgs)-1 {
			f := binary.NativeEndian.Uint16(buf[at+6 : at+8])
			binary.NativeEndian.PutUint16(buf[at+6:at+8], f&^unix.NLM_F_ACK)
		}
	}
	s.sends.Add(1)
	if err := unix.Sendto(s.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		for i := range res {
			res[i] = fmt.Errorf("send netlink batch: %w", err)
		}
		return res
	}
	acked := make([]bool, len(msgs))
	last := len(msgs) - 1
	rb := s.rbuf
	for !acked[last] {
		n, _, err := unix.Recvfrom(s.fd, rb, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// ENOBUFS (answers overflowed) or the timeout: the outcome
			// of every message without an answer is unknown. What is
			// still queued is read and dropped, so the next batch starts
			// on an empty socket (a full one would lose its answers too).
			s.drain(rb)
			for i := range res {
				if !acked[i] {
					res[i] = fmt.Errorf("no answer from the kernel (%w): the outcome is unknown and is read back", err)
				}
			}
			return res
		}
		msgsIn, perr := syscall.ParseNetlinkMessage(rb[:n])
		if perr != nil {
			continue
		}
		for _, m := range msgsIn {
			if m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			d := m.Header.Seq - first // wraps with the sequence numbers
			if d >= uint32(len(msgs)) || acked[d] {
				continue // not ours (an earlier batch's stray answer)
			}
			acked[d] = true
			res[d] = ackError(m)
		}
	}
	return res
}

// drain reads and drops whatever answers are queued on the socket.
func (s *nlSocket) drain(buf []byte) {
	for {
		if _, _, err := unix.Recvfrom(s.fd, buf, unix.MSG_DONTWAIT); err != nil && !errors.Is(err, unix.EINTR) {
			return // EAGAIN: empty
		}
	}
}

// ackError decodes an NLMSG_ERROR: nil for an ack, else the errno with the
// kernel's extended-ack message when there is one.
func ackError(m syscall.NetlinkMessage) error {
	if len(m.Data) < 4 {
		return errors.New("short netlink ack")
	}
	code := int32(binary.NativeEndian.Uint32(m.Data[:4]))
	if code == 0 {
		return nil
	}
	errno := syscall.Errno(-code)
	if m.Header.Flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno
	}
	// With NETLINK_CAP_ACK the request's header (16 bytes) follows the
	// code; the TLVs come after it.
	tlvs := m.Data[4:]
	if len(tlvs) < unix.SizeofNlMsghdr {
		return errno
	}
	tlvs = tlvs[unix.SizeofNlMsghdr:]
	for len(tlvs) >= 4 {
		l := int(binary.NativeEndian.Uint16(tlvs[0:2]))
		t := binary.NativeEndian.Uint16(tlvs[2:4])
		if l < 4 || l > len(tlvs) {
			break
		}
		if t == unix.NLMSGERR_ATTR_MSG {
			msg := string(tlvs[4:l])
			for len(msg) > 0 && msg[len(msg)-1] == 0 {
				msg = msg[:len(msg)-1]
			}
			if msg != "" {
				return fmt.Errorf("%w (%s)", errno, msg)
			}
		}
		tlvs = tlvs[(l+3)&^3:]
	}
	return errno
}

// next returns the next sequence number.
func (s *nlSocket) next() uint32 {
	s.seq++
	return s.seq
}

// nlHop is a resolved next hop: gateway, output device index, and its
// rtnexthop hops (its weight - 1 in a multipath route; issue 21).
type nlHop struct {
	gw      netip.Addr
	ifindex int
	hops    uint8
}

// routeMsg serialises one route request for our route shape: dst, table
// (in rtm_table when below 256, and always in RTA_TABLE), protocol, scope,
// type, and a gateway plus device or an RTA_MULTIPATH of them (a gateway
// of the other family than the prefix's is an RTA_VIA, see appendGateway). typ is
// RTM_NEWROUTE or RTM_DELROUTE; flags are added to NLM_F_REQUEST|NLM_F_ACK.
// A delete carries no next hop (the kernel removes every next hop of the
// route with our protocol at that key), scope "nowhere" and no type, as
// `ip route del` does. metric is the key's metric: an add or replace at
// the kernel's default (0, and 1024 for IPv6) sends none, another sends
// it (RTA_PRIORITY, import[].accept[].metric, issue 21); an IPv6 delete
// always names it, an IPv4 one unless it is 0.
func routeMsg(typ uint16, flags uint16, seq uint32, prefix netip.Prefix, table uint32, protocol uint8, metric uint32, hops []nlHop) []byte {
	return appendRouteMsg(make([]byte, 0, 128), typ, flags, seq, prefix, table, protocol, metric, hops)
}

// appendRouteMsg appends routeMsg's message to b: a batch is built in one
// buffer, with no allocation per route (issue 18, TestApplyAllocsPerRoute).
func appendRouteMsg(b []byte, typ uint16, flags uint16, seq uint32, prefix netip.Prefix, table uint32, protocol uint8, metric uint32, hops []nlHop) []byte {
	start := len(b)
	var hdr [unix.SizeofNlMsghdr]byte
	b = append(b, hdr[:]...)
	family := uint8(unix.AF_INET)
	if prefix.Addr().Is6() {
		family = unix.AF_INET6
	}
	rtTable := uint8(unix.RT_TABLE_UNSPEC)
	if table < 256 {
		rtTable = uint8(table)
	}
	scope, rtype := uint8(unix.RT_SCOPE_UNIVERSE), uint8(unix.RTN_UNICAST)
	if typ == unix.RTM_DELROUTE {
		scope, rtype = unix.RT_SCOPE_NOWHERE, unix.RTN_UNSPEC
	}
	// struct rtmsg
	b = append(b, family, uint8(prefix.Bits()), 0, 0, rtTable, protocol, scope, rtype, 0, 0, 0, 0)
	b = appendAddr(b, unix.RTA_DST, prefix.Addr())
	b = appendU32(b, unix.RTA_TABLE, table)
	if metric != defaultMetric(prefix) || typ == unix.RTM_DELROUTE && family == unix.AF_INET6 {
		// An IPv6 delete without a metric removes the lowest-metric
		// route of our protocol at the prefix, which need not be ours
		// (someone's `ip -6 route add ... proto 200 metric 100`). IPv4
		// cannot name metric 0 (0 means any), but its delete takes the
		// lowest metric first: ours, at 0, when it is there.
		b = appendU32(b, unix.RTA_PRIORITY, metric)
	}
	if typ == unix.RTM_NEWROUTE {
		switch len(hops) {
		case 0:
		case 1:
			if hops[0].gw.IsValid() {
				b = appendGateway(b, family == unix.AF_INET, hops[0].gw)
			}
			if hops[0].ifindex != 0 {
				b = appendU32(b, unix.RTA_OIF, uint32(hops[0].ifindex))
			}
		default:
			var mp []byte
			for _, h := range hops {
				start := len(mp)
				// struct rtnexthop: len, flags, hops (weight - 1), ifindex
				mp = append(mp, 0, 0, 0, h.hops)
				mp = binary.NativeEndian.AppendUint32(mp, uint32(h.ifindex))
				if h.gw.IsValid() {
					mp = appendGateway(mp, family == unix.AF_INET, h.gw)
				}
				binary.NativeEndian.PutUint16(mp[start:], uint16(len(mp)-start))
			}
			b = appendAttr(b, unix.RTA_MULTIPATH, mp)
		}
	}
	m := b[start:]
	binary.NativeEndian.PutUint32(m[0:4], uint32(len(m)))
	binary.NativeEndian.PutUint16(m[4:6], typ)
	binary.NativeEndian.PutUint16(m[6:8], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(m[8:12], seq)
	return b
}

// appendU32 appends an rtattr of one 32-bit value.
func appendU32(b []byte, typ uint16, v uint32) []byte {
	var w [4]byte
	binary.NativeEndian.PutUint32(w[:], v)
	return appendAttr(b, typ, w[:])
}

// appendAddr appends an rtattr of an address (4 or 16 bytes).
func appendAddr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() {
		w := a.As4()
		return appendAttr(b, typ, w[:])
	}
	w := a.As16()
	return appendAttr(b, typ, w[:])
}

// appendGateway appends next hop gw of a route whose prefix is IPv4 (v4)
// or IPv6: RTA_GATEWAY when gw is of the prefix's family, else RTA_VIA
// (struct rtvia: the family, then the address), as `ip route add
// 10.1.0.0/24 via inet6 fe80::1 dev eth1` sends an IPv4 route's IPv6 next
// hop (issue 20, RFC 8950). The kernel needs a device with it (RTA_OIF).
func appendGateway(b []byte, v4 bool, gw netip.Addr) []byte {
	if gw.Is4() == v4 {
		return appendAddr(b, unix.RTA_GATEWAY, gw)
	}
	fam := uint16(unix.AF_INET6)
	if gw.Is4() {
		fam = unix.AF_INET
	}
	return appendAttr(b, unix.RTA_VIA, append(binary.NativeEndian.AppendUint16(nil, fam), gw.AsSlice()...))
}

// appendAttr appends one rtattr, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := 4 + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for range (4 - l%4) % 4 {
		b = append(b, 0)
	}
	return b
}
