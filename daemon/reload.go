package daemon

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/ovnbgp/ovnbgp/api"
)

// reloadHandlers adds POST /v1/reload (`ovnbgp reload`): root only, it
// re-reads the daemon's config file and applies it on the loop, exactly as
// SIGHUP does (the same parse, the same applyConfig), and answers with the
// outcome: 200 applied, with the sessions it reset and why; 422 refused,
// with the error, the running config kept.
func (d *Daemon) reloadHandlers(mux *http.ServeMux) {
	mux.HandleFunc("POST "+api.PathReload, func(w http.ResponseWriter, r *http.Request) {
		if !requireRoot(w, r, "reload") {
			return
		}
		out := make(chan api.ReloadResult, 1) // the loop never blocks on it
		select {
		case d.reloads <- out:
		case <-d.loopDone:
			replyError(w, http.StatusServiceUnavailable, errors.New("ovnbgp is stopping: its loop has ended"))
			return
		case <-r.Context().Done():
			return
		}
		select {
		case res := <-out:
			code := http.StatusOK
			if !res.Applied {
				code = http.StatusUnprocessableEntity
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(res)
		case <-d.loopDone:
			replyError(w, http.StatusServiceUnavailable, errors.New("ovnbgp stopped before the reload was done"))
		case <-r.Context().Done():
			// The client gave up; the reload goes on and the log says
			// how it ended.
		}
	})
}
