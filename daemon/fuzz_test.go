package daemon

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
)

// fuzzPaths are the control API's paths; the fuzzer picks one by index and
// may add a suffix (a query, a second segment, garbage).
var fuzzPaths = []string{api.PathStatus, api.PathPeers, api.PathAdvertised, api.PathLearned, api.PathConfig,
	api.PathNetworks, api.PathImported, api.PathExplain, api.PathPlan, api.PathReload, api.PathApply,
	api.PathDrain, api.PathUndrain}

// FuzzControlAPI sends the control API requests of any shape, as root and
// as another user: no request may crash the daemon or get a 500 (a bad
// request is the client's error: 4xx, naming what is wrong), a non-root
// mutation is always refused, and the daemon keeps answering afterwards.
func FuzzControlAPI(f *testing.F) {
	// The daemon's logs go nowhere: testing.F must not log from the
	// fuzz function, where the daemon's goroutines would.
	h := start(f, "default", func(h *harness) { h.logger = zap.NewNop() })
	h.nb.set(true, network("default", "10.128.0.0/23"))
	h.wantPrefixes("tor 10.128.0.0/23")
	handler := h.d.controlHandler()

	f.Add(uint8(0), "", []byte(nil), false)
	f.Add(uint8(3), "?peer=tor&rejected=true&limit=5", []byte(nil), false)
	f.Add(uint8(7), "?prefix=10.128.0.0/23", []byte(nil), false)
	f.Add(uint8(7), "?prefix=not-a-prefix", []byte(nil), false)
	f.Add(uint8(8), "", []byte(`{"name":"new.yaml","text":"bgp: {asn: banana}"}`), true)
	f.Add(uint8(10), "", []byte(`{"ovn":[{"op":"add"}],"kernel":null}`), true)
	f.Add(uint8(11), "", []byte(`{"peer":"tor","wait":"-5s"}`), true)
	f.Add(uint8(11), "", []byte(`{"peer":"ghost"}`), true)
	f.Add(uint8(12), "", []byte(`{"peer":"tor"}`), true)
	f.Add(uint8(12), "", []byte(`[[[[[[[[[[[[[[[[[[[[`), true)
	f.Add(uint8(9), "/../status", []byte("\x00\xff"), true)
	f.Fuzz(func(t *testing.T, pathIdx uint8, suffix string, body []byte, root bool) {
		path := fuzzPaths[int(pathIdx)%len(fuzzPaths)]
		mutating := path == api.PathReload || path == api.PathApply || path == api.PathDrain || path == api.PathUndrain
		method := http.MethodGet
		if body != nil || mutating {
			method = http.MethodPost
		}
		if pathIdx >= 128 {
			method = http.MethodPut // a method no route has
		}
		target := path + suffix
		if strings.ContainsAny(suffix, " \r\n\t#") || !strings.HasPrefix(target, "/") {
			target = path
		}
		req, err := http.NewRequest(method, "http://ovnbgp"+target, bytes.NewReader(body))
		if err != nil {
			t.Skip("not a request line an HTTP client sends")
		}
		if root {
			req = req.WithContext(context.WithValue(req.Context(), uidKey{}, uint32(0)))
		} else {
			req = req.WithContext(context.WithValue(req.Context(), uidKey{}, uint32(1000)))
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s (root %v, body %q): %d %s", method, target, root, body, code, rec.Body)
		}
		if !root && mutating && method == http.MethodPost && code >= 200 && code < 300 {
			t.Fatalf("%s %s from uid 1000 was accepted: %d %s", method, target, code, rec.Body)
		}
		if code >= 400 && rec.Body.Len() == 0 {
			t.Fatalf("%s %s: %d with no error message", method, target, code)
		}
		// The daemon still answers.
		st := httptest.NewRecorder()
		handler.ServeHTTP(st, httptest.NewRequest(http.MethodGet, "http://ovnbgp"+api.PathStatus, nil))
		if st.Code != http.StatusOK {
			t.Fatalf("status after %s %s: %d %s", method, target, st.Code, st.Body)
		}
	})
}
