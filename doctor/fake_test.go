package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/nd"
)

// fakeEnv is an Env from values: files in a MapFS, NB as a snapshot or an
// error, routing as maps, HTTP served by a handler in memory (no socket:
// nothing leaves the process), the daemon as peers or an error.
type fakeEnv struct {
	files  fstest.MapFS
	nb     model.Snapshot
	nbErr  error
	routes map[netip.Addr]string // destination -> device
	vrfs   []model.VRFDevice
	tables map[uint32]map[int]int
	rtErr  error
	vrfErr error // VRFs() fails
	links  map[string]nd.LinkFacts
	aws    http.Handler // nil: nothing answers (not on AWS)
	env    map[string]string
	daemon *DaemonView
	reqs   []string // "METHOD host path" of every HTTP request
}

func (f *fakeEnv) Files() fs.FS { return f.files }

func (f *fakeEnv) Northbound(_ context.Context, cfg config.OVN, node string) (NBView, error) {
	if f.nbErr != nil {
		return NBView{}, f.nbErr
	}
	s := f.nb
	s.Node = node
	target, err := cfg.Target()
	if err != nil {
		return NBView{}, err
	}
	eps, tried := target.Find()
	return NBView{Endpoint: eps.String(), Source: target.Source, Tried: tried, Snapshot: s}, nil
}

func (f *fakeEnv) Routing() (Routing, error) {
	if f.rtErr != nil {
		return nil, f.rtErr
	}
	return fakeRouting{f}, nil
}

func (f *fakeEnv) HTTP(req *http.Request) (*http.Response, error) {
	f.reqs = append(f.reqs, req.Method+" "+req.URL.Host+" "+req.URL.Path)
	if f.aws == nil {
		return nil, fmt.Errorf("dial tcp %s: connect: network is unreachable", req.URL.Host)
	}
	rec := httptest.NewRecorder()
	f.aws.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

func (f *fakeEnv) Getenv(k string) string { return f.env[k] }

func (f *fakeEnv) Daemon(context.Context, string) (*DaemonView, error) {
	if f.daemon == nil {
		return nil, errors.New("connection refused")
	}
	return f.daemon, nil
}

type fakeRouting struct{ f *fakeEnv }

func (r fakeRouting) RouteTo(dst netip.Addr) (string, error) {
	if d, ok := r.f.routes[dst]; ok {
		return d, nil
	}
	return "", fmt.Errorf("route lookup of %s: network is unreachable", dst)
}
func (r fakeRouting) VRFs() ([]model.VRFDevice, error)             { return r.f.vrfs, r.f.vrfErr }
func (r fakeRouting) TableProtocols(t uint32) (map[int]int, error) { return r.f.tables[t], nil }
func (fakeRouting) Close()                                         {}

func (r fakeRouting) Link(dev string) (nd.LinkFacts, error) {
	if f, ok := r.f.links[dev]; ok {
		f.Name = dev
		return f, nil
	}
	return nd.LinkFacts{}, fmt.Errorf("link %s: Link not found", dev)
}

// baseConfig is a valid config: node1, one IPv4 peer tor-a, no import.
const baseConfig = `node: {name: node1}
bgp:
  asn: 65010
  routerID: 192.0.2.0
  peers:
    - {name: tor-a, address: 192.0.2.1, asn: 65001}
advertise:
  - {name: pods, kind: podNetwork, networks: ["*"]}
control: {socket: /run/ovnbgp/ovnbgp.sock}
metrics: {address: "127.0.0.1:9479"}
`

// parse loads doc as `ovnbgp doctor` does: passwordFile recorded, not read.
func parse(t *testing.T, doc string) *config.Config {
	t.Helper()
	f := filepath.Join(t.TempDir(), "test.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.LoadWith(context.Background(), f, config.LoadOptions{SkipSecrets: true})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c
}

// run runs one check against env with the config doc ("" = invalid).
func run(t *testing.T, c check, env *fakeEnv, doc string) []Result {
	t.Helper()
	s := &state{in: Input{ConfigPath: "test.yaml", Timeout: 1e9}, env: env}
	if doc != "" {
		s.cfg = parse(t, doc)
		s.in.Config = s.cfg
		s.daemon, s.daemonErr = env.Daemon(context.Background(), "")
	}
	return c(context.Background(), s)
}

// expect checks the statuses of rs, in order, and that each finding
// contains the matching substring (if given).
func expect(t *testing.T, rs []Result, want ...string) {
	t.Helper()
	if len(rs) != len(want) {
		t.Fatalf("got %d results, want %d:\n%s", len(rs), len(want), dump(rs))
	}
	for i, w := range want {
		status, sub, _ := strings.Cut(w, ":")
		if string(rs[i].Status) != status || !strings.Contains(rs[i].Finding, sub) {
			t.Errorf("result %d: got %s %q, want %s containing %q\n%s", i, rs[i].Status, rs[i].Finding, status, sub, dump(rs))
		}
		if (rs[i].Status == Warn || rs[i].Status == Fail) && rs[i].Fix == "" {
			t.Errorf("result %d (%s) has no fix", i, rs[i].Status)
		}
	}
}

func dump(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s %s: %s [fix: %s]\n", r.ID, r.Status, r.Finding, r.Fix)
	}
	return b.String()
}
