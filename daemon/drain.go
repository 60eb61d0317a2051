package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
)

// drainFileName is the drain state's file in stateDir.
const drainFileName = "drain.json"

// drainFileVersion is the format written; a file of another version is
// refused, never guessed at.
const drainFileVersion = 1

// maxDrainFile bounds what is read of the file.
const maxDrainFile = 1 << 20

// drainFile is the file's content.
type drainFile struct {
	Version int                 `json:"version"`
	Peers   []model.DrainedPeer `json:"peers"`
}

// loadDrain reads the drain state from dir. No file is no drain. A file
// that cannot be read or parsed is an error naming it and what to do: the
// daemon does not start, because starting undrained would re-announce
// untagged routes on a node an operator drained.
func loadDrain(dir string) (model.Drain, error) {
	path := filepath.Join(dir, drainFileName)
	fix := "fix or delete the file (deleting it undrains the node: every peer gets the normal advertisements at once)"
	// O_NONBLOCK: a FIFO in its place must not block the start in
	// open(2); the regular-file check below refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return model.Drain{}, nil
	}
	if err != nil {
		return model.Drain{}, fmt.Errorf("drain state %s: %w; ovnbgp does not start without knowing whether the node is drained: %s", path, err, fix)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return model.Drain{}, fmt.Errorf("drain state %s: not a regular file; %s", path, fix)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxDrainFile+1))
	if err == nil && len(data) > maxDrainFile {
		err = fmt.Errorf("larger than %d bytes", maxDrainFile)
	}
	if err != nil {
		return model.Drain{}, fmt.Errorf("drain state %s: %w; ovnbgp does not start without knowing whether the node is drained: %s", path, err, fix)
	}
	var df drainFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&df); err != nil {
		return model.Drain{}, fmt.Errorf("drain state %s is corrupt (%w); ovnbgp does not start without knowing whether the node is drained: %s", path, err, fix)
	}
	if df.Version != drainFileVersion {
		return model.Drain{}, fmt.Errorf("drain state %s: version %d, this ovnbgp reads version %d; %s", path, df.Version, drainFileVersion, fix)
	}
	d := model.Drain{Peers: df.Peers}
	if err := d.Validate(); err != nil {
		return model.Drain{}, fmt.Errorf("drain state %s is corrupt (%w); %s", path, err, fix)
	}
	return d, nil
}

