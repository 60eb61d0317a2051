package bench

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The smoke test's sizes: the smallest that still runs every step of each
// driver (a cap that holds routes back, an idle window, an NB with more
// than the harness's two nodes).
const (
	smokePrefixes    = 10 // bulk /24s and VIPs, advertise preload, kernel import
	smokeAdvChanges  = 4  // the least advChangeRun takes
	smokeDropPaths   = 30 // the drop job's prefixes ...
	smokeDropCap     = 10 // ... with maxRoutes below them
	smokeIdle        = time.Second
	smokeOVNRoutes   = 10
	smokeScaleNodes  = 4
	smokeScaleVIPs   = 10
	smokeScaleChange = 2
)

// smokeRun is the jobRun of the smoke test t: numbers into a results of
// its own, short pauses.
func smokeRun(t *testing.T) jobRun { return jobRun{TB: t, rows: &results{}, smoke: true} }

// TestContenderDriversSmoke runs every contender's driver of every bench
// job once, at its smallest size (one single change, 10 prefixes or VIPs,
// 4 advertise changes, 10 routes imported, ...), so that `make test`
// catches a driver that no longer works long before `make bench` would.
// It asserts no timing: only what the drivers check themselves (the routes
// arrived, the ToR's and the kernel's counts are exact, the exact prefixes
// are there, nothing reset or died) and that each job recorded its rows,
// one finite value per contender. The jobs run at the same time, each in
// its own lab (a contender's advertise jobs one after the other in one
// lab, each leaving it as it found it; the advertise-change job last, as
// it turns on the ToR's UPDATE log). Needs root, FRR, frr-reload.py, BIRD
// and OVN, as test/e2e: skips without them, fails under CI=true.
func TestContenderDriversSmoke(t *testing.T) {
	lab.Require(t)
	start := time.Now()
	// Each job is a subtest run from its own goroutine, not t.Parallel:
	// they all run at once whatever -parallel is (GOMAXPROCS by default),
	// and they wait on sessions and timers far more than on a CPU.
	var wg sync.WaitGroup
	job := func(name string, f func(t *testing.T, r jobRun)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, func(t *testing.T) {
				began := time.Now()
				r := smokeRun(t)
				f(t, r)
				checkRows(t, r.rows)
				t.Logf("%s: %v", name, pretty(time.Since(began)))
			})
		}()
	}
	// withVIPs: the contenders of BenchmarkAdvertiseChange and
	// BenchmarkAdvertiseBulk in the same world as the /24 jobs; ovnbgp's
	// is the ovnbgp-vip world below.
	withVIPs := map[string]bool{"frr-vtysh": true, "bird-configure": true}
	for _, c := range contenders {
		job("advertise/"+c.id, func(t *testing.T, r jobRun) {
			w := newWorld(r, c.id, c.name)
			singleRun(r, w, 1)
			bulkRun(r, w, []int{smokePrefixes}, bulkPrefixes, "/24", 0)
			wantRows(t, r.rows, c.name, "add one /24, commit→RIB p50", "withdraw one /24, commit→RIB p50",
				fmt.Sprintf("bulk add %d /24, command start→all in RIB", smokePrefixes),
				fmt.Sprintf("bulk withdraw %d /24, command start→none in RIB", smokePrefixes))
			if withVIPs[c.id] {
				advertiseVIPs(t, r, w)
			}
		})
	}
	job("advertise/ovnbgp-vip", func(t *testing.T, r jobRun) {
		advertiseVIPs(t, r, newWorld(r, "ovnbgp-vip", ovnbgpName))
	})
	// Issue 19: the workload job of each contender, in a lab of its own
	// (its change phase leaves the preload advertised).
	for _, c := range []struct{ id, world, name string }{
		{"ovnbgp", "ovnbgp-wl", ovnbgpName},
		{"frr-vtysh", "frr-vtysh", vtyshName},
		{"bird-configure", "bird-configure", birdConfName},
	} {
		job("advertise-workload/"+c.id, func(t *testing.T, r jobRun) {
			wlRun(r, newWorld(r, c.world, c.name), smokePrefixes, smokeAdvChanges, smokePause)
			job := fmt.Sprintf("one pod added or removed, %d pods: ", smokePrefixes)
			wantRows(t, r.rows, c.name, fmt.Sprintf("bulk add %d pod /32, command start→all in RIB", smokePrefixes),
				fmt.Sprintf("bulk add %d pod /32, (RSS %v after - idle RSS) / N", smokePrefixes, smokePause),
				job+"commit→ToR received (all 4) p50", job+"command start→ToR received (all 4) p50")
		})
	}
	job("nb-scale", func(t *testing.T, r jobRun) {
		s := nbScale{services: smokeScaleVIPs, backends: 2, nodes: smokeScaleNodes, changes: smokeScaleChange, settle: smokePause}
		scaleRun(r, s)
		wantRows(t, r.rows, ovnbgpName,
			fmt.Sprintf("NB at scale (%d Services × 2 endpoints, %d nodes): one VIP changed, commit→ToR received p50", smokeScaleVIPs, smokeScaleNodes))
	})
	job("ovn-import", func(t *testing.T, r jobRun) {
		// It prints its own lines and records no rows: its three times.
		raw, mon, ovn := ovnImportRun(r, smokeOVNRoutes, 1)
		if len(raw) != 1 || len(mon) != 1 || len(ovn) != 1 || raw[0] <= 0 || mon[0] <= 0 || ovn[0] <= 0 {
			t.Errorf("OVN import, one round: times %v, %v and %v, want one each", raw, mon, ovn)
		}
	})
	job("import-kernel", func(t *testing.T, r jobRun) {
		importKernelRun(r, smokePrefixes, smokeIdle)
		for _, c := range []string{ovnbgpName, frrName, birdName} {
			wantRows(t, r.rows, c, fmt.Sprintf("import %d /24 into the kernel, session up→all in kernel", smokePrefixes),
				fmt.Sprintf("idle with %d routes, node daemons' CPU per minute", smokePrefixes))
		}
	})
	job("import-inject", func(t *testing.T, r jobRun) {
		importInjectRun(r, smokePrefixes)
		for _, c := range []string{ovnbgpName, frrName, birdName} {
			wantRows(t, r.rows, c, fmt.Sprintf("import %d /24 into the kernel, fast injector, first UPDATE→all in kernel", smokePrefixes))
		}
	})
	job("import-drop", func(t *testing.T, r jobRun) {
		importDropRun(r, smokeDropPaths, smokeDropCap)
		wantRows(t, r.rows, ovnbgpName, fmt.Sprintf("a %d-prefix peer drops (maxRoutes %d), session down→kernel table empty", smokeDropPaths, smokeDropCap))
	})
	wg.Wait()
	t.Logf("every driver ran once in %v", pretty(time.Since(start)))
}

