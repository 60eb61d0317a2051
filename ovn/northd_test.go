package ovn_test

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// northdIs returns a condition: the client's snapshot for node1 has
// northd version want, and the networks of labSnapshot (a version of any
// shape skips nothing else).
func northdIs(c *ovn.Client, want model.NorthdVersion) func() (bool, string) {
	return func() (bool, string) {
		got, ok := c.Snapshot("node1")
		if !ok {
			return false, "snapshot not ok"
		}
		if d := diff(labSnapshot(), networksOf(got)); d != "" {
			return false, "snapshot (-want +got):\n" + d
		}
		if got.Northd != want {
			return false, fmt.Sprintf("northd %+v, want %+v", got.Northd, want)
		}
		return true, ""
	}
}

// setNorthd writes options:northd_internal_version as ovn-northd does.
func setNorthd(s *ovsdbtest.Server, raw string) {
	s.MustNBCtl("set", "NB_Global", ".", fmt.Sprintf("options:northd_internal_version=%q", raw))
}

// TestNorthdVersion: the snapshot carries the release of ovn-northd from
// NB_Global options:northd_internal_version; without the option, without
// an NB_Global row, or with a value of another shape, it is unknown, and
// the rest of the snapshot and its problems are as ever.
func TestNorthdVersion(t *testing.T) {
	s := ovsdbtest.Start(t, "")
	populate(t, s)
	c, _ := dial(t, s.Endpoint(), zaptest.NewLogger(t))
	// ovn-nbctl init wrote the row; no northd ran.
	eventually(t, 10*time.Second, northdIs(c, model.NorthdVersion{}))
	problems := c.Status().Problems
	for _, tt := range []struct {
		raw  string
		want model.NorthdVersion
	}{
		{"24.09.2-20.37.0-73.4", model.NorthdVersion{Major: 24, Minor: 9, Raw: "24.09.2-20.37.0-73.4"}},
		{"25.03.0-20.41.0-77.1", model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}},
		{"24.03.2-20.33.0-72.6", model.NorthdVersion{Major: 24, Minor: 3, Raw: "24.03.2-20.33.0-72.6"}},
		{"garbage", model.NorthdVersion{Raw: "garbage"}},
		{"", model.NorthdVersion{Raw: ""}},
		{"26.03.1-21.1.0-80.15", model.NorthdVersion{Major: 26, Minor: 3, Raw: "26.03.1-21.1.0-80.15"}},
	} {
		setNorthd(s, tt.raw)
		eventually(t, 10*time.Second, northdIs(c, tt.want))
		if st := c.Status().Northd; st == nil || *st != tt.want {
			t.Errorf("%q: status northd %+v, want %+v", tt.raw, st, tt.want)
		}
		if d := diff(problems, c.Status().Problems); d != "" {
			t.Errorf("%q: problems (-want +got):\n%s", tt.raw, d)
		}
	}
	s.MustNBCtl("remove", "NB_Global", ".", "options", "northd_internal_version")
	eventually(t, 10*time.Second, northdIs(c, model.NorthdVersion{}))
	setNorthd(s, "25.09.0-21.0.0-79.3")
	eventually(t, 10*time.Second, northdIs(c, model.NorthdVersion{Major: 25, Minor: 9, Raw: "25.09.0-21.0.0-79.3"}))
	s.MustNBCtl("destroy", "NB_Global", ".")
	eventually(t, 10*time.Second, northdIs(c, model.NorthdVersion{}))
	if d := diff(problems, c.Status().Problems); d != "" {
		t.Errorf("no NB_Global: problems (-want +got):\n%s", d)
	}
}

// TestNorthdOnlyOptions: only NB_Global's options are monitored: a change
// of nb_cfg (every `ovn-nbctl --wait` makes one) brings no cache event, a
// change of another option one event and no new generation, and a new
// northd version a new generation whose delta is context.
func TestNorthdOnlyOptions(t *testing.T) {
	s := ovsdbtest.Start(t, "")
	populate(t, s)
	setNorthd(s, "24.09.2-20.37.0-73.4")
	c, p := dial(t, s.Endpoint(), zaptest.NewLogger(t))
	v2409 := model.NorthdVersion{Major: 24, Minor: 9, Raw: "24.09.2-20.37.0-73.4"}
	eventually(t, 10*time.Second, northdIs(c, v2409))
	_, _, gen, ok := c.SnapshotDelta("node1", 0)
	if !ok {
		t.Fatal("snapshot not ok")
	}
	events := ovn.TableEvents(c, nbdb.NBGlobalTable)
	p.drain()

	s.MustNBCtl("set", "NB_Global", ".", "nb_cfg=7", "sb_cfg=7", "hv_cfg=7", "nb_cfg_timestamp=1700000000000")
	// A monitored change after it: once it is seen, an update of nb_cfg
	// would have been seen before.
	s.MustNBCtl("set", "NB_Global", ".", "options:mac_prefix=0a:58:0a")
	eventually(t, 10*time.Second, func() (bool, string) {
		n := ovn.TableEvents(c, nbdb.NBGlobalTable)
		return n > events, fmt.Sprintf("%d NB_Global events, want more than %d", n, events)
	})
	time.Sleep(300 * time.Millisecond) // any event behind it
	if n := ovn.TableEvents(c, nbdb.NBGlobalTable); n != events+1 {
		t.Errorf("%d NB_Global events after nb_cfg and one option changed, want %d (options only)", n-events, 1)
	}
	snap, delta, gen2, _ := c.SnapshotDelta("node1", gen)
	if gen2 != gen || !delta.Empty() || snap.Northd != v2409 {
		t.Errorf("after nb_cfg and another option: gen %d -> %d, delta %+v, northd %+v", gen, gen2, delta, snap.Northd)
	}
	select {
	case <-p:
		t.Error("notified for nb_cfg and another option")
	default:
	}

	setNorthd(s, "25.03.0-20.41.0-77.1")
	p.wait(t, "northd version")
	eventually(t, 10*time.Second, northdIs(c, model.NorthdVersion{Major: 25, Minor: 3, Raw: "25.03.0-20.41.0-77.1"}))
	_, delta, gen3, _ := c.SnapshotDelta("node1", gen2)
	if gen3 == gen2 || !delta.Context || delta.All {
		t.Errorf("after a new northd version: gen %d -> %d, delta %+v (want context)", gen2, gen3, delta)
	}
}
