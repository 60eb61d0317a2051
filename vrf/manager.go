package vrf

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// resubscribeDelay is how long a lost subscription waits before it is
// renewed, so a failing socket does not spin.
const resubscribeDelay = time.Second

// Manager reads and writes the host's routes, VRFs and rules through one
// long-lived netlink handle, and watches them through subscriptions.
type Manager struct {
	// hmu serialises the handle's requests: a netlink.Handle matches
	// replies to requests on one socket and is not safe for concurrent
	// dumps. Snapshot and Apply hold it.
	hmu      sync.Mutex
	h        *netlink.Handle
	ns       *netns.NsHandle // nil: the current namespace
	protocol int
	log      *zap.Logger
	notify   func()
	// lookups counts key lookups (each dumps a whole table): an add
	// looks its key up only when the kernel says it is taken.
	lookups atomic.Int64

	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu sync.Mutex
	// tables are the tables where ovnbgp has or wants routes: a route
	// change there, whatever its protocol, pokes notify.
	tables map[int]bool
}

// Open opens the kernel target in the current network namespace. protocol
// is the route protocol that marks ovnbgp's routes and rules
// (kernel.routeProtocol); notify must not block.
//
// The handle speaks NETLINK_ROUTE only: asking for every family (xfrm,
// netfilter) fails on kernels without those modules loaded.
func Open(protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle: %w", err)
	}
	return start(h, nil, protocol, log, notify)
}

// OpenAt is Open inside the network namespace ns (tests). ns must stay open
// until Close.
func OpenAt(ns netns.NsHandle, protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle in netns %s: %w", ns, err)
	}
	return start(h, &ns, protocol, log, notify)
}

func start(h *netlink.Handle, ns *netns.NsHandle, protocol int, log *zap.Logger, notify func()) (*Manager, error) {
	if protocol <= 0 || protocol > 255 {
		h.Close()
		return nil, fmt.Errorf("route protocol %d: must be 1..255 (kernel.routeProtocol)", protocol)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if notify == nil {
		notify = func() {}
	}
	m := &Manager{h: h, ns: ns, protocol: protocol, log: log.Named("vrf"), notify: notify,
		done: make(chan struct{}), tables: map[int]bool{}}
	// Subscribe before returning, so no change after Open goes unseen.
	subs := []subscription{
		{"route", m.subscribeRoutes}, {"link", m.subscribeLinks}, {"address", m.subscribeAddrs},
	}
	consumers := make([]func(), len(subs))
	for i, s := range subs {
		consume, err := s.subscribe(m.onErr(s.what))
		if err != nil {
			close(m.done) // ends the subscriptions made so far
			for _, c := range consumers[:i] {
				c() // drains until the channel closes
			}
			h.Close()
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
		m.wg.Wait()
		m.hmu.Lock()
		m.h.Close()
		m.hmu.Unlock()
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
		m.notify()
	}
}

// The subscribe functions subscribe and return the consumer of the events,
// which returns when the channel closes.

func (m *Manager) subscribeRoutes(onErr func(error)) (func(), error) {
	ch := make(chan netlink.RouteUpdate, 256)
	if err := netlink.RouteSubscribeWithOptions(ch, m.done, netlink.RouteSubscribeOptions{
		Namespace: m.ns, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to route changes: %w", err)
	}
	return func() {
		for u := range ch {
			if int(u.Protocol) == m.protocol || m.watched(u.Table) {
				m.notify()
			}
		}
	}, nil
}

func (m *Manager) subscribeLinks(onErr func(error)) (func(), error) {
	ch := make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(ch, m.done, netlink.LinkSubscribeOptions{
		Namespace: m.ns, ErrorCallback: onErr}); err != nil {
		return nil, fmt.Errorf("subscribe to link changes: %w", err)
	}
	return func() {
		for range ch {
			m.notify()
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
		for range ch {
			m.notify()
		}
	}, nil
}

func (m *Manager) watched(table int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tables[table]
}

func (m *Manager) watch1(table int) {
	m.mu.Lock()
	m.tables[table] = true
	m.mu.Unlock()
}

// setWatched replaces the watched tables with those holding our routes now.
func (m *Manager) setWatched(tables map[int]bool) {
	m.mu.Lock()
	m.tables = tables
	m.mu.Unlock()
}
