package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
)

// holder is a process holding a socket.
type holder struct {
	PID  int
	Comm string
}

func (h holder) String() string { return fmt.Sprintf("%s (pid %d)", h.Comm, h.PID) }

// ours says whether the process is an ovnbgp.
func (h holder) ours() bool { return h.Comm == "ovnbgp" }

// tcpListeners returns the inodes of the TCP sockets listening on port in
// this network namespace (proc/net/tcp and tcp6, state 0A).
func tcpListeners(fsys fs.FS, port int) ([]uint64, error) {
	var inodes []uint64
	read := 0
	for _, f := range []string{"proc/net/tcp", "proc/net/tcp6"} {
		b, err := fs.ReadFile(fsys, f)
		if notExist(err) {
			continue // no IPv6
		}
		if err != nil {
			return nil, err
		}
		read++
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // header
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			if len(fl) < 10 || fl[3] != "0A" {
				continue
			}
			i := strings.LastIndexByte(fl[1], ':')
			p, err := strconv.ParseUint(fl[1][i+1:], 16, 16)
			if err != nil || int(p) != port {
				continue
			}
			if ino, err := strconv.ParseUint(fl[9], 10, 64); err == nil && ino != 0 {
				inodes = append(inodes, ino)
			}
		}
	}
	if read == 0 {
		return nil, fmt.Errorf("neither /proc/net/tcp nor /proc/net/tcp6 is readable")
	}
	return inodes, nil
}

// unixListener returns the inode of the unix socket listening at path
// (proc/net/unix, flag __SO_ACCEPTCON), 0 if none.
func unixListener(fsys fs.FS, sockPath string) (uint64, error) {
	b, err := fs.ReadFile(fsys, "proc/net/unix")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan()
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 8 || fl[7] != sockPath {
			continue
		}
		flags, err := strconv.ParseUint(fl[3], 16, 32)
		if err != nil || flags&0x10000 == 0 {
			continue
		}
		if ino, err := strconv.ParseUint(fl[6], 10, 64); err == nil {
			return ino, nil
		}
	}
	return 0, nil
}

// holders finds the processes holding any of the socket inodes, through
// proc/*/fd/* links ("socket:[inode]"). Processes whose fds cannot be read
// are passed over.
func holders(fsys fs.FS, inodes []uint64) []holder {
	want := map[string]bool{}
	for _, i := range inodes {
		want["socket:["+strconv.FormatUint(i, 10)+"]"] = true
	}
	var out []holder
	procs, _ := fs.ReadDir(fsys, "proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := path.Join("proc", p.Name(), "fd")
		fds, _ := fs.ReadDir(fsys, dir)
		for _, fd := range fds {
			target, err := fs.ReadLink(fsys, path.Join(dir, fd.Name()))
			if err != nil || !want[target] {
				continue
			}
			comm, _ := fs.ReadFile(fsys, path.Join("proc", p.Name(), "comm"))
			out = append(out, holder{PID: pid, Comm: strings.TrimSpace(string(comm))})
			break
		}
	}
	slices.SortFunc(out, func(a, b holder) int { return a.PID - b.PID })
	return out
}

// portResult says who listens on a TCP port.
func portResult(fsys fs.FS, id, what string, port int, fix string) Result {
	inodes, err := tcpListeners(fsys, port)
	if err != nil {
		return warn(id, "run doctor as root on the node", "cannot tell who listens on %s port %d: %v", what, port, err)
	}
	if len(inodes) == 0 {
		return pass(id, "%s port %d is free", what, port)
	}
	hs := holders(fsys, inodes)
	if len(hs) == 0 {
		return warn(id, "run doctor as root to see the process (or `ss -ltnp sport = :"+strconv.Itoa(port)+"`); "+fix,
			"%s port %d is taken by a process doctor cannot see", what, port)
	}
	var foreign []string
	for _, h := range hs {
		if !h.ours() {
			foreign = append(foreign, h.String())
		}
	}
	if len(foreign) == 0 {
		return pass(id, "%s port %d is held by ovnbgp itself: %s", what, port, hs[0])
	}
	return fail(id, fix, "%s port %d is held by %s", what, port, strings.Join(foreign, ", "))
}

// checkPorts: the BGP listen port, the control socket and the metrics
// address are free, or held by ovnbgp itself.
func checkPorts(_ context.Context, s *state) []Result {
	const (
		idBGP     = "bgp-port"
		idSocket  = "control-socket"
		idMetrics = "metrics-address"
	)
	if s.cfg == nil {
		return slices.Concat(needConfig(idBGP), needConfig(idSocket), needConfig(idMetrics))
	}
	fsys := s.env.Files()
	var out []Result
	if p := s.cfg.BGP.ListenPort; p < 0 {
		out = append(out, skip(idBGP, "bgp.listenPort is -1: ovnbgp never listens (it dials its peers)"))
	} else {
		out = append(out, portResult(fsys, idBGP, "the BGP listen", p,
			"stop the process holding it (another BGP daemon: FRR's bgpd, MetalLB's speaker), or set bgp.listenPort (-1: dial only, with every peer passive: false)"))
	}
	out = append(out, socketResult(fsys, idSocket, s.cfg.Control.Socket))
	if a := s.cfg.Metrics.Address; a == "" {
		out = append(out, skip(idMetrics, "metrics.address is empty: no metrics endpoint"))
	} else if _, ps, err := net.SplitHostPort(a); err != nil {
		out = append(out, fail(idMetrics, "metrics.address: HOST:PORT", "metrics.address %q: %v", a, err))
	} else {
		p, _ := strconv.Atoi(ps)
		out = append(out, portResult(fsys, idMetrics, "the metrics", p, "stop the process holding it, or set metrics.address to a free HOST:PORT"))
	}
	return out
}

// socketResult: the control socket path is free, a stale socket file (the
// daemon replaces it), or the socket of a running ovnbgp.
func socketResult(fsys fs.FS, id, sockPath string) Result {
	fix := "stop the process holding it, or set control.socket to another path"
	fi, err := fs.Stat(fsys, strings.TrimPrefix(sockPath, "/"))
	switch {
	case notExist(err):
		return pass(id, "control socket %s is free", sockPath)
	case err != nil:
		return warn(id, "run doctor as root", "control socket %s: %v", sockPath, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return fail(id, "remove "+sockPath+", or set control.socket to another path", "control socket %s exists and is not a socket (%s)", sockPath, fi.Mode().Type())
	}
	ino, err := unixListener(fsys, sockPath)
	if err != nil {
		return warn(id, "run doctor as root", "control socket %s: %v", sockPath, err)
	}
	if ino == 0 {
		return pass(id, "control socket %s is a stale socket file nobody listens on: the daemon replaces it at start", sockPath)
	}
	hs := holders(fsys, []uint64{ino})
	switch {
	case len(hs) == 0:
		return warn(id, "run doctor as root to see the process; "+fix, "control socket %s is held by a process doctor cannot see", sockPath)
	case hs[0].ours():
		return pass(id, "control socket %s is held by ovnbgp itself: %s", sockPath, hs[0])
	}
	return fail(id, fix, "control socket %s is held by %s", sockPath, hs[0])
}
