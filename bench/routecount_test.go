package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// routeCounter counts the IPv4 routes of one kernel table with one route
// protocol in a network namespace, over one netlink socket opened in that
// namespace. It asks the kernel for a dump filtered by table and protocol
// (NETLINK_GET_STRICT_CHK: the kernel does the filtering, so a table of
// 100k routes costs one pass over it and ~100 bytes a route copied out; no
// process is started and nothing is formatted). This is a measuring
// instrument only: ovnbgp's own netlink code is in package vrf.
type routeCounter struct {
	fd  int
	buf []byte
	seq uint32
}

// openRouteCounter opens the socket inside the named network namespace
// (/run/netns/NAME, as `ip netns add` makes it). A socket stays in the
// namespace it was created in, so only the creating thread switches.
func openRouteCounter(netnsName string) (*routeCounter, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/run/netns", netnsName))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns %s: %w", netnsName, err)
	}
	fd, sockErr := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the other namespace: keep it locked, so
		// the runtime ends it with this goroutine instead of reusing it.
		if sockErr == nil {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("setns back to the test's namespace: %w", err)
	}
	runtime.UnlockOSThread()
	if sockErr != nil {
		return nil, fmt.Errorf("netlink socket in %s: %w", netnsName, sockErr)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("NETLINK_GET_STRICT_CHK: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &routeCounter{fd: fd, buf: make([]byte, 1<<20)}, nil
}

func (c *routeCounter) close() { unix.Close(c.fd) }

// count returns how many IPv4 routes table holds with protocol proto.
func (c *routeCounter) count(table, proto int) (int, error) {
	c.seq++
	type request struct {
		h unix.NlMsghdr
		m unix.RtMsg
		a unix.RtAttr
		t uint32
	}
	req := request{
		h: unix.NlMsghdr{Type: unix.RTM_GETROUTE, Flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP, Seq: c.seq},
		m: unix.RtMsg{Family: unix.AF_INET, Protocol: uint8(proto)},
		a: unix.RtAttr{Len: unix.SizeofRtAttr + 4, Type: unix.RTA_TABLE},
		t: uint32(table),
	}
	req.h.Len = uint32(unsafe.Sizeof(req))
	b := (*[unsafe.Sizeof(request{})]byte)(unsafe.Pointer(&req))[:]
	if err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	n := 0
	for {
		nr, _, err := unix.Recvfrom(c.fd, c.buf, 0)
		if err != nil {
			return 0, err
		}
		msgs, err := syscall.ParseNetlinkMessage(c.buf[:nr])
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			if m.Header.Seq != c.seq {
				continue
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return n, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					errno := -int32(*(*int32)(unsafe.Pointer(&m.Data[0])))
					if unix.Errno(errno) == unix.ENOENT {
						return 0, nil // the table does not exist yet
					}
					return 0, fmt.Errorf("route dump: %w", unix.Errno(errno))
				}
				return 0, errors.New("route dump: short netlink error")
			case unix.RTM_NEWROUTE:
				if len(m.Data) < unix.SizeofRtMsg {
					continue
				}
				rt := (*unix.RtMsg)(unsafe.Pointer(&m.Data[0]))
				// Check what the kernel filtered, in case it did not.
				if int(rt.Protocol) != proto || rt.Flags&unix.RTM_F_CLONED != 0 {
					continue
				}
				if routeTable(rt, m.Data[unix.SizeofRtMsg:]) == table {
					n++
				}
			}
		}
	}
}

// routeTable is the route's table: RTA_TABLE when present, else rtm_table.
func routeTable(rt *unix.RtMsg, attrs []byte) int {
	for len(attrs) >= unix.SizeofRtAttr {
		a := (*unix.RtAttr)(unsafe.Pointer(&attrs[0]))
		if int(a.Len) < unix.SizeofRtAttr || int(a.Len) > len(attrs) {
			break
		}
		if a.Type == unix.RTA_TABLE && a.Len >= unix.SizeofRtAttr+4 {
			return int(*(*uint32)(unsafe.Pointer(&attrs[unix.SizeofRtAttr])))
		}
		l := (int(a.Len) + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if l > len(attrs) {
			break
		}
		attrs = attrs[l:]
	}
	return int(rt.Table)
}

// waitRoutes polls the count every interval until it reaches want, and
// returns the instant of the first answer that showed it, and how long the
// slowest query took. alive fails fast when a daemon died.
func (c *routeCounter) waitRoutes(table, proto, want int, interval, timeout time.Duration, alive func() error) (time.Time, time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var slowest time.Duration
	last := -1
	for {
		q := time.Now()
		n, err := c.count(table, proto)
		now := time.Now()
		if d := now.Sub(q); d > slowest {
			slowest = d
		}
		if err != nil {
			return now, slowest, err
		}
		if n >= want {
			return now, slowest, nil
		}
		last = n
		if err := alive(); err != nil {
			return now, slowest, err
		}
		if now.After(deadline) {
			return now, slowest, fmt.Errorf("table %d has %d routes of protocol %d after %v, want %d", table, last, proto, timeout, want)
		}
		time.Sleep(interval)
	}
}
