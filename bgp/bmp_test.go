package bgp

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// BMP message types (RFC 7854 4.1).
const (
	bmpRouteMonitoring = 0
	bmpStatsReport     = 1
	bmpPeerDown        = 2
	bmpPeerUp          = 3
	bmpInitiation      = 4
	bmpTermination     = 5
)

// bmpMsg is one BMP message as the test collector decoded it, without
// gobgp's BMP code: the common header, the per-peer header's address, and
// what the test checks of the body.
type bmpMsg struct {
	conn    int // which connection (1, 2, ...) it came on
	typ     uint8
	peer    netip.Addr        // per-peer messages
	tlvs    map[uint16]string // initiation and termination
	nlri    []netip.Prefix    // route monitoring: announced IPv4 prefixes
	removed []netip.Prefix    // route monitoring: withdrawn IPv4 prefixes
	counts  int               // statistics report: number of counters
}

func (m bmpMsg) String() string {
	return fmt.Sprintf("conn %d type %d peer %v tlvs %v nlri %v withdrawn %v stats %d", m.conn, m.typ, m.peer, m.tlvs, m.nlri, m.removed, m.counts)
}

// collector is a BMP station on loopback that records every message of
// every connection, and whether the last connection was closed.
type collector struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []bmpMsg
	errs []error
	n    int
	open int
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.n++
			c.open++
			id := c.n
			c.mu.Unlock()
			go c.read(id, conn)
		}
	}()
	return c
}

func (c *collector) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

func (c *collector) read(id int, conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		m, err := readBMP(r)
		c.mu.Lock()
		if err != nil {
			if err != io.EOF {
				c.errs = append(c.errs, fmt.Errorf("connection %d: %w", id, err))
			}
			c.open--
			c.mu.Unlock()
			return
		}
		m.conn = id
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
	}
}

// readBMP decodes one message (RFC 7854 4).
func readBMP(r io.Reader) (bmpMsg, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return bmpMsg{}, err
	}
	if hdr[0] != 3 {
		return bmpMsg{}, fmt.Errorf("BMP version %d, want 3", hdr[0])
	}
	n := binary.BigEndian.Uint32(hdr[1:5])
	if n < 6 || n > 1<<20 {
		return bmpMsg{}, fmt.Errorf("BMP length %d", n)
	}
	body := make([]byte, n-6)
	if _, err := io.ReadFull(r, body); err != nil {
		return bmpMsg{}, err
	}
	m := bmpMsg{typ: hdr[5]}
	switch m.typ {
	case bmpInitiation, bmpTermination:
		m.tlvs = map[uint16]string{}
		for len(body) >= 4 {
			t, l := binary.BigEndian.Uint16(body), int(binary.BigEndian.Uint16(body[2:]))
			if 4+l > len(body) {
				return m, fmt.Errorf("TLV %d of %d bytes overruns the message", t, l)
			}
			m.tlvs[t] = string(body[4 : 4+l])
			body = body[4+l:]
		}
		return m, nil
	case bmpRouteMonitoring, bmpStatsReport, bmpPeerDown, bmpPeerUp:
	default:
		return m, fmt.Errorf("unknown BMP type %d", m.typ)
	}
	// The per-peer header (4.2): type, flags, distinguisher, address,
	// AS, BGP ID, timestamp.
	if len(body) < 42 {
		return m, fmt.Errorf("type %d: %d bytes, no per-peer header", m.typ, len(body))
	}
	flags := body[1]
	if flags&0x80 != 0 {
		m.peer = netip.AddrFrom16([16]byte(body[10:26]))
	} else {
		m.peer = netip.AddrFrom4([4]byte(body[22:26]))
	}
	body = body[42:]
	switch m.typ {
	case bmpRouteMonitoring:
		return m, decodeUpdate(body, &m)
	case bmpStatsReport:
		if len(body) < 4 {
			return m, fmt.Errorf("statistics report without a count")
		}
		m.counts = int(binary.BigEndian.Uint32(body))
	}
	return m, nil
}

