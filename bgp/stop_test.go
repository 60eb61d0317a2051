package bgp

import (
	"context"
	"runtime"
	"strings"
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
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "created by github.com/ovnbgp/ovnbgp/bgp.(*tasks)") {
			out = append(out, g)
		}
	}
	return out
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
	release := make(chan struct{})
	node.tasks.goFn(func() { <-release })
	checks := node.repairChecks.Load()

	done := make(chan error, 1)
	go func() { done <- node.Stop(context.Background(), false) }()
	select {
	case err := <-done:
		t.Fatalf("Stop returned (%v) while a task ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	node.tasks.mu.Lock()
	pending := len(node.tasks.pending)
	node.tasks.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d timers pending after Stop", pending)
	}
	if err := prov.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if g := tasksRunning(); len(g) > 0 {
		t.Errorf("tasks run after both speakers stopped:\n%s", strings.Join(g, "\n\n"))
	}
	// The session-start repair was pending (sessionSettle): it never runs.
	never(t, sessionSettle+500*time.Millisecond, "a session-start repair after Stop", func() (bool, string) {
		return node.repairChecks.Load() != checks, ""
	})
}
