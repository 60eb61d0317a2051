package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"

	"golang.org/x/sys/unix"
)

// credListener accepts control-socket connections, at most n at a time (as
// netutil.LimitListener does: more wait in the kernel's accept queue), and
// reads each client's uid with SO_PEERCRED, so that a handler can tell root
// from anyone else (docs/architecture.md, "Safety rules", rule 7). It limits by itself
// because a wrapping limiter would hide the connection's descriptor.
type credListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newCredListener(ln net.Listener, n int) *credListener {
	return &credListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *credListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	cc := &credConn{Conn: c, release: func() { <-l.sem }}
	cc.uid, cc.known = peerUID(c)
	return cc, nil
}

func (l *credListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// credConn is a control connection and its client's uid.
type credConn struct {
	net.Conn
	uid       uint32
	known     bool
	closeOnce sync.Once
	release   func()
}

func (c *credConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(c.release)
	return err
}

// peerUID is the uid of the process at the other end of a unix connection.
func peerUID(c net.Conn) (uid uint32, ok bool) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || gerr != nil {
		return 0, false
	}
	return cred.Uid, true
}

type uidKey struct{}

// withPeerUID is the control server's ConnContext: it puts the client's
// uid in every request's context.
func withPeerUID(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*credConn); ok && cc.known {
		return context.WithValue(ctx, uidKey{}, cc.uid)
	}
	return ctx
}

// requireRoot answers 403 and returns false unless the request comes from
// uid 0 on the control socket: mutating calls (apply, drain, reload, and
// plan --config, which reads the files a config names as root) are root's
// only.
func requireRoot(w http.ResponseWriter, r *http.Request, what string) bool {
	if uid, ok := r.Context().Value(uidKey{}).(uint32); ok && uid == 0 {
		return true
	}
	replyError(w, http.StatusForbidden, errors.New(what+" is for root only (the control socket checks SO_PEERCRED): run it with sudo"))
	return false
}
