package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

// server is an HTTP server on a listener, closed with the daemon.
type server struct {
	srv  *http.Server
	ln   net.Listener
	path string // unix socket to remove, if any
	// served is closed when Serve has returned; close waits for it.
	served chan struct{}
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close() // a stream still running: cut it
	}
	<-s.served
	if s.path != "" {
		_ = os.Remove(s.path)
	}
}

// serve serves h on ln with every bound of d.lim: at most conns connections
// (more wait in the kernel's accept queue and hold no descriptor of ours),
// header, read, write and idle deadlines, and a header size cap. Nobody on
// the host can exhaust the daemon's descriptors through it.
func (d *Daemon) serve(name string, ln net.Listener, conns int, h http.Handler) *server {
	log := d.log.Named(name)
	if _, limited := ln.(*credListener); !limited {
		ln = netutil.LimitListener(ln, conns)
	}
	s := &server{ln: ln, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: d.lim.readHeaderTimeout,
		ReadTimeout:       d.lim.readTimeout,
		WriteTimeout:      d.lim.writeTimeout,
		IdleTimeout:       d.lim.idleTimeout,
		MaxHeaderBytes:    d.lim.maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log),
		ConnContext:       withPeerUID,
	}, served: make(chan struct{})}
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server stopped", zap.Error(err))
		}
	}()
	return s
}

// serveControl serves the control API on a unix socket, mode 0600. A socket
// file left by a dead daemon is replaced; a live daemon on it is an error.
func (d *Daemon) serveControl(path string) (*server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control.socket %s exists and is not a socket; remove it or choose another path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("control.socket %s: another ovnbgp daemon is running on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale control socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := d.serve("control", newCredListener(ln, d.lim.controlConns), d.lim.controlConns, d.controlHandler())
	s.path = path
	d.log.Info("control socket listening", zap.String("socket", path))
	return s, nil
}

// controlHandler is the control API. It answers from the first instant:
// while the speaker is being started or restarted, peers are reported in
// the phase's state and the route lists answer 503 saying so.
func (d *Daemon) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathStatus, func(w http.ResponseWriter, r *http.Request) {
		reply(w, d.status(), nil)
	})
	mux.HandleFunc("GET "+api.PathPeers, func(w http.ResponseWriter, r *http.Request) {
		sp, phase, peersUp := d.speakerPhase()
		if sp == nil {
			peers := d.configuredPeers(model.SessionState(phase))
			d.drainPhases(peers)
			reply(w, peers, nil)
			return
		}
		if !peersUp {
			// The speaker runs; the sessions start with the first plan.
			peers := d.configuredPeers(api.PeerStarting)
			d.drainPhases(peers)
			reply(w, peers, nil)
			return
		}
		peers, err := sp.Peers(r.Context())
		peers = d.linkPeers(d.config(), peers)
		d.importCounts(peers)
		d.exportCapCounts(peers)
		d.drainPhases(peers)
		reply(w, nonNil(peers), err)
	})
	mux.HandleFunc("GET "+api.PathAdvertised, func(w http.ResponseWriter, r *http.Request) {
		d.routeList(w, r, func(sp Speaker, peer string, st *stream) error {
			for _, a := range d.advertised(sp, peer) {
				if err := st.add(a); err != nil {
					return err
				}
			}
			return nil
		})
	})
	mux.HandleFunc("GET "+api.PathLearned, func(w http.ResponseWriter, r *http.Request) {
		rejected := r.URL.Query().Get("rejected") == "true"
		d.routeList(w, r, func(sp Speaker, peer string, st *stream) error {
			if paths, ok := d.decidedPaths(sp); ok {
				// Import rules decided on these paths: show the verdicts.
				for _, p := range paths {
					if (peer != "" && p.Peer != peer) || (rejected && p.Accepted) {
						continue
					}
					if err := st.add(p); err != nil {
						return err
					}
				}
				return nil
			}
			return sp.EachLearned(r.Context(), peer, func(p model.LearnedPath) error {
				if rejected && p.Accepted {
					return nil
				}
				return st.add(p)
			})
		})
	})
	mux.HandleFunc("GET "+api.PathConfig, func(w http.ResponseWriter, r *http.Request) {
		reply(w, d.config().Redacted(), nil)
	})
	mux.HandleFunc("GET "+api.PathNetworks, func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		snap := d.snapshot
		d.mu.Unlock()
		reply(w, snap, nil)
	})
	d.importHandlers(mux)
	d.drainHandlers(mux)
	d.reloadHandlers(mux)
	return mux
}

func (d *Daemon) speakerPhase() (sp Speaker, phase string, peersUp bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.speaker, d.phase, d.peersUp
}

// speakerOr503 returns the running speaker, or answers 503 and returns nil.
func (d *Daemon) speakerOr503(w http.ResponseWriter) Speaker {
	sp, phase, _ := d.speakerPhase()
	if sp != nil {
		return sp
	}
	if phase == api.PhaseStopping {
		replyError(w, http.StatusServiceUnavailable, errors.New("ovnbgp is stopping: the BGP speaker is stopped"))
		return nil
	}
	w.Header().Set("Retry-After", "2")
	replyError(w, http.StatusServiceUnavailable, fmt.Errorf("ovnbgp is %s: the BGP speaker is not running yet; try again in a few seconds", phase))
	return nil
}

