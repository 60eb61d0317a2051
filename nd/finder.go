package nd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// How says how a peer's address was learned.
type How string

// The ways a peer is learned.
const (
	FromRA             How = "router advertisement"
	FromRS             How = "router solicitation"
	FromNeighbourTable How = "neighbour table"
)

// LinkStatus is what a Finder knows about one link.
type LinkStatus struct {
	Link string `json:"link"`
	// Peer is the learned link-local address of the peer, zoned
	// (fe80::1%eth1); invalid while none is known.
	Peer netip.Addr `json:"peer,omitzero"`
	// How and Since say how and when Peer was learned; LastHeard is the
	// last RA or RS from it.
	How       How       `json:"how,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	LastHeard time.Time `json:"lastHeard,omitzero"`
	// Local is our own link-local address on the link (zoned).
	Local netip.Addr `json:"local,omitzero"`
	// Waiting says why no peer is known yet ("" once one is).
	Waiting string `json:"waiting,omitempty"`
	// Problem is a standing problem with what was heard (two routers on a
	// link meant for one peer); it ends once no other sender was heard
	// for three advertisement intervals.
	Problem string `json:"problem,omitempty"`
	// LastError is the last error of the link (opening the socket,
	// sending, reading), with when it happened.
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	// Solicitations and Advertisements count what was sent (in all).
	Solicitations  int `json:"solicitations"`
	Advertisements int `json:"advertisements"`
}

// Options configure a Finder. The zero value works.
type Options struct {
	// Notify is called, from the Finder's goroutines, when a link's
	// learned address changes (peer is zoned). It must not block.
	Notify func(link string, peer netip.Addr)
	// Namespace is the network namespace to work in (nil: the current
	// one).
	Namespace *netns.NsHandle
	// AdvertiseInterval is the time between our router advertisements
	// (default 10 s, FRR's own interval for interface peers).
	AdvertiseInterval time.Duration
	// SolicitInterval and Solicitations: while no peer is known, up to
	// Solicitations RS are sent, SolicitInterval apart (default 4 s and 3,
	// RFC 4861's).
	SolicitInterval time.Duration
	Solicitations   int
	// Log gets a line per learned address and per error.
	Log logr.Logger
}

// Finder learns the peer of each unnumbered link and makes the node known
// to it (see the package comment). Its methods are safe for concurrent use.
type Finder struct {
	opts Options
	h    *netlink.Handle

	mu     sync.Mutex
	links  map[string]*link
	closed bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// New starts a Finder with no links (SetLinks gives them). The error is
// about netlink; a link's own problems are in its Status.
func New(opts Options) (*Finder, error) {
	if opts.AdvertiseInterval <= 0 {
		opts.AdvertiseInterval = 10 * time.Second
	}
	if opts.SolicitInterval <= 0 {
		opts.SolicitInterval = 4 * time.Second
	}
	if opts.Solicitations <= 0 {
		opts.Solicitations = 3
	}
	h, err := newHandle(opts.Namespace)
	if err != nil {
		return nil, fmt.Errorf("neighbour discovery: %w", err)
	}
	f := &Finder{opts: opts, h: h, links: map[string]*link{}, done: make(chan struct{})}
	updates := make(chan netlink.LinkUpdate, 64)
	so := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) {
		select {
		case <-f.done: // Close ended the subscription
		default:
			f.opts.Log.Error(err, "neighbour discovery: link events")
		}
	}}
	if opts.Namespace != nil {
		ns := *opts.Namespace
		so.Namespace = &ns
	}
	subDone := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(updates, subDone, so); err != nil {
		// Without events links are still checked every second while
		// not ready and at every advertisement.
		f.opts.Log.Error(err, "neighbour discovery: cannot subscribe to link events: link up is noticed late")
		close(subDone)
	} else {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.linkEvents(updates, subDone)
		}()
	}
	return f, nil
}

// linkEvents pokes a link's goroutine on every event of its device.
func (f *Finder) linkEvents(updates chan netlink.LinkUpdate, subDone chan struct{}) {
	defer func() {
		close(subDone)
		for range updates { // netlink closes it once subDone is closed
		}
	}()
	for {
		select {
		case <-f.done:
			return
		case u, ok := <-updates:
			if !ok {
				return
			}
			f.mu.Lock()
			l := f.links[u.Attrs().Name]
			f.mu.Unlock()
			if l != nil {
				poke(l.event)
			}
		}
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// SetLinks sets the links to work on; it may be called again (reload):
// new links start, removed ones stop (their peer is forgotten, and Notify
// is not called for them), the others keep what they learned.
func (f *Finder) SetLinks(links []string) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	var stop []*link
	for name, l := range f.links {
		if !slices.Contains(links, name) {
			stop = append(stop, l)
			delete(f.links, name)
		}
	}
	for _, name := range links {
		if name == "" || f.links[name] != nil {
			continue
		}
		l := &link{f: f, name: name, event: make(chan struct{}, 1), solicit: make(chan struct{}, 1),
			stop: make(chan struct{}), stopped: make(chan struct{}), st: LinkStatus{Link: name, Waiting: "starting"}}
		f.links[name] = l
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer close(l.stopped)
			l.run()
		}()
	}
	f.mu.Unlock()
	for _, l := range stop {
		close(l.stop)
		<-l.stopped
	}
}

// Solicit sends a Router Solicitation on link now (when it is ready).
func (f *Finder) Solicit(link string) {
	f.mu.Lock()
	l := f.links[link]
	f.mu.Unlock()
	if l != nil {
		poke(l.solicit)
	}
}

// Peer is the learned address of link's peer (zoned), invalid when none.
func (f *Finder) Peer(link string) netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.links[link]; l != nil {
		return l.st.Peer
	}
	return netip.Addr{}
}

// Status is every link's status, sorted by link.
func (f *Finder) Status() []LinkStatus {
	f.mu.Lock()
	out := make([]LinkStatus, 0, len(f.links))
	for _, l := range f.links {
		out = append(out, l.st)
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b LinkStatus) int {
		switch {
		case a.Link < b.Link:
			return -1
		case a.Link > b.Link:
			return 1
		}
		return 0
	})
	return out
}

// Close stops every link and waits for every goroutine.
func (f *Finder) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	ls := f.links
	f.links = map[string]*link{}
	f.mu.Unlock()
	for _, l := range ls {
		close(l.stop)
	}
	close(f.done)
	f.wg.Wait()
	f.h.Close()
}

// link is the work on one link, done by its own goroutine (run).
type link struct {
	f    *Finder
	name string
	// event: the device changed; solicit: send an RS now.
	event, solicit chan struct{}
	stop, stopped  chan struct{}

	st LinkStatus // guarded by f.mu

	// Owned by run:
	sock       *sock
	readerQuit chan struct{} // closed to end the reader
	readerEnd  chan struct{} // closed by the reader when it ends
	mac        net.HardwareAddr
	up         bool
	readySince time.Time
	lastRS     time.Time
	lastRA     time.Time
	tableRead  bool
	rsOpen     int                      // solicitations sent since the socket opened
	heard      map[netip.Addr]time.Time // zone-less sender -> last heard
}

// received is what the reader hands to run.
type received struct {
	p   packet
	err error
}

func (l *link) run() {
	pkts := make(chan received, 16)
	defer l.closeSock()
	l.heard = map[netip.Addr]time.Time{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.event:
			l.check(pkts)
		case <-l.solicit:
			if l.sock != nil {
				l.sendRS()
			}
		case <-timer.C:
			l.check(pkts)
			l.tick()
		case r := <-pkts:
			if r.err != nil {
				l.setError(r.err)
				l.closeSock() // reopened by the next check
				continue
			}
			l.handle(r.p)
		}
		timer.Reset(l.next())
	}
}

// next is the time until the next periodic step.
func (l *link) next() time.Duration {
	if l.sock == nil {
		return time.Second
	}
	d := time.Until(l.lastRA.Add(l.f.opts.AdvertiseInterval))
	l.f.mu.Lock()
	learning := !l.st.Peer.IsValid() && l.rsOpen < l.f.opts.Solicitations
	l.f.mu.Unlock()
	if learning {
		d = min(d, time.Until(l.lastRS.Add(l.f.opts.SolicitInterval)))
	}
	return max(d, 10*time.Millisecond)
}

// tick sends what is due: an RA every AdvertiseInterval, and RS while no
// peer is known.
func (l *link) tick() {
	if l.sock == nil {
		return
	}
	now := time.Now()
	if !now.Before(l.lastRA.Add(l.f.opts.AdvertiseInterval)) {
		l.sendRA()
	}
	l.f.mu.Lock()
	learning := !l.st.Peer.IsValid() && l.rsOpen < l.f.opts.Solicitations
	l.f.mu.Unlock()
	if learning && !now.Before(l.lastRS.Add(l.f.opts.SolicitInterval)) {
		l.sendRS()
	}
}

// check reads the device and opens, reopens or closes the socket to
// match: the link exists, has IPv6 on, is up and has a usable link-local.
func (l *link) check(pkts chan received) {
	ns := l.f.opts.Namespace
	fa, err := readLink(l.f.h, l.name)
	waiting := ""
	switch {
	case err != nil && fa.Index == 0:
		waiting = fmt.Sprintf("no device %s (%v)", l.name, err)
	case err != nil:
		waiting = err.Error()
	default:
		if n, serr := sysctl(ns, l.name, "disable_ipv6"); serr == nil && n != 0 {
			waiting = fmt.Sprintf("IPv6 disabled on %s (fix: sysctl -w net.ipv6.conf.%s.disable_ipv6=0)", l.name, l.name)
		} else if serr != nil && len(fa.LinkLocals) == 0 {
			waiting = fmt.Sprintf("IPv6 disabled on %s (no /proc/sys/net/ipv6/conf/%s: %v)", l.name, l.name, serr)
		} else if !fa.Up {
			waiting = fmt.Sprintf("%s is down", l.name)
		} else if !fa.Usable().IsValid() {
			waiting = fmt.Sprintf("no link-local address on %s", l.name)
			for _, a := range fa.LinkLocals {
				if a.DADFailed {
					waiting = fmt.Sprintf("link-local address %s on %s failed duplicate address detection", a.Addr, l.name)
				} else if a.Tentative {
					waiting = fmt.Sprintf("link-local address %s on %s is tentative (duplicate address detection running)", a.Addr, l.name)
				}
			}
		}
	}
	local := fa.Usable()
	if l.sock != nil && slices.ContainsFunc(fa.LinkLocals, func(a LinkLocal) bool { return a.Usable() && a.Addr.WithZone("") == l.sock.src }) {
		// keep the source while it is usable: another link-local added
		// to the link must not make the peer see a new router
		local = l.sock.src.WithZone(l.name)
	}
	if waiting != "" || (l.sock != nil && (l.sock.ifindex != fa.Index || l.sock.src != local.WithZone(""))) {
		l.closeSock()
	}
	wasUp := l.up
	l.up = waiting == ""
	l.f.mu.Lock()
	if waiting != "" {
		l.st.Waiting = waiting
		l.st.Local = netip.Addr{}
	} else {
		l.st.Local = local
		if l.st.Peer.IsValid() {
			l.st.Waiting = ""
		}
	}
	l.f.mu.Unlock()
	if waiting != "" {
		return
	}
	l.mac = fa.HardwareAddr
	if l.sock == nil {
		s, err := openSock(ns, l.name, fa.Index, local.WithZone(""))
		if err != nil {
			l.setError(err)
			l.f.mu.Lock()
			l.st.Waiting = err.Error()
			l.f.mu.Unlock()
			l.up = false
			return
		}
		l.sock = s
		l.readerQuit, l.readerEnd = make(chan struct{}), make(chan struct{})
		go l.read(s, pkts, l.readerQuit, l.readerEnd)
		l.readySince = time.Now()
		l.rsOpen = 0
		l.f.mu.Lock()
		if !l.st.Peer.IsValid() {
			l.st.Waiting = fmt.Sprintf("no router advertisement seen on %s since %s", l.name, l.readySince.Format(time.TimeOnly))
		}
		l.f.mu.Unlock()
		if !l.tableRead {
			l.tableRead = true
			l.fromTable(fa)
		}
		wasUp = false
	}
	if !wasUp {
		// start, or link up: ask at once, and tell at once
		l.sendRS()
		l.sendRA()
	}
}

// fromTable learns the peer from the kernel's neighbour table: a
// link-local router entry (start only; RAs and RSs take over).
func (l *link) fromTable(fa LinkFacts) {
	var routers []netip.Addr
	for _, n := range fa.Neighbours {
		if n.Router {
			routers = append(routers, n.Addr)
		}
	}
	if len(routers) == 0 {
		return
	}
	if len(routers) > 1 {
		l.f.mu.Lock()
		l.st.Problem = fmt.Sprintf("%d routers in the neighbour table of %s (%v): unnumbered peering expects one neighbour on a point-to-point link", len(routers), l.name, routers)
		l.f.mu.Unlock()
	}
	l.learn(routers[0].WithZone(""), FromNeighbourTable, false)
}

// read hands every accepted packet to run until the socket is closed.
func (l *link) read(s *sock, pkts chan received, quit, end chan struct{}) {
	defer close(end)
	b := make([]byte, 1500)
	for {
		n, cm, src, err := s.p.ReadFrom(b)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case pkts <- received{err: fmt.Errorf("read on %s: %w", l.name, err)}:
			case <-quit:
			}
			return
		}
		p, err := accept(b[:n], cm, src, s.ifindex)
		if err != nil {
			continue
		}
		select {
		case pkts <- received{p: p}:
		case <-quit:
			return
		}
	}
}

func (l *link) closeSock() {
	if l.sock == nil {
		return
	}
	close(l.readerQuit)
	l.sock.close()
	<-l.readerEnd
	l.sock = nil
	l.up = false
}

// handle takes an accepted RS or RA: unless it is our own, its sender is
// the peer; an RS is answered with an RA at once.
func (l *link) handle(p packet) {
	own, err := ownAddrs(l.f.h)
	if err != nil {
		l.setError(err)
		return
	}
	if own[p.from] {
		return
	}
	how := FromRA
	if p.rs {
		how = FromRS
	}
	l.learn(p.from, how, true)
	if p.rs {
		l.sendRA()
	}
}

// learn records addr (zone-less) as the peer; heard: it sent a packet now.
func (l *link) learn(addr netip.Addr, how How, heard bool) {
	now := time.Now()
	zoned := addr.WithZone(l.name)
	l.f.mu.Lock()
	prev := l.st.Peer
	changed := prev != zoned
	if heard {
		// Back to a sender heard before, while the current peer was
		// heard within three RA intervals: two routers take turns on
		// the link. (A first new sender is a change: a replaced peer.)
		_, before := l.heard[addr]
		if t, ok := l.heard[prev.WithZone("")]; ok && before && changed && now.Sub(t) < 3*l.f.opts.AdvertiseInterval {
			l.st.Problem = fmt.Sprintf("two routers on %s: %s, then %s within %s: unnumbered peering expects one neighbour on a point-to-point link (the peer is the last one heard)",
				l.name, prev.WithZone(""), addr, now.Sub(t).Round(time.Millisecond))
		}
		l.heard[addr] = now
		l.st.LastHeard = now
		// The problem ends once no other sender was heard for three
		// RA intervals.
		others := false
		for a, t := range l.heard {
			others = others || (a != addr && now.Sub(t) < 3*l.f.opts.AdvertiseInterval)
		}
		if !others {
			l.st.Problem = ""
		}
	}
	if changed {
		l.st.Peer, l.st.How, l.st.Since, l.st.Waiting = zoned, how, now, ""
	}
	l.f.mu.Unlock()
	if changed {
		l.f.opts.Log.Info("neighbour discovery: learned the peer of an unnumbered link", "link", l.name, "peer", zoned.String(), "how", string(how), "previous", prev.String())
		if l.f.opts.Notify != nil {
			l.f.opts.Notify(l.name, zoned)
		}
	}
}

func (l *link) sendRS() {
	l.lastRS = time.Now()
	if err := l.sock.send(routerSolicitation(l.mac), allRouters); err != nil {
		l.setError(fmt.Errorf("send a router solicitation on %s: %w", l.name, err))
		return
	}
	l.rsOpen++
	l.f.mu.Lock()
	l.st.Solicitations++
	if !l.st.Peer.IsValid() {
		l.st.Waiting = fmt.Sprintf("no router advertisement seen on %s since %s (sent %d solicitations)", l.name, l.readySince.Format(time.TimeOnly), l.rsOpen)
	}
	l.f.mu.Unlock()
}

func (l *link) sendRA() {
	l.lastRA = time.Now()
	if err := l.sock.send(routerAdvertisement(l.mac), allNodes); err != nil {
		l.setError(fmt.Errorf("send a router advertisement on %s: %w", l.name, err))
		return
	}
	l.f.mu.Lock()
	l.st.Advertisements++
	l.f.mu.Unlock()
}

func (l *link) setError(err error) {
	l.f.mu.Lock()
	if err.Error() != l.st.LastError { // a retried failure is logged once
		l.f.opts.Log.Error(err, "neighbour discovery", "link", l.name)
	}
	l.st.LastError, l.st.LastErrorTime = err.Error(), time.Now()
	l.f.mu.Unlock()
}
