package vrf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ovnbgp/ovnbgp/model"
)

// resubscribeDelay is how long a lost subscription waits before it is
// renewed, so a failing socket does not spin.
const resubscribeDelay = time.Second

// Manager reads and writes the host's routes, VRFs and rules through one
// long-lived netlink handle, and watches them through subscriptions.
type Manager struct {
	// hmu serialises the handle's requests and the batch socket: a
	// netlink.Handle matches replies to requests on one socket and is not
	// safe for concurrent dumps. Apply and the link and rule reads hold
	// it.
	hmu  sync.Mutex
	h    *netlink.Handle
	sock *nlSocket // batched route writes
	// batch is applyRoutes' scratch, kept for the next batch (hmu).
	batch struct {
		buf           []byte
		ends          []int
		msgs          [][]byte
		sent, written []routeOp
	}
	// dmu serialises dh, the handle that dumps routes (strict checking
	// on, so the kernel filters a table's dump itself).
	dmu      sync.Mutex
	dh       *netlink.Handle
	ns       *netns.NsHandle // nil: the current namespace
	protocol int
	log      *zap.Logger
	notify   func()
	// lookups counts key lookups (each dumps a table): an add looks its
	// key up only when the kernel says it is taken.
	lookups atomic.Int64
	// reloadReq asks the route watcher to dump the routes again (a link
	// or address changed: the kernel flushes IPv4 routes silently).
	reloadReq chan struct{}
	// wakeFd (an eventfd) wakes the route watcher, which otherwise sleeps
	// in poll(2) until the kernel has something: a reload is requested or
	// the manager closes. routeWakes counts the watcher's wake-ups (tests).
	wakeFd     int
	routeWakes atomic.Int64

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	// cmu guards the route cache and what changed since TakeChanges.
	cmu   sync.Mutex
	cache map[rkey][]alias
	// alt are the metrics other than the default at which the cache holds
	// a route of ours, by table and prefix (indexLocked).
	alt map[model.KernelRouteKey][]uint32
	// interned are the single-route values of the cache, shared: a large
	// import is thousands of routes with the same few next hops (see
	// intern). internBuf is intern's scratch key.
	interned  map[string][]alias
	internBuf []byte
	// tables are the watched tables: where ovnbgp has or had routes,
	// wrote, or was asked about; a route change there, whatever its
	// protocol, pokes notify and is reported by TakeChanges.
	tables       map[int]bool
	changed      map[model.KernelRouteKey]struct{}
	linksChanged bool
	all          bool
	// ls is the last read of the links; linksDirty says it must be read
	// again (a link or address event came since).
	ls         *linkSet
	linksDirty bool
	// subFd is the route subscription socket (-1 while it is renewed);
	// syncs are the syncs waiting for their marker's ack, by sequence.
	subFd   int
	syncSeq uint32
	syncs   map[uint32]chan struct{}
}

// Open opens the kernel target in the current network namespace. protocol
// is the route protocol that marks ovnbgp's routes and rules
// (kernel.routeProtocol); notify must not block.
//
// The handle speaks NETLINK_ROUTE only: asking for every family (xfrm,
// netfilter) fails on kernels without those modules loaded.
func Open(protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	return start(nil, protocol, log, notify)
}

// OpenAt is Open inside the network namespace ns (tests). ns must stay open
// until Close.
func OpenAt(ns netns.NsHandle, protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	return start(&ns, protocol, log, notify)
}

