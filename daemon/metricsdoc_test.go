package daemon

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsDoc: docs/metrics.md lists exactly the metrics the daemon
// registers, each with its labels, and the names follow Prometheus'
// conventions (counters end in _total, timestamps in _timestamp_seconds,
// base units).
func TestMetricsDoc(t *testing.T) {
	data, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(ovnbgp_[a-z_]+)` \\| (gauge|counter|histogram) \\| ([^|]*) \\|")
	doc := map[string][]string{}
	types := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var labels []string
		for _, f := range strings.Split(m[3], ",") {
			if f = strings.Trim(strings.TrimSpace(f), "`"); f != "" && f != "-" {
				labels = append(labels, f)
			}
		}
		slices.Sort(labels)
		doc[m[1]], types[m[1]] = labels, m[2]
	}
	if len(doc) == 0 {
		t.Fatal("docs/metrics.md has no metric rows (| `ovnbgp_name` | type | labels | meaning |)")
	}

	d := &Daemon{loopMetrics: newLoopMetrics()}
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range d.collectors() {
		c.Describe(descs)
	}
	close(descs)
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	registered := map[string]bool{}
	for dsc := range descs {
		m := desc.FindStringSubmatch(dsc.String())
		if m == nil {
			t.Fatalf("cannot read %s", dsc)
		}
		name := m[1]
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		slices.Sort(labels)
		registered[name] = true
		got, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md does not list %s (labels %v)", name, labels)
		case !slices.Equal(got, labels):
			t.Errorf("docs/metrics.md gives %s the labels %v, the daemon %v", name, got, labels)
		}
		switch typ := types[name]; {
		case strings.HasSuffix(name, "_total") != (typ == "counter"):
			t.Errorf("%s is a %s: counters, and only they, end in _total", name, typ)
		case strings.Contains(name, "_since") && !strings.HasSuffix(name, "_timestamp_seconds"):
			t.Errorf("%s: a point in time ends in _timestamp_seconds", name)
		case regexp.MustCompile(`_(ms|milliseconds|minutes|bytes_kb)$`).MatchString(name):
			t.Errorf("%s: use base units (seconds, bytes)", name)
		}
	}
	for name := range doc {
		if !registered[name] {
			t.Errorf("docs/metrics.md lists %s, which the daemon does not register", name)
		}
	}
}
