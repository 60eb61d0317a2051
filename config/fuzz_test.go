package config

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// parseDeadline is far above what any document takes (the example: about
// a millisecond); a parse that takes longer is a hang the daemon would pay
// for at every reload.
const parseDeadline = 5 * time.Second

// FuzzParse feeds the config parser documents of any shape: it must never
// panic, it must answer (alias bombs are refused early: the fuzzer's
// per-input deadline catches a hang), every failure must be Errors with a
// key path, and a document it accepts must validate again and marshal (what
// `config show` prints).
func FuzzParse(f *testing.F) {
	for _, seed := range []string{baseDoc, defaultsDoc, "", "{}", "bgp: {asn: banana}",
		"a: &a [*a, *a]\nb: &b [*a, *a]\n", "bgp:\n  peers:\n    - <<: {name: x}\n      address: 192.0.2.1\n",
		baseDoc + "bmp: {servers: [{name: a, address: 192.0.2.9, statisticsInterval: 1500ms}]}\n",
		baseDoc + "import:\n  - {name: up, peers: [tor-a], network: default, accept: [{prefix: 10.0.0.0/8, maxLength: 24}]}\n"} {
		f.Add([]byte(seed))
	}
	if data, err := os.ReadFile(exampleFile); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		type result struct {
			c   *Config
			err error
		}
		done := make(chan result, 1)
		go func() {
			c, err := parse(doc, "config.yaml", fakeHost(nil))
			done <- result{c, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(parseDeadline):
			t.Fatalf("parse took more than %v for %q", parseDeadline, doc)
		}
		c, err := r.c, r.err
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("parse error is %T %v, want Errors naming a key", err, err)
			}
			if c != nil {
				t.Fatalf("parse returned a config along with %v", err)
			}
			return
		}
		if errs := c.validate(fakeHost(nil)); len(errs) != 0 {
			t.Fatalf("parse accepted a config that does not validate again: %v", errs)
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatalf("an accepted config does not marshal: %v", err)
		}
	})
}
