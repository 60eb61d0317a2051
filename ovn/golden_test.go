package ovn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
	"github.com/ovnbgp/ovnbgp/ovn/ovsdbtest"
)

// uuidRE matches an OVSDB row UUID.
var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

var update = flag.Bool("update", false, "rewrite ovn/testdata/nb/*.golden from the in-memory NB")

// goldenNode is the node the fixtures are written for (node2 and node3 are
// the others).
const goldenNode = "node1"

// golden is what the client makes of one NB fixture.
type golden struct {
	Snapshot model.Snapshot `json:"snapshot"`
	Cluster  []model.Subnet `json:"cluster"`
	Problems []string       `json:"problems"`
}

// fixtures lists the NB fixtures: OVSDB operations (JSON) mirroring what
// OVN-Kubernetes writes (ovn/testdata/nb/README.md, docs/ovn-nb.md).
func fixtures(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "nb", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no NB fixtures in testdata/nb: %v", err)
	}
	return files
}

// observe dials endpoint and returns what the client reads once synced.
func observe(t *testing.T, endpoint string) golden {
	t.Helper()
	// With a workloadIP rule's switch ports: the fixtures' pods show.
	c, _ := dialConfig(t, config.OVN{Northbound: endpoint, Workloads: true}, zaptest.NewLogger(t))
	var snap model.Snapshot
	eventually(t, 10*time.Second, func() (bool, string) {
		var ok bool
		snap, ok = c.Snapshot(goldenNode)
		return ok, "not synced"
	})
	// When a handover state was first seen differs on every run: a set
	// Since is written as the epoch's first second (on copies: the
	// client shares its list and its entries).
	snap.WorkloadIPs = slices.Clone(snap.WorkloadIPs)
	for i, w := range snap.WorkloadIPs {
		if !w.Since.IsZero() {
			c := *w
			c.Since = time.Unix(1, 0).UTC()
			snap.WorkloadIPs[i] = &c
		}
	}
	cluster, ok := c.ClusterSubnets()
	if !ok {
		t.Fatal("ClusterSubnets not ok after a sync")
	}
	problems := c.Status().Problems
	if problems == nil {
		problems = []string{}
	}
	return golden{Snapshot: snap, Cluster: cluster, Problems: problems}
}

func checkGolden(t *testing.T, fixture string, got golden, write bool) {
	t.Helper()
	path := strings.TrimSuffix(fixture, ".json") + ".golden"
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	// Row UUIDs differ on every load.
	b = uuidRE.ReplaceAll(b, []byte("<uuid>"))
	if write {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ovn -run TestGoldenNB -update)", err)
	}
	var want golden
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var norm golden
	if err := json.Unmarshal(b, &norm); err != nil {
		t.Fatal(err)
	}
	if d := diff(want, norm); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}

// TestGoldenNB loads each NB fixture into libovsdb's in-memory server and
// compares what the client reads (node1's networks and subnets, the
// cluster's protected subnets, the problems) with its golden file. -update
// rewrites the golden files (review the diff!).
func TestGoldenNB(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ops, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := labnb.NewMemoryServer(zaptest.NewLogger(t), filepath.Join(shortDir(t), "nb.sock"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			if err := labnb.Transact(context.Background(), srv.Endpoint(), ops, zaptest.NewLogger(t)); err != nil {
				t.Fatalf("load %s: %v", f, err)
			}
			checkGolden(t, f, observe(t, srv.Endpoint()), *update)
		})
	}
}

// TestGoldenNBRealServer loads each fixture into a real ovsdb-server with
// OVN's own tool (`ovsdb-client transact`, on the installed OVN's full NB
// schema, so the fixtures must satisfy its constraints) and expects the
// same golden result.
func TestGoldenNBRealServer(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var ops []json.RawMessage
			if err := json.Unmarshal(raw, &ops); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			txn, err := json.Marshal(append([]json.RawMessage{json.RawMessage(`"OVN_Northbound"`)}, ops...))
			if err != nil {
				t.Fatal(err)
			}
			s := ovsdbtest.Start(t, "")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "ovsdb-client", "transact", s.Endpoint(), string(txn)).CombinedOutput()
			if err != nil {
				t.Fatalf("ovsdb-client transact %s: %v\n%s", f, err, out)
			}
			if bytes.Contains(out, []byte(`"error"`)) {
				t.Fatalf("ovsdb-client transact %s: %s", f, out)
			}
			checkGolden(t, f, observe(t, s.Endpoint()), false)
		})
	}
}
