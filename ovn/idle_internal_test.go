package ovn

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libmodel "github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// TestLogrSeesDroppedEvents: a real libovsdb cache whose event processor
// is not running drops every event past its buffer, and the logger the
// session gives libovsdb calls onDrop for each, whatever zap's level (here
// none at all). This pins droppedEventsMsg to libovsdb's text: without it
// the session would miss changes, having no periodic re-read.
func TestLogrSeesDroppedEvents(t *testing.T) {
	dbModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	dbm, errs := libmodel.NewDatabaseModel(nbdb.Schema(), dbModel)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	drops := 0
	tc, err := cache.NewTableCache(dbm, nil, newLogr(zap.NewNop(), func() { drops++ }))
	if err != nil {
		t.Fatal(err)
	}
	// libovsdb's buffer (cache.go bufferSize) and a few more.
	const buffer, extra = 65536, 3
	rows := map[string]*ovsdb.RowUpdate2{}
	for i := range buffer + extra {
		rows[fmt.Sprintf("00000000-0000-4000-8000-%012d", i)] = &ovsdb.RowUpdate2{Initial: &ovsdb.Row{"name": fmt.Sprintf("sw%d", i)}}
	}
	if err := tc.Populate2(ovsdb.TableUpdates2{nbdb.LogicalSwitchTable: rows}); err != nil {
		t.Fatal(err)
	}
	if drops != extra {
		t.Fatalf("%d events past a full buffer, onDrop called %d times", extra, drops)
	}
}

// idleClient is a Client of a fresh memory NB with one switch, synced,
// whose echo timer is probe (driven by the test).
func idleClient(t *testing.T, probe chan time.Time) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	log := zap.NewNop()
	srv, err := labnb.NewMemoryServer(log, filepath.Join(t.TempDir(), "nb.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := labnb.Topology(ctx, srv.Endpoint(), "node1", log); err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, config.OVN{Northbound: srv.Endpoint()}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.probe = func(time.Duration) (<-chan time.Time, func()) { return probe, func() {} }
	go c.run()
	t.Cleanup(c.Close)
	deadline := time.Now().Add(30 * time.Second)
	for !c.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("never connected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c
}

// fullReads is how many times the rows were marked for a full re-read.
func (m *rowMemo) fullReads() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.all
}

// TestSessionProbeDoesNotReread: the session's timer only probes the
// server; with no cache event no tick re-reads the rows, however late it
// comes (the ticks carry times hours apart: a re-read every resync
// interval, as before, would run at each).
func TestSessionProbeDoesNotReread(t *testing.T) {
	probe := make(chan time.Time)
	c := idleClient(t, probe)
	before := c.memo.fullReads()
	now := time.Now()
	// The probe channel is unbuffered: when tick k+1 is taken, the
	// session has handled tick k.
	for k := range 4 {
		probe <- now.Add(time.Duration(k+1) * time.Hour)
	}
	if n := c.memo.fullReads() - before; n != 0 {
		t.Fatalf("3 probe ticks without a cache event: %d full re-reads, want 0", n)
	}
	if !c.Connected() {
		t.Fatal("the probes (echo) lost the connection")
	}
}

// TestEventsDroppedRereads: told that libovsdb dropped events, the session
// reads every table again.
func TestEventsDroppedRereads(t *testing.T) {
	c := idleClient(t, make(chan time.Time))
	before := c.memo.fullReads()
	c.eventsDropped()
	if n := c.memo.fullReads(); n != before+1 {
		t.Fatalf("eventsDropped: %d full re-reads marked, want 1", n-before)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.memo.mu.Lock()
		done := c.memo.lastAll == c.memo.all
		c.memo.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the full re-read after eventsDropped never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