func start(ns *netns.NsHandle, protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	if protocol <= 0 || protocol > 255 {
		return nil, fmt.Errorf("route protocol %d: must be 1..255 (kernel.routeProtocol)", protocol)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if notify == nil {
		notify = func() {}
	}
	m := &Manager{ns: ns, protocol: protocol, log: log.Named("vrf"), notify: notify,
		done: make(chan struct{}), tables: map[int]bool{}, cache: map[rkey][]alias{}, alt: map[model.KernelRouteKey][]uint32{}, interned: map[string][]alias{},
		changed: map[model.KernelRouteKey]struct{}{}, linksDirty: true, reloadReq: make(chan struct{}, 1),
		subFd: -1, syncs: map[uint32]chan struct{}{}}
	var err error
	if m.wakeFd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("eventfd for the route watcher: %w", err)
	}
	where := "the current netns"
	nsh := netns.None()
	if ns != nil {
		where, nsh = "netns "+ns.String(), *ns
	}
	if m.h, err = netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE); err != nil {
		unix.Close(m.wakeFd)
		return nil, fmt.Errorf("open netlink handle in %s: %w", where, err)
	}
	if m.dh, err = netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE); err != nil {
		m.h.Close()
		unix.Close(m.wakeFd)
		return nil, fmt.Errorf("open netlink handle in %s: %w", where, err)
	}
	if err := m.dh.SetStrictCheck(true); err != nil {
		m.log.Warn("netlink strict checking unavailable: table dumps are filtered in user space", zap.Error(err))
	}
	if m.sock, err = openSocket(ns); err != nil {
		m.h.Close()
		m.dh.Close()
		unix.Close(m.wakeFd)
		return nil, err
	}
	// Subscribe before returning, so no change after Open goes unseen;
	// the route subscription fills the cache once subscribed.
	subs := []subscription{
		{"route", m.subscribeRoutes}, {"link", m.subscribeLinks}, {"address", m.subscribeAddrs},
	}
	consumers := make([]func(), len(subs))
	for i, s := range subs {
		consume, err := s.subscribe(m.onErr(s.what))
		if err != nil {
			close(m.done) // ends the subscriptions made so far
			m.wake()
			for _, c := range consumers[:i] {
				c() // drains until the channel closes
			}
			m.h.Close()
			m.dh.Close()
			m.sock.close()
			unix.Close(m.wakeFd)
			return nil, err
		}
		consumers[i] = consume
	}
	for i, s := range subs {
		m.wg.Add(1)
		go m.watch(s, consumers[i])
	}
	return m, nil
}

// subscription is one netlink subscription: subscribe subscribes and
// returns the function that consumes its events until the subscription
// ends (the manager closed, or the socket failed, e.g. ENOBUFS after an
// overflow).
type subscription struct {
	what      string
	subscribe func(onErr func(error)) (consume func(), err error)
}

// Close stops the subscriptions and closes the handle.
func (m *Manager) Close() {
	m.once.Do(func() {
		close(m.done)
		m.wake()
		m.wg.Wait()
		unix.Close(m.wakeFd)
		m.hmu.Lock()
		m.h.Close()
		m.sock.close()
		m.hmu.Unlock()
		m.dmu.Lock()
		m.dh.Close()
		m.dmu.Unlock()
	})
}

func (m *Manager) closed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *Manager) onErr(what string) func(error) {
	return func(err error) {
		if !m.closed() {
			m.log.Warn("netlink subscription error", zap.String("subscription", what), zap.Error(err))
		}
	}
}

// watch keeps one subscription alive: it consumes the events; when the
// subscription ends and the manager is not closed, notify is called (events
// may have been lost) and the subscription is renewed after a pause, then
// notify is called once more.
func (m *Manager) watch(s subscription, consume func()) {
	defer m.wg.Done()
	for {
		consume()
		if m.closed() {
			return
		}
		m.log.Warn("netlink subscription ended, renewing", zap.String("subscription", s.what))
		m.lost()
		m.notify()
		for {
			select {
			case <-m.done:
				return
			case <-time.After(resubscribeDelay):
			}
			var err error
			if consume, err = s.subscribe(m.onErr(s.what)); err == nil {
				break
			}
			m.log.Warn("netlink subscription failed, retrying", zap.String("subscription", s.what), zap.Error(err))
		}
		m.log.Info("netlink subscription renewed", zap.String("subscription", s.what))
		m.lost()
		m.notify()
	}
}

// The subscribe functions subscribe and return the consumer of the events,
// which returns when the channel closes.

// routeRcvBuf is the receive buffer of the route subscription: the echoes
// of a large import arrive faster than they are read, and an overflow
// costs a full dump.
const routeRcvBuf = 8 << 20

// routeReadBuf is the buffer one read of the route subscription takes a
// datagram into (1 MiB before: heap held for nothing).
const routeReadBuf = 64 << 10

