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

// DialIn opens a TCP connection to addr from inside network namespace ns:
// the socket is made on a thread switched into ns, and stays there.
func DialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	// A goroutine of its own: if switching back fails, its thread stays
	// locked and Go ends it with the goroutine.
	go func() {
		runtime.LockOSThread()
		c, back, err := dialIn(ctx, ns, network, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialIn does DialIn's work on the locked thread; back reports that the
// thread is in its own namespace again.
func dialIn(ctx context.Context, ns, network, addr string) (c net.Conn, back bool, err error) {
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns %s: %w", ns, err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, network, addr)
	if e := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); e != nil {
		if c != nil {
			c.Close()
		}
		return nil, false, errors.Join(err, fmt.Errorf("setns back: %w", e))
	}
	return c, true, err
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