// decodeUpdate reads the IPv4 withdrawn routes and NLRI of a BGP UPDATE.
func decodeUpdate(b []byte, m *bmpMsg) error {
	if len(b) < 23 || b[18] != 2 {
		return fmt.Errorf("route monitoring does not carry an UPDATE: % x", b[:min(len(b), 19)])
	}
	b = b[19:]
	wl := int(binary.BigEndian.Uint16(b))
	if 2+wl+2 > len(b) {
		return fmt.Errorf("UPDATE withdrawn length %d overruns", wl)
	}
	var err error
	if m.removed, err = prefixes4(b[2 : 2+wl]); err != nil {
		return err
	}
	b = b[2+wl:]
	al := int(binary.BigEndian.Uint16(b))
	if 2+al > len(b) {
		return fmt.Errorf("UPDATE attribute length %d overruns", al)
	}
	m.nlri, err = prefixes4(b[2+al:])
	return err
}

func prefixes4(b []byte) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for len(b) > 0 {
		bits := int(b[0])
		n := (bits + 7) / 8
		if bits > 32 || 1+n > len(b) {
			return nil, fmt.Errorf("bad IPv4 prefix length %d", bits)
		}
		var a [4]byte
		copy(a[:], b[1:1+n])
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), bits))
		b = b[1+n:]
	}
	return out, nil
}

// wait polls until some message satisfies match, and returns it.
func (c *collector) wait(t *testing.T, what string, match func(bmpMsg) bool) bmpMsg {
	t.Helper()
	var found bmpMsg
	eventually(t, 15*time.Second, what, func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range c.msgs {
			if match(m) {
				found = m
				return true, ""
			}
		}
		var seen []string
		for _, m := range c.msgs {
			seen = append(seen, m.String())
		}
		return false, fmt.Sprintf("%d connections, %d open, errors %v, messages:\n%s", c.n, c.open, c.errs, strings.Join(seen, "\n"))
	})
	return found
}

func (c *collector) state() (conns, open int, errs []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.open, c.errs
}

