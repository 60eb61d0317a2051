package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The injector's session: the ToR's AS, router ID and timers, as the
// contenders expect the ToR (keepalive 3 s, hold 9 s).
const (
	injectorASN       = 65001
	injectorHold      = 9 // seconds
	injectorKeepalive = 3 * time.Second
	// injectorPoll is how often the kernel table is counted: the
	// receiver's time is what is measured, so more often than
	// importInterval (a count of 100k routes is a few ms of the
	// kernel's time, on the same CPUs).
	injectorPoll = 20 * time.Millisecond
	// injectorPerUpdate /24s fit one 4096-byte UPDATE with its ORIGIN,
	// AS_PATH and NEXT_HOP (43 bytes of header and attributes + 4 per
	// /24: 1013 would).
	injectorPerUpdate = 1000
)

// injector is the fast sender of BenchmarkImportInject: a raw BGP speaker
// listening on the ToR's address in the ToR namespace, with the N
// prefixes' UPDATEs and End-of-RIB built before any session starts. It
// writes them in one go as soon as the session is Established, as fast as
// TCP takes them, so that the time to the last route in the kernel is the
// receiver's own: the FRR ToR of BenchmarkImportKernel waits ~1.2 s
// before its first UPDATE and sends at its own pace.
//
// It accepts every connection the node's contender opens and answers its
// OPEN only while armed (shut(false)); a session it is told to shut is
// closed. It never dials: the contenders all dial the ToR.
type injector struct {
	ln net.Listener
	// wire is every UPDATE and the End-of-RIB, in order; msgs counts them.
	wire []byte
	msgs int

	mu sync.Mutex
	// armed is closed while the injector may bring a session up; shut
	// replaces it.
	armed   chan struct{}
	isArmed bool
	// conns are the open connections; cur is the one whose session came
	// up last, and up says it still is; est counts the sessions that came
	// up; estAt, firstAt and sentAt are cur's Established, the start of
	// its first UPDATE's write and the end of the last (End-of-RIB)
	// write.
	conns   []net.Conn
	cur     net.Conn
	est     int
	estAt   time.Time
	firstAt time.Time
	sentAt  time.Time
	up      bool

	wg   sync.WaitGroup
	done chan struct{}
}

// injectorWire builds the UPDATEs that announce ps from the ToR (AS_PATH
// 65001, NEXT_HOP the ToR), injectorPerUpdate a message, and End-of-RIB.
func injectorWire(ps []netip.Prefix) ([]byte, int, error) {
	nh, err := bgppkt.NewPathAttributeNextHop(lab.TorIPv4)
	if err != nil {
		return nil, 0, err
	}
	attrs := []bgppkt.PathAttributeInterface{
		bgppkt.NewPathAttributeOrigin(bgppkt.BGP_ORIGIN_ATTR_TYPE_IGP),
		bgppkt.NewPathAttributeAsPath([]bgppkt.AsPathParamInterface{
			bgppkt.NewAs4PathParam(bgppkt.BGP_ASPATH_ATTR_TYPE_SEQ, []uint32{injectorASN}),
		}),
		nh,
	}
	var wire []byte
	msgs := 0
	for i := 0; i < len(ps); i += injectorPerUpdate {
		part := ps[i:min(i+injectorPerUpdate, len(ps))]
		nlri := make([]bgppkt.PathNLRI, len(part))
		for j, p := range part {
			n, err := bgppkt.NewIPAddrPrefix(p)
			if err != nil {
				return nil, 0, fmt.Errorf("%v: %w", p, err)
			}
			nlri[j] = bgppkt.PathNLRI{NLRI: n}
		}
		b, err := bgppkt.NewBGPUpdateMessage(nil, attrs, nlri).Serialize()
		if err != nil {
			return nil, 0, err
		}
		if len(b) > bgppkt.BGP_MAX_MESSAGE_LENGTH {
			return nil, 0, fmt.Errorf("an UPDATE of %d /24s is %d bytes, more than BGP's %d", len(part), len(b), bgppkt.BGP_MAX_MESSAGE_LENGTH)
		}
		wire = append(wire, b...)
		msgs++
	}
	eor, err := bgppkt.NewEndOfRib(bgppkt.RF_IPv4_UC).Serialize()
	if err != nil {
		return nil, 0, err
	}
	return append(wire, eor...), msgs + 1, nil
}

