package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestMain fails the package when any goroutine outlives its test: every
// test stops its speakers (lab.speaker), and Stop waits for its tasks.
// Ignored: the buffers of gobgp's eapache InfiniteChannels (each FSM's
// outgoingCh, fsm.go:568, and each watcher's channel, server.go:5125,
// gobgp v4.8.0), which gobgp does not close when a peer or the server
// stops; they are gobgp's, not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/eapache/channels.(*InfiniteChannel).infiniteBuffer"))
}

// tasksRunning are the goroutines the speakers' tasks started that still
// run (read at once, no retry).
func tasksRunning() []string {
	var out []string
	for _, g := range running(func(created string) bool {
		return strings.Contains(created, "created by github.com/ovnbgp/ovnbgp/bgp.(*tasks)")
	}) {
		// A wrapper whose function returned may still be finishing its
		// exit (its deferred Done let Stop return): CI saw one runnable
		// at tasks.go:70, as TestStopLeavesNoGoroutine did.
		if !exitingTask(g) {
			out = append(out, g)
		}
	}
	return out
}

// ownGoroutines are the goroutines the package's own code (not its tests,
// not gobgp) started that still run, by goroutine header line (read at
// once, no retry).
func ownGoroutines() map[string]string {
	out := map[string]string{}
	for _, g := range running(func(created string) bool {
		return strings.Contains(created, "created by github.com/ovnbgp/ovnbgp/bgp.") && !strings.Contains(created, "_test.go:")
	}) {
		out[strings.SplitN(g, "\n", 2)[0]] = g
	}
	return out
}

// exitingTask says whether stack g is a task wrapper's (tasks.goFn,
// tasks.after) after its function returned: the wrapper is the top frame.
func exitingTask(g string) bool {
	lines := strings.Split(g, "\n")
	return len(lines) > 1 && strings.HasPrefix(lines[1], "github.com/ovnbgp/ovnbgp/bgp.(*tasks).") &&
		strings.Contains(lines[1], ".func")
}

// running are the stacks of the goroutines whose "created by" part
// (that line and the next) satisfies match.
func running(match func(created string) bool) []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if i := strings.Index(g, "\ncreated by "); i >= 0 && match(g[i:]) {
			out = append(out, g)
		}
	}
	return out
}

// stopBound is how long a test lets Stop take before it says Stop hangs:
// far above any real Stop (gobgp's StopBgp waits for its sessions' ends),
// far below go test's timeout, so a Stop that never returns fails its test
// with the goroutines that still run instead of hanging the package.
const stopBound = 30 * time.Second

// stopWithin stops s (named name), failing the test as stopped does.
func stopWithin(t testing.TB, name string, s *Speaker) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Stop(context.Background(), false) }()
	return stopped(t, name, done)
}

// stopped is the result of a Stop that sends it on done, or, when none
// comes within stopBound, fails the test naming the goroutines the
// package's code started that still run (the Stop is left blocked).
func stopped(t testing.TB, name string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(stopBound):
	}
	t.Fatalf("Stop of %s did not return within %v; goroutines of package bgp still running:\n%s",
		name, stopBound, ownStacks())
	return nil
}

// ownStacks are the stacks of ownGoroutines, for a failure message.
func ownStacks() string {
	var g []string
	for _, s := range ownGoroutines() {
		g = append(g, s)
	}
	return strings.Join(g, "\n\n")
}

// TestStopWaitsForItsTasks stops a speaker with a session up, BFD on, a
// prefix limit, a session-start repair pending and a hold bound pending:
// when Stop returns, no task runs, and none fires later.
func TestStopWaitsForItsTasks(t *testing.T) {
	l := newLab(t, 173)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	a := l.peerOf("a", 3, port, provASN)
	a.BFD = config.BFD{Enabled: true, MinTx: 300 * time.Millisecond, MinRx: 300 * time.Millisecond, Multiplier: 3}
	a.MaxPrefixes = 20
	node := l.node(false, a)
	waitEstablished(t, node, "a")
	node.HoldSessions(time.Hour)
	// A task that is busy when Stop is called: Stop must wait for it.
	// Released at the latest before the lab's own Stop of node (cleanups
	// run last in, first out), so a failure here does not hang that Stop.
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	node.tasks.goFn(func() { <-release })
	checks := node.repairChecks.Load()

	done := make(chan error, 1)
	go func() { done <- node.Stop(context.Background(), false) }()
	select {
	case err := <-done:
		t.Fatalf("Stop returned (%v) while a task ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	if err := stopped(t, "node", done); err != nil {
		t.Fatal(err)
	}
	// gobgp reports the session's end (StopBgp deletes the peer) on its
	// watch goroutine: the callback, and its poke, come before Stop
	// returns or never.
	pokes := l.pokes["node"].Load()
	node.tasks.mu.Lock()
	pending := len(node.tasks.pending)
	node.tasks.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d timers pending after Stop", pending)
	}
	if err := stopWithin(t, "provider", prov); err != nil {
		t.Fatal(err)
	}
	if g := tasksRunning(); len(g) > 0 {
		t.Errorf("tasks run after both speakers stopped:\n%s", strings.Join(g, "\n\n"))
	}
	// The session-start repair was pending (sessionSettle): it never runs.
	never(t, sessionSettle+500*time.Millisecond, "a session-start repair after Stop", func() (bool, string) {
		return node.repairChecks.Load() != checks, ""
	})
	if n := l.pokes["node"].Load(); n != pokes {
		t.Errorf("the speaker poked the daemon %d times after Stop returned", n-pokes)
	}
}

