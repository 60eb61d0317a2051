package ovn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// TestDiscoveredSocketLater: ovn.northbound unset, no socket at either
// candidate when the client starts (ovnkube-node starts after ovnbgp at
// boot): the status says which paths were tried and that none is there;
// when the NB comes up at the interconnect path (OpenShift's), the client
// connects to it without a restart and says it was discovered.
func TestDiscoveredSocketLater(t *testing.T) {
	log := zaptest.NewLogger(t)
	root := shortDir(t)
	ic := filepath.Join(root, "var/run/ovn-ic/ovnnb_db.sock")
	plain := filepath.Join(root, "var/run/ovn/ovnnb_db.sock")
	p := make(poker, 1)
	c, err := ovnDial(t, config.OVN{NorthboundSockets: []string{ic, plain}}, log, p.notify)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		st := c.Status()
		return st.Attempts >= 2 && st.LastError != "", "no failed attempts yet"
	})
	st := c.Status()
	if st.Source != config.NBDiscovered || st.Connected || st.Endpoint != "" {
		t.Errorf("status before the NB exists = %+v, want discovered, not connected, no endpoint", st)
	}
	for _, s := range []string{ic, plain, "ovn.northbound"} {
		if !strings.Contains(st.LastError, s) {
			t.Errorf("status error %q does not name %s", st.LastError, s)
		}
	}
	if len(st.Tried) != 2 || st.Tried[0].Path != ic || st.Tried[0].State != config.NBAbsent || st.Tried[1].Path != plain {
		t.Errorf("status tried = %+v, want %s then %s, both absent", st.Tried, ic, plain)
	}

	if err := os.MkdirAll(filepath.Dir(ic), 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := labnb.NewMemoryServer(log, ic)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eventually(t, 10*time.Second, func() (bool, string) {
		_, ok := c.Snapshot("node1")
		return ok && c.Connected(), "not synced with the NB at " + ic
	})
	st = c.Status()
	if st.Source != config.NBDiscovered || st.Current != "unix:"+ic || st.Endpoint != "unix:"+ic || st.LastError != "" {
		t.Errorf("status once the NB is up = %+v, want discovered, current and endpoint unix:%s", st, ic)
	}
	if len(st.Tried) != 2 || st.Tried[0].State != config.NBSocket || st.Tried[1].State != config.NBAbsent {
		t.Errorf("status tried = %+v, want %s a socket, %s absent", st.Tried, ic, plain)
	}
}

// TestConfiguredSource: a set ovn.northbound is dialled as it is and the
// status says it was configured.
func TestConfiguredSource(t *testing.T) {
	log := zaptest.NewLogger(t)
	sock := filepath.Join(shortDir(t), "nb.sock")
	srv, err := labnb.NewMemoryServer(log, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, _ := dial(t, srv.Endpoint(), log)
	eventually(t, 10*time.Second, func() (bool, string) { return c.Connected(), "not connected" })
	if st := c.Status(); st.Source != config.NBConfigured || st.Endpoint != srv.Endpoint() || st.Tried != nil {
		t.Errorf("status = %+v, want configured %s, nothing tried", st, srv.Endpoint())
	}
}

// ovnDial is ovn.Dial, closed at the end of the test.
func ovnDial(t *testing.T, cfg config.OVN, log *zap.Logger, notify func()) (*ovn.Client, error) {
	t.Helper()
	c, err := ovn.Dial(context.Background(), cfg, log, notify)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}