// startInjector listens on the ToR's address in l's ToR namespace, shut
// (unarmed), with ps's UPDATEs built. It stops at the end of the test.
func startInjector(b testing.TB, l *lab.Lab, ps []netip.Prefix) *injector {
	b.Helper()
	start := time.Now()
	wire, msgs, err := injectorWire(ps)
	if err != nil {
		b.Fatalf("injector: build the UPDATEs: %v", err)
	}
	b.Logf("injector: %d prefixes in %d messages, %d bytes, built in %v", len(ps), msgs, len(wire), pretty(time.Since(start)))
	var ln net.Listener
	err = lab.InNetns(l.Tor, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(lab.TorIPv4.String(), "179"))
		return err
	})
	if err != nil {
		b.Fatalf("injector: listen in %s: %v", l.Tor, err)
	}
	in := &injector{ln: ln, wire: wire, msgs: msgs, armed: make(chan struct{}), done: make(chan struct{})}
	in.wg.Add(1)
	go in.accept()
	b.Cleanup(in.close)
	return in
}

// close stops listening, closes every connection and waits for the
// injector's goroutines.
func (in *injector) close() {
	close(in.done)
	in.ln.Close()
	in.mu.Lock()
	for _, c := range in.conns {
		c.Close()
	}
	in.mu.Unlock()
	in.wg.Wait()
}

func (in *injector) accept() {
	defer in.wg.Done()
	for {
		c, err := in.ln.Accept()
		if err != nil {
			return // closed
		}
		in.mu.Lock()
		// One session at a time: a newer connection replaces those not
		// up (a contender that dialed again).
		keep := in.conns[:0]
		for _, old := range in.conns {
			if old != in.cur {
				old.Close()
				continue
			}
			keep = append(keep, old)
		}
		in.conns = append(keep, c)
		in.mu.Unlock()
		in.wg.Add(1)
		go in.session(c)
	}
}

// session runs one connection: the contender's OPEN, the injector's once
// armed, the KEEPALIVE that makes it Established, then every UPDATE in one
// write and a KEEPALIVE every injectorKeepalive until the connection ends.
func (in *injector) session(c net.Conn) {
	defer in.wg.Done()
	defer c.Close()
	// ended: the session is down (a contender that stopped, a shut, a
	// NOTIFICATION); the job notices it (the routes, the counts).
	ended := func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.cur == c {
			in.up = false
		}
	}
	typ, _, err := readMsg(c)
	if err != nil {
		return
	}
	if typ != bgppkt.BGP_MSG_OPEN {
		return
	}
	in.mu.Lock()
	armed := in.armed
	in.mu.Unlock()
	select {
	case <-armed:
	case <-in.done:
		return
	}
	open, err := bgppkt.NewBGPOpenMessage(injectorASN, injectorHold, lab.TorIPv4, []bgppkt.OptionParameterInterface{
		bgppkt.NewOptionParameterCapability([]bgppkt.ParameterCapabilityInterface{
			bgppkt.NewCapMultiProtocol(bgppkt.RF_IPv4_UC),
			bgppkt.NewCapFourOctetASNumber(injectorASN),
		}),
	})
	if err != nil {
		ended()
		return
	}
	if err := writeMsgs(c, open, bgppkt.NewBGPKeepAliveMessage()); err != nil {
		return
	}
	// Established at the contender's first KEEPALIVE (it may send
	// nothing else before it).
	for {
		typ, _, err := readMsg(c)
		if err != nil {
			return
		}
		if typ == bgppkt.BGP_MSG_KEEPALIVE {
			break
		}
		if typ == bgppkt.BGP_MSG_NOTIFICATION {
			return
		}
	}
	in.mu.Lock()
	in.est++
	in.cur, in.up, in.estAt, in.firstAt = c, true, time.Now(), time.Now()
	in.mu.Unlock()
	if _, err := c.Write(in.wire); err != nil {
		ended()
		return
	}
	in.mu.Lock()
	in.sentAt = time.Now()
	in.mu.Unlock()

	// Read and drop what the contender sends (its own advertisements,
	// keepalives) on a goroutine of this session's; keep the session up.
	readDone := make(chan struct{})
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		for {
			typ, _, err := readMsg(c)
			if err != nil || typ == bgppkt.BGP_MSG_NOTIFICATION {
				close(readDone)
				return
			}
		}
	}()
	tick := time.NewTicker(injectorKeepalive)
	defer tick.Stop()
	for {
		select {
		case <-readDone:
			ended()
			return
		case <-in.done:
			return
		case <-tick.C:
			if err := writeMsgs(c, bgppkt.NewBGPKeepAliveMessage()); err != nil {
				ended()
				return
			}
		}
	}
}

