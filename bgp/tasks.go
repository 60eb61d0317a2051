package bgp

import (
	"sync"
	"time"
)

// tasks owns the goroutines and timers the Speaker starts itself: gobgp's
// Serve loop, the limit and BFD workers, the BFD switches, the
// session-start repairs, the prefix-limit re-enables, the sessions' hold
// bound and BMP's status reads. (The dialer and the listener own their
// own goroutines: dialer.go, listener.go.) close refuses new ones and
// cancels the pending timers; wait returns once every one that started
// has returned. A timer that fires after close runs nothing.
//
// It also counts the Speaker's calls on goroutines it does not own:
// gobgp's event watch runs the Speaker's callbacks (onPeerEvent, onPaths,
// onEndOfRIB) through enter and leave; after closeCalls none starts, and
// wait waits for those under way too.
type tasks struct {
	mu          sync.Mutex
	closed      bool
	callsClosed bool
	pending     map[*task]struct{}
	wg          sync.WaitGroup
}

// enter admits a call on a goroutine of gobgp's, unless closeCalls was
// called; the caller runs it and then calls leave only when admitted.
func (t *tasks) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.callsClosed {
		return false
	}
	t.wg.Add(1)
	return true
}

// leave ends a call enter admitted.
func (t *tasks) leave() { t.wg.Done() }

// closeCalls refuses the calls enter has not admitted yet.
func (t *tasks) closeCalls() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.callsClosed = true
}

// task is one timer of tasks; its zero value (nil) is a task that never
// runs.
type task struct {
	t         *tasks
	timer     *time.Timer
	cancelled bool
}

// goFn runs f on its own goroutine, unless tasks is closed; it reports
// whether f runs.
func (t *tasks) goFn(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// after runs f on its own goroutine after d, unless the task is stopped
// or tasks is closed first. It returns nil when tasks is closed.
func (t *tasks) after(d time.Duration, f func()) *task {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if t.pending == nil {
		t.pending = map[*task]struct{}{}
	}
	k := &task{t: t}
	t.wg.Add(1)
	k.timer = time.AfterFunc(d, func() {
		defer t.wg.Done()
		t.mu.Lock()
		delete(t.pending, k)
		skip := t.closed || k.cancelled
		t.mu.Unlock()
		if !skip {
			f()
		}
	})
	t.pending[k] = struct{}{}
	return k
}

// stop cancels the task: f does not run unless it already started.
// It is a no-op on nil.
func (k *task) stop() {
	if k == nil {
		return
	}
	k.t.mu.Lock()
	defer k.t.mu.Unlock()
	k.t.cancel(k)
}

// cancel stops k's timer; the caller holds t.mu.
func (t *tasks) cancel(k *task) {
	if k.cancelled {
		return
	}
	k.cancelled = true
	delete(t.pending, k)
	if k.timer.Stop() {
		t.wg.Done() // its func never runs
	}
}

// close refuses new tasks and cancels the pending timers. It does not
// wait: a task may need a lock close's caller holds.
func (t *tasks) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for k := range t.pending {
		t.cancel(k)
	}
}

// wait returns once every task started, and every call admitted, has
// returned.
func (t *tasks) wait() { t.wg.Wait() }
