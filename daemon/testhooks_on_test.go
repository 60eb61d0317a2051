//go:build ovnbgp_testhooks

package daemon

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTestHookHangsLoop (only with -tags ovnbgp_testhooks; `make test` runs
// it so): SIGUSR2 hangs the loop of the test-hooks build, so WATCHDOG=1
// stops while the process lives on. packaging/vmtest proves the rest under
// systemd: the watchdog then kills and restarts it.
func TestTestHookHangsLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "200000") // a ping every 100 ms
	pings := make(chan time.Time, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if strings.Contains(string(buf[:n]), "WATCHDOG=1") {
				pings <- time.Now()
			}
		}
	}()
	count := func(d time.Duration) int {
		n := 0
		end := time.After(d)
		for {
			select {
			case <-pings:
				n++
			case <-end:
				return n
			}
		}
	}
	h := start(t, "default")
	if n := count(time.Second); n < 3 {
		t.Fatalf("%d WATCHDOG=1 in 1 s from a healthy loop with WATCHDOG_USEC=200000, want about 10", n)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	// The ping already on its way may still come.
	time.Sleep(300 * time.Millisecond)
	for len(pings) > 0 {
		<-pings
	}
	if n := count(2 * time.Second); n != 0 {
		t.Fatalf("%d WATCHDOG=1 in the 2 s after SIGUSR2: the loop did not hang", n)
	}
	// The hung loop never returns, so the daemon cannot stop: leave it
	// (this test process ends soon) instead of waiting for it.
	h.once.Do(h.cancel)
}