// configuredPeers is the peers answer while no speaker runs.
func (d *Daemon) configuredPeers(state model.SessionState) []model.PeerStatus {
	cfg := d.config()
	out := make([]model.PeerStatus, 0, len(cfg.BGP.Peers))
	for _, p := range cfg.BGP.Peers {
		fams := make([]model.FamilyCounts, 0, len(p.Families))
		for _, f := range p.Families {
			fams = append(fams, model.FamilyCounts{Family: string(f)})
		}
		ps := model.PeerStatus{Name: p.Name, Address: p.Address, ASN: p.ASN, State: state, Families: fams}
		if p.OnLink() {
			ps.Interface = p.Link()
		}
		out = append(out, ps)
	}
	return out
}

// listQuery reads ?peer= and ?limit= of a route list, or answers 4xx.
func (d *Daemon) listQuery(w http.ResponseWriter, r *http.Request) (peer string, limit int, ok bool) {
	q := r.URL.Query()
	peer = q.Get("peer")
	if err := d.checkPeer(peer); err != nil {
		replyError(w, http.StatusNotFound, err)
		return "", 0, false
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			replyError(w, http.StatusBadRequest, fmt.Errorf("limit=%q: want a number of items, 0 or more (0 = no limit)", s))
			return "", 0, false
		}
		limit = n
	}
	return peer, limit, true
}

// heavySlot waits for one of the few slots for a streamed route list, or
// answers 503; release frees the slot.
func (d *Daemon) heavySlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	d.heavyWaiting.Add(1)
	defer d.heavyWaiting.Add(-1)
	t := time.NewTimer(d.lim.heavyWait)
	defer t.Stop()
	select {
	case d.heavy <- struct{}{}:
		return func() { <-d.heavy }, true
	case <-t.C:
		w.Header().Set("Retry-After", "5")
		replyError(w, http.StatusServiceUnavailable, fmt.Errorf("busy: %d route lists are being sent; try again shortly", cap(d.heavy)))
	case <-r.Context().Done():
	}
	return nil, false
}

// errLimit ends a list walk at its limit.
var errLimit = errors.New("limit reached")

// stream writes a JSON array item by item: memory stays that of one item
// however long the list. The header goes out with the first item, so an
// error before it is still a proper error status; later the trailers say
// how the list ended (api.TrailerTruncated, api.TrailerError).
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	bw      *bufio.Writer
	limit   int
	n       int
	started bool
	// deadline is how long a write may take: pushed forward as items go
	// out, so a long list that makes progress is never cut, and a client
	// that stops reading is dropped after this long.
	deadline time.Duration
	extended time.Time // when the write deadline was last set
	err      error     // a write error: the client is gone
}

// flushEvery items, the buffer goes out (a reader sees progress).
const flushEvery = 256

func newStream(w http.ResponseWriter, limit int, deadline time.Duration) *stream {
	return &stream{w: w, rc: http.NewResponseController(w), limit: limit, deadline: deadline}
}

func (s *stream) start() {
	if s.started {
		return
	}
	s.started = true
	// No read deadline to lift: net/http clears it once the request is
	// read (its background read, which notices a client that goes away,
	// runs without one). A client that stops reading meets the write
	// deadline.
	s.extend(time.Now())
	h := s.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Trailer", api.TrailerTruncated+", "+api.TrailerError)
	s.w.WriteHeader(http.StatusOK)
	s.bw = bufio.NewWriterSize(s.w, 32<<10)
	_, _ = s.bw.WriteString("[")
}

// add writes one item; errLimit when the list is full, or a write error.
func (s *stream) add(v any) error {
	if s.err != nil {
		return s.err
	}
	if s.limit > 0 && s.n >= s.limit {
		s.w.Header().Set(api.TrailerTruncated, "true")
		return errLimit
	}
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	s.start()
	if now := time.Now(); now.Sub(s.extended) > s.deadline/4 {
		s.extend(now)
	}
	if s.n > 0 {
		_, _ = s.bw.WriteString(",")
	}
	_, _ = s.bw.WriteString("\n  ")
	_, s.err = s.bw.Write(b)
	s.n++
	if s.err == nil && s.n%flushEvery == 0 {
		if s.err = s.bw.Flush(); s.err == nil {
			s.err = s.rc.Flush()
		}
	}
	return s.err
}

func (s *stream) extend(now time.Time) {
	_ = s.rc.SetWriteDeadline(now.Add(s.deadline))
	s.extended = now
}

// end closes the array; err is what ended the walk.
func (s *stream) end(err error, log *zap.Logger) {
	if errors.Is(err, errLimit) {
		err = nil
	}
	if s.err != nil {
		log.Debug("route list not delivered", zap.Error(s.err))
		return
	}
	if err != nil && !s.started {
		replyError(s.w, http.StatusInternalServerError, err)
		return
	}
	s.start()
	s.extend(time.Now())
	if err != nil {
		log.Warn("route list incomplete", zap.Error(err))
		s.w.Header().Set(api.TrailerError, err.Error())
	}
	if s.n > 0 {
		_, _ = s.bw.WriteString("\n")
	}
	_, _ = s.bw.WriteString("]\n")
	_ = s.bw.Flush()
}

// routeList serves a streamed route list: it checks the query, waits for
// a heavy-request slot, and only then reads the speaker (a reload may
// restart it while the request waits: the list must come from the one
// running now), then streams what each writes.
func (d *Daemon) routeList(w http.ResponseWriter, r *http.Request, each func(sp Speaker, peer string, st *stream) error) {
	peer, limit, ok := d.listQuery(w, r)
	if !ok {
		return
	}
	release, ok := d.heavySlot(w, r)
	if !ok {
		return
	}
	defer release()
	sp := d.speakerOr503(w)
	if sp == nil {
		return
	}
	st := newStream(w, limit, d.lim.writeTimeout)
	st.end(each(sp, peer, st), d.log)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		replyError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func replyError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.Error{Error: err.Error()})
}