// saveDrain persists d in dir atomically: a temporary file (0600) written
// and synced, renamed over the old one, and the directory synced; an empty
// d removes the file. The directory is created (0700) if missing.
func saveDrain(dir string, d model.Drain) error {
	path := filepath.Join(dir, drainFileName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("drain state: create stateDir %s: %w", dir, err)
	}
	if d.Empty() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drain state: remove %s: %w", path, err)
		}
		return syncDir(dir)
	}
	data, err := json.MarshalIndent(drainFile{Version: drainFileVersion, Peers: d.Peers}, "", "  ")
	if err != nil {
		return fmt.Errorf("drain state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, drainFileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("drain state: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("drain state: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("drain state: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("drain state: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("drain state: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("drain state: rename to %s: %w", path, err)
	}
	done = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("drain state: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("drain state: sync %s: %w", dir, err)
	}
	return nil
}

// drainState is the drain state in effect.
func (d *Daemon) drainState() model.Drain {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drain
}

// drainStatusLocked describes the drain state at now for cfg's peers;
// the caller holds mu.
func (d *Daemon) drainStatusLocked(cfg *config.Config, now time.Time) api.DrainStatus {
	st := api.DrainStatus{Orders: nonNil(slices.Clone(d.drain.Peers)), Peers: []api.DrainedPeer{},
		File: filepath.Join(d.stateDir, drainFileName), Now: now}
	for _, p := range cfg.BGP.Peers {
		if dp, ok := d.drain.For(p.Name); ok {
			st.Peers = append(st.Peers, api.DrainedPeer{DrainedPeer: dp, Phase: d.drain.Phase(p.Name, now)})
		}
	}
	return st
}

// warnUnconfiguredDrains names, at Warn, each drain order whose peer cfg
// does not configure (removed or renamed while drained): it drains
// nothing until a peer of that name comes back, and `ovnbgp undrain
// --peer NAME` removes it.
func (d *Daemon) warnUnconfiguredDrains(cfg *config.Config) {
	for _, o := range d.drainState().Peers {
		if o.Peer == "" {
			continue
		}
		if _, ok := cfg.Peer(o.Peer); !ok {
			d.log.Warn("drain order for a peer that is not configured: it drains nothing until a peer of that name is configured again; `ovnbgp undrain --peer NAME` removes it",
				zap.String("peer", o.Peer), zap.Time("since", o.Since), zap.Time("withdrawAt", o.WithdrawAt))
		}
	}
}

// drainPhases fills each peer's Drain.
func (d *Daemon) drainPhases(peers []model.PeerStatus) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range peers {
		peers[i].Drain = d.drain.Phase(peers[i].Name, now)
	}
}

// setDrain persists next and makes it the drain state, then asks the loop
// for a pass; it runs on the loop. Nothing changes when it cannot be
// persisted: a drain that would not survive a restart is refused.
func (d *Daemon) setDrain(next model.Drain) error {
	if err := saveDrain(d.stateDir, next); err != nil {
		return err
	}
	d.mu.Lock()
	d.drain = next
	d.mu.Unlock()
	d.poke()
	return nil
}

// drainHandlers adds the drain endpoints (root only) to mux.
func (d *Daemon) drainHandlers(mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.PathDrain, func(w http.ResponseWriter, r *http.Request) {
		if !requireRoot(w, r, "drain") {
			return
		}
		var req api.DrainRequest
		if err := decodeBody(r, &req); err != nil {
			replyError(w, http.StatusBadRequest, fmt.Errorf("drain request: %w", err))
			return
		}
		wait := api.DefaultDrainWait
		if req.Wait != nil {
			wait = time.Duration(*req.Wait)
		}
		if wait < 0 {
			replyError(w, http.StatusBadRequest, fmt.Errorf("drain: wait %s is negative: give 0 to withdraw at once, or how long to keep the routes tagged (e.g. 30s)", wait))
			return
		}
		d.changeDrain(w, r, req.Peer, func(cur model.Drain, now time.Time) (model.Drain, error) {
			return cur.Add(req.Peer, now, wait), nil
		}, false)
	})
	mux.HandleFunc("POST "+api.PathUndrain, func(w http.ResponseWriter, r *http.Request) {
		if !requireRoot(w, r, "undrain") {
			return
		}
		var req api.UndrainRequest
		if err := decodeBody(r, &req); err != nil {
			replyError(w, http.StatusBadRequest, fmt.Errorf("undrain request: %w", err))
			return
		}
		d.changeDrain(w, r, req.Peer, func(cur model.Drain, _ time.Time) (model.Drain, error) {
			return cur.Remove(req.Peer)
		}, true)
	})
}

// changeDrain checks peer, runs change (a drain, or with undrain an
// undrain) on the loop, persists its result and answers the new drain
// status.
func (d *Daemon) changeDrain(w http.ResponseWriter, r *http.Request, peer string, change func(model.Drain, time.Time) (model.Drain, error), undrain bool) {
	what := "drained"
	if undrain {
		what = "undrained"
	}
	// An undrain may name a peer no longer configured (removed or renamed
	// while drained) whose order is still kept: else only an undrain of
	// everything could clear it.
	ordered := undrain && slices.ContainsFunc(d.drainState().Peers, func(p model.DrainedPeer) bool { return p.Peer == peer })
	if err := d.checkPeer(peer); err != nil && !ordered {
		replyError(w, http.StatusNotFound, fmt.Errorf("%w: name one of them, or give no --peer for every peer", err))
		return
	}
	var st api.DrainStatus
	var cerr error
	code := http.StatusOK
	err := d.onLoop(r.Context(), func(context.Context) {
		now := time.Now()
		next, err := change(d.drainState(), now)
		if err != nil {
			cerr, code = err, http.StatusConflict
			return
		}
		if err := d.setDrain(next); err != nil {
			cerr, code = err, http.StatusInternalServerError
			return
		}
		d.pl.dropPending("the drain changed")
		cfg := d.config()
		d.mu.Lock()
		st = d.drainStatusLocked(cfg, now)
		d.mu.Unlock()
		fields := []zap.Field{zap.String("peer", peerOrAll(peer))}
		if dp, ok := next.For(peer); ok && !undrain {
			fields = append(fields, zap.Time("since", dp.Since), zap.Time("withdrawAt", dp.WithdrawAt))
		}
		d.log.Info(what, fields...)
	})
	if err != nil {
		replyError(w, http.StatusServiceUnavailable, err)
		return
	}
	if cerr != nil {
		replyError(w, code, cerr)
		return
	}
	reply(w, st, nil)
}

func peerOrAll(peer string) string {
	if peer == "" {
		return "(every peer)"
	}
	return peer
}

// decodeBody decodes a small JSON request body, refusing unknown fields.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err // an empty body is the empty request
	}
	return nil
}