// gobgpBuffers are the goroutines goleak ignores everywhere (TestMain).
var gobgpBuffers = goleak.IgnoreTopFunction("github.com/eapache/channels.(*InfiniteChannel).infiniteBuffer")

// TestStopLeavesNoGoroutine stops a speaker whose transport parts are all
// busy: the listener holds a silent inbound connection (its awaitOpen
// blocks in a read), the dialer retries a peer that refuses (its loop
// waits for the next try), a BMP station streams, and a BMP status read
// runs. When Stop returns, nothing the speaker started runs: goleak finds
// no goroutine that was not there before the speaker.
func TestStopLeavesNoGoroutine(t *testing.T) {
	l := newLab(t, 174)
	col := newCollector(t)
	before := goleak.IgnoreCurrent()
	ownBefore := ownGoroutines()
	port := freePort(t)
	// "dialed" refuses (nothing listens on its port); "silent" is passive
	// and dials in, then says nothing.
	dialed := l.peerOf("dialed", 3, freePort(t), provASN)
	dialed.ConnectRetry = time.Second
	silentPeer := config.Peer{Name: "silent", Address: l.addr(4), ASN: provASN, Passive: true,
		Families: []config.Family{config.IPv4}}
	node := l.speaker("node", config.BGP{ASN: nodeASN, RouterID: l.addr(2), ListenPort: port,
		Peers: []config.Peer{dialed, silentPeer}})
	ctx := context.Background()
	station := config.BMPServer{Name: "col", Address: netip.MustParseAddr("127.0.0.1"), Port: col.port(),
		RouteMonitoring: config.BMPAdjRIBIn, StatisticsInterval: time.Second}
	if err := node.SetBMP(ctx, []config.BMPServer{station}, "n", "d"); err != nil {
		t.Fatal(err)
	}

	silent := dialFrom(t, l.addr(4), port)
	eventually(t, 10*time.Second, "the listener holds the silent connection", func() (bool, string) {
		n := numWaiting(node.tr.ln, l.addr(4))
		return n == 1, fmt.Sprintf("%d waiting", n)
	})
	eventually(t, 10*time.Second, "the dialer retries", func() (bool, string) {
		return strings.Contains(l.logs(), "dial failed; retrying"), ""
	})
	col.wait(t, "the BMP Initiation", func(m bmpMsg) bool { return m.typ == bmpInitiation })
	// A status read whose caller gave up at once: its call of gobgp runs
	// on.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = node.BMP(gone)

	if err := node.Stop(ctx, false); err != nil {
		t.Fatal(err)
	}
	// At once: Stop waited for every goroutine ovnbgp's code started. A
	// task's wrapper whose function has returned may still be on its way
	// out (its deferred WaitGroup.Done let Stop return): its stack's top
	// frame is the wrapper itself, nothing of the task's.
	for h, g := range ownGoroutines() {
		if _, ok := ownBefore[h]; !ok && !exitingTask(g) {
			t.Errorf("runs after Stop returned:\n%s", g)
		}
	}
	// What the test itself started: the collector and the silent
	// connection's client side.
	col.ln.Close()
	silent.Close()
	col.wait(t, "the BMP Termination", func(m bmpMsg) bool { return m.typ == bmpTermination })
	eventually(t, 10*time.Second, "the collector's connections closed", func() (bool, string) {
		_, open, _ := col.state()
		return open == 0, fmt.Sprintf("%d open", open)
	})
	// And soon: gobgp's own goroutines (FSMs, BMP clients) end too.
	goleak.VerifyNone(t, before, gobgpBuffers)
}

// TestStopWaitsForEventCallbacks: a callback of gobgp's event watch that
// runs when Stop is called (here: held in the daemon's notify) ends before
// Stop returns, and none starts after.
func TestStopWaitsForEventCallbacks(t *testing.T) {
	l := newLab(t, 176)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	var hold atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	var after atomic.Int64 // notify calls after Stop returned
	var stoppedAt atomic.Bool
	notify := func() {
		if stoppedAt.Load() {
			after.Add(1)
		}
		if hold.CompareAndSwap(true, false) {
			entered <- struct{}{}
			<-release
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	node, err := New(ctx, config.BGP{ASN: nodeASN, RouterID: l.addr(2), ListenPort: -1,
		Peers: []config.Peer{l.peerOf("a", 3, port, provASN)}}, l.logger().Named("node"), notify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopWithin(t, "node", node) })
	t.Cleanup(free) // runs first
	waitEstablished(t, node, "a")

	// The provider goes: the node's session ends, and the callback that
	// reports it blocks in notify.
	hold.Store(true)
	if err := stopWithin(t, "provider", prov); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(sessionTimeout):
		t.Fatal("no event callback after the session ended")
	}
	done := make(chan error, 1)
	go func() {
		err := node.Stop(context.Background(), false)
		stoppedAt.Store(true)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("Stop returned (%v) while an event callback ran", err)
	case <-time.After(200 * time.Millisecond):
	}
	free()
	if err := stopped(t, "node", done); err != nil {
		t.Fatal(err)
	}
	never(t, time.Second, "a notify after Stop returned", func() (bool, string) {
		return after.Load() > 0, fmt.Sprintf("%d calls", after.Load())
	})
}
