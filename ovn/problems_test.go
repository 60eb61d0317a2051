package ovn

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestProblemLogSettles: a row problem is listed at once but logged only
// once it has stood for the settle time; one gone before (a read between
// the events of one update) is never logged as skipped, and only a
// logged one is logged as resolved.
func TestProblemLogSettles(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := newProblemLog(zap.New(core))
	t0 := time.Unix(1000, 0)
	count := func(msg string) int { return logs.FilterMessage(msg).Len() }

	// A torn read: the problem is there for 1 ms.
	l.set([]string{"switch a: no length"}, t0)
	if got := l.list(); len(got) != 1 {
		t.Fatalf("listed %v, want the problem at once", got)
	}
	l.set(nil, t0.Add(time.Millisecond))
	if _, pending := l.report(t0.Add(time.Hour)); pending || count("nb row skipped")+count("nb row problem resolved") != 0 {
		t.Fatalf("a problem gone after 1 ms was logged: %v", logs.All())
	}

	// A real one: logged once, when due, and resolved once.
	l.set([]string{"port b: dynamic"}, t0)
	wait, pending := l.report(t0.Add(200 * time.Millisecond))
	if !pending || wait != problemSettle-200*time.Millisecond || count("nb row skipped") != 0 {
		t.Fatalf("before the settle time: wait %v pending %v, %d logged", wait, pending, count("nb row skipped"))
	}
	// A later snapshot with the same problem and one more keeps its start.
	l.set([]string{"port b: dynamic", "port c: no address"}, t0.Add(500*time.Millisecond))
	l.report(t0.Add(problemSettle))
	if n := count("nb row skipped"); n != 1 {
		t.Fatalf("at the settle time of the first problem: %d logged, want 1", n)
	}
	l.report(t0.Add(2 * problemSettle))
	l.report(t0.Add(3 * problemSettle))
	if n := count("nb row skipped"); n != 2 {
		t.Fatalf("after both settled: %d logged, want 2 (each once)", n)
	}
	l.set([]string{"port c: no address"}, t0.Add(4*problemSettle))
	if n := count("nb row problem resolved"); n != 1 {
		t.Fatalf("%d resolved lines, want 1", n)
	}
}

// TestProblemLogRunLogsWhenDue: the client's reporter logs a standing
// problem with no further snapshot.
func TestProblemLogRunLogsWhenDue(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	l := newProblemLog(zap.New(core))
	l.settle = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx) }()
	defer func() { cancel(); <-done }()
	l.set([]string{"switch a: no length"}, time.Now())
	deadline := time.Now().Add(30 * time.Second)
	for logs.FilterMessage("nb row skipped").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a standing problem was never logged")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
