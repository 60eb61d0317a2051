//go:build ovnbgp_pprof

package main

import (
	"net/http"
	_ "net/http/pprof" // the profiling handlers, on http.DefaultServeMux
	"os"
)

// Built only with `-tags ovnbgp_pprof` (bench/README.md, "Profiling"):
// OVNBGP_PPROF=127.0.0.1:6060 serves net/http/pprof there, for profiling
// the daemon while a benchmark drives it. Never in a release build.
func init() {
	if addr := os.Getenv("OVNBGP_PPROF"); addr != "" {
		go func() { _ = http.ListenAndServe(addr, nil) }()
	}
}
