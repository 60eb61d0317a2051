package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// InNetns runs f on a thread switched into network namespace ns, on a
// goroutine of its own, and returns f's error: sockets f creates live in
// ns for good. If switching back fails, that thread stays locked and Go
// ends it with the goroutine, so no other code ever runs in ns by mistake.
func InNetns(ns string, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err, back := inNetns(ns, f)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// inNetns does InNetns' work on the locked thread; back reports that the
// thread is in its own namespace again.
func inNetns(ns string, f func() error) (err error, back bool) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err, true
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return err, true
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", ns, err), true
	}
	ferr := f()
	if e := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); e != nil {
		return errors.Join(ferr, fmt.Errorf("setns back: %w", e)), false
	}
	return ferr, true
}

// DialIn opens a TCP connection to addr from inside network namespace ns
// (InNetns).
func DialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := InNetns(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	if err != nil && c != nil {
		c.Close()
		c = nil
	}
	return c, err
}

// HTTPGet fetches url from inside namespace ns (e.g. the daemon's
// /metrics on the node's loopback) on a connection of its own, closed
// after the answer: nothing stays open in the server.
func (l *Lab) HTTPGet(ns, url string) ([]byte, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialIn(ctx, ns, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s in %s: %w", url, ns, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s in %s: %w", url, ns, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s in %s: %s: %.200s", url, ns, resp.Status, body)
	}
	return body, nil
}
