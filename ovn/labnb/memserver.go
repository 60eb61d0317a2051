package labnb

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/rpc2"
	"github.com/ovn-org/libovsdb/database/inmemory"
	libmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/server"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// MemoryServer is libovsdb's in-memory OVSDB server holding the subset of
// the OVN Northbound schema ovnbgp uses (ovn/nbdb), listening on a unix
// socket. It is for `ovnbgp lab` and tests: it forgets everything on Close,
// and it is not a replacement for ovsdb-server (an empty NB_Global, only the
// tables and columns of ovn/nbdb, no persistence). Its own loggers are
// libovsdb's (stdr to stderr, errors only: see the package doc); they
// cannot be replaced in libovsdb v0.7.0.
type MemoryServer struct {
	log  *zap.Logger
	srv  *server.OvsdbServer
	path string
	done chan struct{} // closed when Serve returns

	mu     sync.Mutex
	conns  map[*rpc2.Client]struct{}
	closed bool
}

// NewMemoryServer starts an in-memory NB on sockPath. An existing file at
// sockPath is replaced if it is a socket nobody listens on, and is an error
// otherwise.
func NewMemoryServer(log *zap.Logger, sockPath string) (*MemoryServer, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := removeStaleSocket(sockPath); err != nil {
		return nil, err
	}
	clientModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, fmt.Errorf("memory nb: model: %w", err)
	}
	schema := nbdb.Schema()
	dbModel, errs := libmodel.NewDatabaseModel(schema, clientModel)
	if len(errs) > 0 {
		return nil, fmt.Errorf("memory nb: model: %w", errors.Join(errs...))
	}
	db := inmemory.NewDatabase(map[string]libmodel.ClientDBModel{schema.Name: clientModel})
	srv, err := server.NewOvsdbServer(db, dbModel)
	if err != nil {
		return nil, fmt.Errorf("memory nb: %w", err)
	}
	m := &MemoryServer{
		log:   log,
		srv:   srv,
		path:  sockPath,
		done:  make(chan struct{}),
		conns: map[*rpc2.Client]struct{}{},
	}
	// libovsdb's server does not close its connections on Close; track
	// them so that Close looks like a server going away to clients.
	srv.OnConnect(func(c *rpc2.Client) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.closed {
			c.Close()
			return
		}
		m.conns[c] = struct{}{}
	})
	srv.OnDisConnect(func(c *rpc2.Client) {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.conns, c)
	})

	serveErr := make(chan error, 1)
	go func() {
		defer close(m.done)
		serveErr <- srv.Serve("unix", sockPath)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !srv.Ready() {
		select {
		case err := <-serveErr:
			return nil, fmt.Errorf("memory nb: listen on %s: %w", sockPath, err)
		default:
		}
		if time.Now().After(deadline) {
			srv.Close()
			return nil, fmt.Errorf("memory nb: %s: not listening after 5s", sockPath)
		}
		time.Sleep(5 * time.Millisecond)
	}
	log.Info("memory nb listening", zap.String("endpoint", m.Endpoint()))
	return m, nil
}

// Endpoint is the server's address in OVSDB form, "unix:/path".
func (m *MemoryServer) Endpoint() string { return "unix:" + m.path }

// Close stops listening, drops every client connection and forgets the
// data. It is safe to call more than once.
func (m *MemoryServer) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()

	m.srv.Close()
	for c := range conns {
		c.Close()
	}
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
	}
	// The listener normally unlinks its socket; make sure.
	_ = os.Remove(m.path)
	m.log.Info("memory nb stopped", zap.String("endpoint", m.Endpoint()))
}

// removeStaleSocket removes a socket file nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memory nb: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("memory nb: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("memory nb: %s: another server listens there", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("memory nb: remove stale socket: %w", err)
	}
	return nil
}