// subscribeRoutes subscribes (a socket of our own in the IPv4 and IPv6
// route groups), then fills the cache with one dump (events that come
// meanwhile queue and are replayed over it), and returns the consumer that
// keeps the cache from the events. The socket is ours so that sync can
// put a marker behind the events already queued (see sync).
func (m *Manager) subscribeRoutes(onErr func(error)) (func(), error) {
	fd, err := socketIn(m.ns)
	if err != nil {
		return nil, fmt.Errorf("subscribe to route changes: %w", err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, routeRcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, routeRcvBuf)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("subscribe to route changes: %w", err)
	}
	m.cmu.Lock()
	m.subFd = fd
	m.cmu.Unlock()
	consume := func() {
		defer m.endSub(fd)
		// One datagram a read: the kernel sends route events one
		// message an skb (at most a page or two); MSG_TRUNC reports a
		// longer one, which would be an event lost.
		buf := make([]byte, routeReadBuf)
		for {
			if m.closed() {
				return
			}
			select {
			case <-m.reloadReq:
				m.reloadAndNotify()
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			if err == nil && n > len(buf) {
				onErr(fmt.Errorf("receive route events: a message of %d bytes is longer than the %d-byte buffer", n, len(buf)))
				return // as ENOBUFS: watch renews, with a full dump
			}
			if err != nil {
				if errors.Is(err, unix.EAGAIN) {
					// Nothing queued: sleep until the kernel sends
					// something or wake is called (a reload, Close).
					if err := m.sleep(fd); err != nil {
						onErr(err)
						return
					}
					continue
				}
				if errors.Is(err, unix.EINTR) {
					continue
				}
				onErr(fmt.Errorf("receive route events: %w", err))
				return // ENOBUFS: events were lost; watch renews
			}
			msgs, err := syscall.ParseNetlinkMessage(buf[:n])
			if err != nil {
				onErr(fmt.Errorf("parse route events: %w", err))
				continue
			}
			poke := false
			for _, msg := range msgs {
				switch msg.Header.Type {
				case unix.NLMSG_ERROR: // the ack of a sync marker
					select {
					case <-m.reloadReq:
						m.reloadAndNotify()
					default:
					}
					m.synced(msg.Header.Seq)
				case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
					r, ok := parseRoute(msg.Data)
					if ok && m.onRouteEvent(netlink.RouteUpdate{Type: msg.Header.Type,
						NlFlags: msg.Header.Flags & (unix.NLM_F_REPLACE | unix.NLM_F_EXCL | unix.NLM_F_CREATE | unix.NLM_F_APPEND),
						Route:   r}, msg.Header.Pid == m.sock.portID) {
						poke = true
					}
				}
			}
			if poke {
				m.notify()
			}
		}
	}
	if err := m.reload(); err != nil {
		// The subscription is made: consume it, and retry the dump at
		// once (the cache must not stay empty).
		m.log.Warn("route dump failed, retrying", zap.Error(err))
		m.requestReload()
	}
	return consume, nil
}

// endSub closes a route subscription socket and releases the syncs
// waiting on it.
func (m *Manager) endSub(fd int) {
	m.cmu.Lock()
	if m.subFd == fd {
		m.subFd = -1
	}
	for seq, ch := range m.syncs {
		close(ch)
		delete(m.syncs, seq)
	}
	m.cmu.Unlock()
	unix.Close(fd)
}

// syncTimeout bounds how long Snapshot and Routes wait for the route
// events queued before them.
const syncTimeout = 30 * time.Second

// sync waits until the route events the kernel queued before the call are
// in the cache: it sends an NLMSG_NOOP asking for an ack on the
// subscription socket; the kernel queues the ack behind those events, and
// the consumer sees it after them. Nothing changes in the kernel.
func (m *Manager) sync() {
	m.cmu.Lock()
	fd := m.subFd
	if fd < 0 {
		m.cmu.Unlock()
		return // being renewed: All is set, the next pass reads again
	}
	m.syncSeq++
	seq := m.syncSeq
	ch := make(chan struct{})
	m.syncs[seq] = ch
	msg := make([]byte, unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint32(msg[0:4], unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint16(msg[4:6], unix.NLMSG_NOOP)
	binary.NativeEndian.PutUint16(msg[6:8], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:12], seq)
	// Sent under cmu: endSub clears subFd under it before closing, so fd
	// is still this socket (never a reused descriptor).
	err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	if err != nil {
		delete(m.syncs, seq)
	}
	m.cmu.Unlock()
	if err != nil {
		return
	}
	select {
	case <-ch:
	case <-m.done:
	case <-time.After(syncTimeout):
		m.log.Warn("route events did not catch up", zap.Duration("waited", syncTimeout))
		m.cmu.Lock()
		delete(m.syncs, seq)
		m.cmu.Unlock()
	}
}

// synced releases the sync waiting for seq.
func (m *Manager) synced(seq uint32) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	if ch, ok := m.syncs[seq]; ok {
		close(ch)
		delete(m.syncs, seq)
	}
}

// reloadAndNotify dumps the routes again; notify if something changed.
func (m *Manager) reloadAndNotify() {
	if err := m.reload(); err != nil {
		if m.closed() {
			return
		}
		m.log.Warn("route dump failed, everything is read again", zap.Error(err))
		m.cmu.Lock()
		m.all = true
		m.cmu.Unlock()
		m.notify()
		// Counted in wg, so that Close waits for it: its wake after
		// Close would write to a closed (maybe reused) descriptor. The
		// caller, the route consumer, is counted too: Add is legal here.
		m.wg.Add(1)
		go func() { // retry later, without blocking the events
			defer m.wg.Done()
			select {
			case <-m.done:
			case <-time.After(resubscribeDelay):
				m.requestReload()
			}
		}()
		return
	}
	m.cmu.Lock()
	n := len(m.changed)
	m.cmu.Unlock()
	if n > 0 {
		m.notify()
	}
}

func (m *Manager) requestReload() {
	select {
	case m.reloadReq <- struct{}{}:
	default:
	}
	m.wake()
}

// wake wakes the route watcher from sleep (a reload is due, or the
// manager closed). A wake already pending is enough: the eventfd's counter
// adds up, and sleep reads it back to 0.
func (m *Manager) wake() {
	var one [8]byte // an eventfd counter increment, in host order
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(m.wakeFd, one[:])
}

// sleep waits until the subscription socket fd has something to read or
// wake was called. An idle node must not wake up for nothing: the watcher
// used to poll every 100 ms.
func (m *Manager) sleep(fd int) error {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(m.wakeFd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for route events: %w", err)
		}
		break
	}
	m.routeWakes.Add(1)
	if fds[1].Revents&unix.POLLIN != 0 {
		var b [8]byte
		_, _ = unix.Read(m.wakeFd, b[:]) // back to 0 (non-blocking)
	}
	// POLLERR (e.g. ENOBUFS after an overflow) is left to the next
	// Recvfrom, which returns the error itself.
	if fds[0].Revents&unix.POLLNVAL != 0 {
		return fmt.Errorf("wait for route events: the socket is closed")
	}
	return nil
}

