//go:build ovnbgp_testhooks

package daemon

import (
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
)

// Built only with -tags ovnbgp_testhooks (`make build-testhooks`,
// bin/ovnbgp-testhooks), for packaging/vmtest; never in a release build.
//
// SIGUSR2 hangs the reconcile loop for good: the loop blocks where it runs
// its passes, so it stops petting the systemd watchdog, answers no control
// API call and reconciles nothing, while the BGP sessions (gobgp's own
// goroutines) stay up, as in a real deadlock of the loop. Only a signal
// that kills it (the watchdog's SIGABRT, SIGKILL) ends the process then:
// SIGTERM only cancels a context the hung loop no longer reads.

// testHookHang is what the daemon logs when SIGUSR2 hangs its loop. A test
// in testhooks_test.go checks that the release binary lacks this text.
const testHookHang = "test hook: SIGUSR2: the reconcile loop hangs now, for good"

// newTestHooks hangs the loop on SIGUSR2.
func newTestHooks(log *zap.Logger) testHooks {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	loop := make(chan func())
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sig:
			case <-done:
				return
			}
			hang := func() {
				log.Warn(testHookHang, zap.Int("pid", os.Getpid()))
				<-make(chan struct{}) // never closed: the loop never returns from here
			}
			select {
			case loop <- hang:
			case <-done:
				return
			}
		}
	}()
	log.Warn("built with -tags ovnbgp_testhooks: SIGUSR2 hangs the reconcile loop (a test-only binary, never for production)")
	return testHooks{loop: loop, stop: func() { signal.Stop(sig); close(done) }}
}
