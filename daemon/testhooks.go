package daemon

// testHooks are the reconcile loop's seams for the tests that must make the
// whole process misbehave (packaging/vmtest: a hung loop that the systemd
// watchdog kills). Only a binary built with -tags ovnbgp_testhooks fills
// them (testhooks_on.go). Every other build, `make build` and the packages
// included, gets the zero value from testhooks_off.go: nil channels, which
// a select never chooses, and no code that could fill them.
type testHooks struct {
	// loop carries functions to run on the loop goroutine, as if they
	// were part of a pass.
	loop <-chan func()
	// stop releases what newTestHooks took; nil when it took nothing.
	stop func()
}

// close releases the hooks.
func (h testHooks) close() {
	if h.stop != nil {
		h.stop()
	}
}