// advertiseVIPs runs the VIP jobs in w: bulk VIPs (with the RSS read after
// a short settle), then the advertise changes on a preload of
// smokePrefixes.
func advertiseVIPs(t *testing.T, r jobRun, w *world) {
	t.Helper()
	bulkRun(r, w, []int{smokePrefixes}, bulkVIPs, "VIP", smokePause)
	advChangeRun(r, w, smokeAdvChanges, smokePrefixes)
	job := fmt.Sprintf("one egress IP or VIP changed, %d advertised: ", smokePrefixes)
	wantRows(t, r.rows, w.name, fmt.Sprintf("bulk add %d VIP, command start→all in RIB", smokePrefixes),
		job+"add, commit→ToR RIB p50", job+"withdraw, commit→ToR received p50")
}

// checkRows fails the test for a value that is not a number: a job that
// divided by nothing. (wantRows checks that a job recorded its rows.)
func checkRows(t *testing.T, r *results) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, row := range r.rows {
		for c, vs := range row.runs {
			for _, v := range vs {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s (%s), %s: %v", row.job, row.unit, c, v)
				}
			}
		}
	}
}

// wantRows fails the test unless each named row has exactly one value for
// contender c.
func wantRows(t *testing.T, r *results, c string, jobs ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, job := range jobs {
		found := false
		for _, row := range r.rows {
			if row.job != job {
				continue
			}
			found = true
			if n := len(row.runs[c]); n != 1 {
				t.Errorf("%s: %d values for %s, want 1", job, n, c)
			}
		}
		if !found {
			var have []string
			for _, row := range r.rows {
				have = append(have, row.job)
			}
			t.Errorf("no row %q; the rows: %s", job, strings.Join(have, "; "))
		}
	}
}