// TestBMP: a BMP station added while a session is up gets the Initiation
// with the node's name, a Peer Up for the session and the routes the peer
// sent (Adj-RIB-In), then every change, statistics, a Peer Down when the
// peer stops, and a Termination when the station is removed. Neither adding
// nor changing nor removing a station resets the BGP session.
func TestBMP(t *testing.T) {
	parallel(t)
	l := newLab(t, 94)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	peer := l.peerOf("tor", 3, port, provASN)
	node := l.node(false, peer)
	ctx := context.Background()
	since := waitEstablished(t, node, "tor").Since
	set(t, prov, adv("node", "10.94.1.0/24", model.PathAttrs{}))
	waitLearned(t, node, "tor", pfx("10.94.1.0/24"))

	col := newCollector(t)
	station := config.BMPServer{Name: "col", Address: netip.MustParseAddr("127.0.0.1"), Port: col.port(),
		RouteMonitoring: config.BMPAdjRIBIn, StatisticsInterval: time.Second}
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "worker-7", "ovnbgp test"); err != nil {
		t.Fatal(err)
	}
	provAddr := l.addr(3)
	init := col.wait(t, "Initiation", func(m bmpMsg) bool { return m.typ == bmpInitiation })
	if init.tlvs[2] != "worker-7" || init.tlvs[1] != "ovnbgp test" {
		t.Errorf("Initiation TLVs %v, want sysName (2) worker-7 and sysDescr (1) ovnbgp test", init.tlvs)
	}
	col.wait(t, "Peer Up for the Established session", func(m bmpMsg) bool { return m.typ == bmpPeerUp && m.peer == provAddr })
	col.wait(t, "the route the peer sent before the station came", func(m bmpMsg) bool {
		return m.typ == bmpRouteMonitoring && m.peer == provAddr && len(m.nlri) == 1 && m.nlri[0] == pfx("10.94.1.0/24")
	})
	eventually(t, 15*time.Second, "BMP status up", func() (bool, string) {
		st, err := node.BMP(ctx)
		if err != nil || len(st) != 1 || !st[0].Up || st[0].Name != "col" || st[0].Station.Port() != uint16(col.port()) {
			return false, fmt.Sprintf("%+v %v", st, err)
		}
		return true, ""
	})

	// Changes stream as they come.
	set(t, prov, adv("node", "10.94.2.0/24", model.PathAttrs{}))
	col.wait(t, "a new route", func(m bmpMsg) bool {
		return m.typ == bmpRouteMonitoring && m.peer == provAddr && len(m.nlri) == 1 && m.nlri[0] == pfx("10.94.2.0/24")
	})
	set(t, prov)
	col.wait(t, "a withdrawal", func(m bmpMsg) bool {
		return m.typ == bmpRouteMonitoring && m.peer == provAddr && len(m.removed) > 0
	})
	col.wait(t, "a statistics report", func(m bmpMsg) bool { return m.typ == bmpStatsReport && m.peer == provAddr && m.counts > 0 })

	// The same station again changes nothing; another policy reconnects it.
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "worker-7", "ovnbgp test"); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := col.state(); n != 1 {
		t.Errorf("the same BMP config again: %d connections, want 1", n)
	}
	station.RouteMonitoring = config.BMPLocRIB
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "worker-7", "ovnbgp test"); err != nil {
		t.Fatal(err)
	}
	col.wait(t, "Termination of the first connection", func(m bmpMsg) bool { return m.conn == 1 && m.typ == bmpTermination })
	col.wait(t, "Initiation on a second connection", func(m bmpMsg) bool { return m.conn == 2 && m.typ == bmpInitiation })

	// The peer goes: Peer Down. Then the station goes: Termination.
	station.RouteMonitoring = config.BMPAdjRIBIn
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "worker-7", "ovnbgp test"); err != nil {
		t.Fatal(err)
	}
	col.wait(t, "Peer Up on a third connection", func(m bmpMsg) bool { return m.conn == 3 && m.typ == bmpPeerUp && m.peer == provAddr })
	if got := peerState(t, node, "tor"); got.State != model.StateEstablished || !got.Since.Equal(since) {
		t.Errorf("BMP changes touched the session: %s since %v, was Established since %v", got.State, got.Since, since)
	}
	if err := prov.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	col.wait(t, "Peer Down", func(m bmpMsg) bool { return m.conn == 3 && m.typ == bmpPeerDown && m.peer == provAddr })
	if err := node.SetBMP(ctx, nil, "worker-7", "ovnbgp test"); err != nil {
		t.Fatal(err)
	}
	col.wait(t, "Termination", func(m bmpMsg) bool { return m.conn == 3 && m.typ == bmpTermination })
	eventually(t, 15*time.Second, "every BMP connection closed", func() (bool, string) {
		n, open, errs := col.state()
		return open == 0 && len(errs) == 0, fmt.Sprintf("%d connections, %d open, errors %v", n, open, errs)
	})
	// One connection per settings the station had: the unchanged SetBMP
	// reconnected nothing.
	if n, _, _ := col.state(); n != 3 {
		t.Errorf("the station saw %d connections, want 3 (adjRibIn, locRib, adjRibIn)", n)
	}
	if st, err := node.BMP(ctx); err != nil || len(st) != 0 {
		t.Errorf("BMP status after removal: %+v %v, want none", st, err)
	}
}

// TestBMPStationDown: a station that does not answer is reported down and
// costs nothing else; once it listens, gobgp connects to it; Stop ends the
// stream with a Termination.
func TestBMPStationDown(t *testing.T) {
	parallel(t)
	l := newLab(t, 95)
	port := freePort(t)
	l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	ctx := context.Background()
	waitEstablished(t, node, "tor")
	dead := freePort(t)
	station := config.BMPServer{Name: "later", Address: netip.MustParseAddr("127.0.0.1"), Port: dead, RouteMonitoring: config.BMPAdjRIBIn}
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "n", "d"); err != nil {
		t.Fatal(err)
	}
	st, err := node.BMP(ctx)
	if err != nil || len(st) != 1 || st[0].Up {
		t.Fatalf("BMP status with nothing listening: %+v %v, want one station down", st, err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", dead))
	if err != nil {
		t.Fatalf("port %d, free a moment ago, is taken: %v", dead, err)
	}
	col := &collector{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		col.mu.Lock()
		col.n, col.open = 1, 1
		col.mu.Unlock()
		col.read(1, conn)
	}()
	col.wait(t, "Initiation once the station listens", func(m bmpMsg) bool { return m.typ == bmpInitiation })
	if err := node.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	col.wait(t, "Termination when the speaker stops", func(m bmpMsg) bool { return m.typ == bmpTermination })
}