// lost records that events may have been lost: everything is to be read
// again, and the links are.
func (m *Manager) lost() {
	m.cmu.Lock()
	m.all, m.linksChanged, m.linksDirty = true, true, true
	m.cmu.Unlock()
}

// linkEvent records a link, address or VRF change: the links are read
// again. When a device went down or away, or lost an address (flush), and
// a cached route goes through it, the routes are read again too: the
// kernel removes IPv4 routes through such a device without an event. A
// device that comes and goes without carrying a cached route (a pod's
// veth) costs no dump.
func (m *Manager) linkEvent(index int, flush bool) {
	m.cmu.Lock()
	m.linksChanged, m.linksDirty = true, true
	reload := flush && m.usesLocked(index)
	m.cmu.Unlock()
	if reload {
		m.requestReload()
	}
	m.notify()
}

// usesLocked reports whether a cached route goes through device index.
func (m *Manager) usesLocked(index int) bool {
	for _, as := range m.cache {
		for _, a := range as {
			for _, h := range a.hops {
				if h.ifindex == index {
					return true
				}
			}
		}
	}
	return false
}

func (m *Manager) subscribeLinks(onErr func(error)) (func(), error) {
	ch := make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(ch, m.done, netlink.LinkSubscribeOptions{
		Namespace: m.ns, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to link changes: %w", err)
	}
	return func() {
		for u := range ch {
			down := u.Header.Type == unix.RTM_DELLINK || u.Attrs().Flags&net.FlagUp == 0 ||
				u.Attrs().OperState == netlink.OperDown || u.Attrs().OperState == netlink.OperLowerLayerDown
			m.linkEvent(u.Attrs().Index, down)
		}
	}, nil
}

func (m *Manager) subscribeAddrs(onErr func(error)) (func(), error) {
	ch := make(chan netlink.AddrUpdate, 64)
	if err := netlink.AddrSubscribeWithOptions(ch, m.done, netlink.AddrSubscribeOptions{
		Namespace: m.ns, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to address changes: %w", err)
	}
	return func() {
		for u := range ch {
			m.linkEvent(u.LinkIndex, !u.NewAddr)
		}
	}, nil
}

// linkSet returns the links, read again only when they changed.
func (m *Manager) linkSet() (*linkSet, error) {
	m.cmu.Lock()
	ls, dirty := m.ls, m.linksDirty
	m.cmu.Unlock()
	if !dirty && ls != nil {
		return ls, nil
	}
	m.hmu.Lock()
	defer m.hmu.Unlock()
	return m.linkSetLocked()
}

// linkSetLocked is linkSet for a caller holding hmu.
func (m *Manager) linkSetLocked() (*linkSet, error) {
	m.cmu.Lock()
	ls, dirty := m.ls, m.linksDirty
	m.linksDirty = false // an event from now on sets it again
	m.cmu.Unlock()
	if !dirty && ls != nil {
		return ls, nil
	}
	ls, err := m.links()
	m.cmu.Lock()
	defer m.cmu.Unlock()
	if err != nil {
		m.linksDirty = true
		return nil, err
	}
	m.ls = ls
	return ls, nil
}

func (m *Manager) watch1(table int) {
	m.cmu.Lock()
	m.tables[table] = true
	m.cmu.Unlock()
}
