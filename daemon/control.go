package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
)

// server is an HTTP server on a listener, closed with the daemon.
type server struct {
	srv  *http.Server
	ln   net.Listener
	path string // unix socket to remove, if any
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	if s.path != "" {
		_ = os.Remove(s.path)
	}
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathStatus, func(w http.ResponseWriter, r *http.Request) {
		reply(w, d.status(), nil)
	})
	mux.HandleFunc("GET "+api.PathPeers, func(w http.ResponseWriter, r *http.Request) {
		peers, err := d.currentSpeaker().Peers(r.Context())
		reply(w, nonNil(peers), err)
	})
	mux.HandleFunc("GET "+api.PathAdvertised, func(w http.ResponseWriter, r *http.Request) {
		peer := r.URL.Query().Get("peer")
		if err := d.checkPeer(peer); err != nil {
			replyError(w, http.StatusNotFound, err)
			return
		}
		reply(w, nonNil(d.advertised(peer)), nil)
	})
	mux.HandleFunc("GET "+api.PathLearned, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		peer := q.Get("peer")
		if err := d.checkPeer(peer); err != nil {
			replyError(w, http.StatusNotFound, err)
			return
		}
		paths, err := d.currentSpeaker().Learned(r.Context(), peer)
		if q.Get("rejected") == "true" {
			kept := paths[:0]
			for _, p := range paths {
				if !p.Accepted {
					kept = append(kept, p)
				}
			}
			paths = kept
		}
		reply(w, nonNil(paths), err)
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
	s := &server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, path: path}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("control socket stopped", zap.Error(err))
		}
	}()
	d.log.Info("control socket listening", zap.String("socket", path))
	return s, nil
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
