package ovn

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// problemSettle is how long a row problem must stand before it is logged.
//
// A read can see one NB transaction torn: libovsdb applies an update to its
// cache under one lock, but hands the client its row events one by one
// afterwards, from another goroutine (eventProcessor in libovsdb's
// cache/cache.go, v0.7.0), and the client re-reads only the tables whose
// events it has had (rowMemo). A read between two events of one update
// then has, say, a new layer2 switch without the router port written with
// it, and skips the switch; the next event's read, a millisecond later,
// has both. libovsdb marks no end of an update, so such a read cannot be
// told from a real problem when it is made. What it cannot do is last: the
// remaining events are queued already and re-read at once. So a problem
// is listed at once (Status) and its row is skipped at once (keeping its
// last good state), but "nb row skipped" is logged only once the problem
// has stood for problemSettle; one gone before that is logged at debug
// level. An operator sees real problems within a second, and no torn read.
const problemSettle = time.Second

// problemLog keeps the row problems of the last snapshot and logs each
// change of them once (problemSettle).
type problemLog struct {
	log    *zap.Logger
	settle time.Duration
	// wake tells run that a problem waits to be logged.
	wake chan struct{}

	mu      sync.Mutex
	current []string             // the last snapshot's problems, sorted as given
	since   map[string]time.Time // when each current problem appeared
	logged  map[string]bool      // the problems logged as "nb row skipped"
}

func newProblemLog(log *zap.Logger) *problemLog {
	return &problemLog{log: log, settle: problemSettle, wake: make(chan struct{}, 1),
		since: map[string]time.Time{}, logged: map[string]bool{}}
}

// set records the problems of a snapshot taken at now and logs what is
// due (report).
func (l *problemLog) set(p []string, now time.Time) {
	l.mu.Lock()
	if slices.Equal(l.current, p) {
		l.mu.Unlock()
		return
	}
	l.current = slices.Clone(p)
	for _, s := range p {
		if _, ok := l.since[s]; !ok {
			l.since[s] = now
		}
	}
	var passed []string
	for s := range l.since {
		if !slices.Contains(p, s) {
			delete(l.since, s)
			if !l.logged[s] {
				passed = append(passed, s)
			}
		}
	}
	l.mu.Unlock()
	slices.Sort(passed)
	for _, s := range passed {
		l.log.Debug("nb row problem passed before it settled (a read between the events of one update)", zap.String("problem", s))
	}
	if _, pending := l.report(now); pending {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// list is the last snapshot's problems.
func (l *problemLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.current)
}

// report logs the problems that have stood for settle at now and the
// logged ones that are gone. pending says whether a current problem is
// not logged yet, and wait is how long until it is due.
func (l *problemLog) report(now time.Time) (wait time.Duration, pending bool) {
	l.mu.Lock()
	var appeared, resolved []string
	for _, s := range l.current {
		if l.logged[s] {
			continue
		}
		if due := l.since[s].Add(l.settle); !now.Before(due) {
			l.logged[s] = true
			appeared = append(appeared, s)
		} else if d := due.Sub(now); !pending || d < wait {
			wait, pending = d, true
		}
	}
	for s := range l.logged {
		if _, ok := l.since[s]; !ok {
			delete(l.logged, s)
			resolved = append(resolved, s)
		}
	}
	l.mu.Unlock()
	slices.Sort(resolved)
	for _, s := range appeared {
		l.log.Warn("nb row skipped", zap.String("problem", s))
	}
	for _, s := range resolved {
		l.log.Info("nb row problem resolved", zap.String("problem", s))
	}
	return wait, pending
}

// run logs each problem when it is due, until ctx is done. The client's
// connection loop owns it and waits for it.
func (l *problemLog) run(ctx context.Context) {
	var timer *time.Timer
	var due <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-due:
		}
		wait, pending := l.report(time.Now())
		if timer != nil {
			timer.Stop()
		}
		due = nil
		if pending {
			timer = time.NewTimer(wait)
			due = timer.C
		}
	}
}