// readMsg reads one BGP message: its type and body.
func readMsg(c net.Conn) (uint8, []byte, error) {
	var h [bgppkt.BGP_HEADER_LENGTH]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[16:18]))
	if n < bgppkt.BGP_HEADER_LENGTH || n > bgppkt.BGP_MAX_MESSAGE_LENGTH {
		return 0, nil, fmt.Errorf("a BGP message of length %d", n)
	}
	body := make([]byte, n-bgppkt.BGP_HEADER_LENGTH)
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, nil, err
	}
	return h[18], body, nil
}

func writeMsgs(c net.Conn, msgs ...*bgppkt.BGPMessage) error {
	var out []byte
	for _, m := range msgs {
		b, err := m.Serialize()
		if err != nil {
			return err
		}
		out = append(out, b...)
	}
	_, err := c.Write(out)
	return err
}

// shut closes the session and stops answering OPENs (down), or lets a
// session come up (the contender's pending connection, or its next).
func (in *injector) shut(b testing.TB, down bool) time.Time {
	b.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case down && in.isArmed:
		in.armed, in.isArmed = make(chan struct{}), false
		for _, c := range in.conns {
			c.Close()
		}
		in.conns, in.cur, in.up = nil, nil, false
	case !down && !in.isArmed:
		close(in.armed)
		in.isArmed = true
	}
	return time.Now()
}

func (in *injector) established(b testing.TB) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.est
}

// waitEstablished returns the last session's Established once it is up.
func (in *injector) waitEstablished(b testing.TB, alive func() error) time.Time {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		in.mu.Lock()
		up, at := in.up, in.estAt
		in.mu.Unlock()
		if up {
			return at
		}
		if err := alive(); err != nil {
			b.Fatal(err)
		}
		if time.Now().After(deadline) {
			b.Fatal("injector: no session came up 2 min after it was armed")
		}
		time.Sleep(time.Millisecond)
	}
}

func (in *injector) pollEvery() time.Duration { return injectorPoll }

// state says whether the last session is up and how many came up.
func (in *injector) state(b testing.TB) (up bool, established int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.up, in.est
}

// sent is when the last session's first UPDATE began to go out and when
// the End-of-RIB had been written.
func (in *injector) sent() (first, last time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.firstAt, in.sentAt
}

// BenchmarkImportInject: the fast injector announces N /24s
// (OVNBGP_BENCH_IMPORT, 10000 and 100000) to each contender in turn; the
// node installs them in its kernel, as in BenchmarkImportKernel but with a
// sender faster than any receiver. Reported: the first UPDATE's write →
// all N in the kernel table (the receiver's own time), the daemons' CPU
// for it, and RSS per path. No idle window (BenchmarkImportKernel has it).
func BenchmarkImportInject(b *testing.B) {
	gate(b)
	for _, n := range importSizes(b) {
		b.Run(strconv.Itoa(n), func(b *testing.B) { importInjectRun(benchRun(b), n) })
	}
}

// importInjectRun is the injector job at size n.
func importInjectRun(b jobRun, n int) {
	l := lab.New(b)
	nb := l.StartNB()
	nb.PopulateOVNK()
	in := startInjector(b, l, importPrefixes(n))
	ob, fr, br := importContenders(b, l, nb, in, n, 0)
	job := fmt.Sprintf("import %d /24 into the kernel, fast injector", n)
	results := []struct {
		name string
		r    importResult
	}{{ovnbgpName, ob}, {frrName, fr}, {birdName, br}}
	for _, x := range results {
		b.record(job+", first UPDATE→all in kernel", "ms", false, x.name, ms(x.r.firstToAll))
		b.record(job+", node daemons' CPU", "ms", false, x.name, ms(x.r.cpu))
		b.record(job+", RSS per learned+imported path", "bytes", false, x.name, x.r.perPath(n))
	}
	b.metric(ms(ob.firstToAll), "ovnbgp-ms")
	b.metric(ms(fr.firstToAll), "frr-ms")
	b.metric(ms(br.firstToAll), "bird-ms")
	b.metric(float64(ob.firstToAll)/float64(br.firstToAll), "ovnbgp/bird")
	b.metric(0, "ns/op")
	b.Logf("import %d with the fast injector, first UPDATE to all in the kernel: ovnbgp %v, FRR %v, BIRD %v: ovnbgp/BIRD = %.2fx (goal <= 1.0x)",
		n, pretty(ob.firstToAll), pretty(fr.firstToAll), pretty(br.firstToAll), float64(ob.firstToAll)/float64(br.firstToAll))
}
