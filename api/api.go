// Package api is the control API between the ovnbgp daemon and its CLI: JSON
// over HTTP on a unix socket, so it is curl-able:
//
//	curl --unix-socket /run/ovnbgp/ovnbgp.sock http://ovnbgp/v1/peers
//
// It holds the paths, the response types and a Client. The server side lives
// in package daemon.
package api

import (
	"fmt"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/plan"
)

// The endpoints. All are GET unless noted.
const (
	PathStatus     = "/v1/status"
	PathPeers      = "/v1/peers"
	PathAdvertised = "/v1/routes/advertised" // ?peer=NAME&limit=N
	PathLearned    = "/v1/routes/learned"    // ?peer=NAME&rejected=true&limit=N
	PathConfig     = "/v1/config"            // effective config, secrets redacted
	PathNetworks   = "/v1/networks"          // this node's networks as read from OVN
	PathImported   = "/v1/routes/imported"   // ?network=NAME
	PathExplain    = "/v1/explain"           // ?prefix=PREFIX
	// PathPlan: GET is the plan now; POST a PlanRequest previews a new
	// config (root only: the config's secrets files are read as root).
	PathPlan = "/v1/plan"
	// PathReload: POST (no body) re-reads the daemon's config file and
	// applies it, exactly as SIGHUP does (root only); the answer is the
	// ReloadResult, status 200 when applied, 422 when refused.
	PathReload = "/v1/reload"
	// PathApply: POST a Plan (as `ovnbgp plan --out` saved it) to apply
	// its OVN and kernel operations (root only).
	PathApply = "/v1/apply"
	// PathDrain: POST a DrainRequest to drain (root only); the answer is
	// the DrainStatus. PathUndrain: POST an UndrainRequest (root only).
	PathDrain   = "/v1/drain"
	PathUndrain = "/v1/undrain"
)

// DrainRequest drains one peer or every peer (`ovnbgp drain`).
type DrainRequest struct {
	// Peer is a configured peer's name; "" = every peer.
	Peer string `json:"peer,omitempty"`
	// Wait is how long advertisements carry GRACEFUL_SHUTDOWN before they
	// are withdrawn; 0 withdraws at once, absent is DefaultDrainWait. Go
	// duration syntax in JSON ("30s").
	Wait *Duration `json:"wait,omitempty"`
}

// DefaultDrainWait is how long a drain keeps the routes tagged before it
// withdraws them when the request does not say (`ovnbgp drain` without
// --wait, or a POST without "wait").
const DefaultDrainWait = 30 * time.Second

// DrainWait is a DrainRequest's Wait for d.
func DrainWait(d time.Duration) *Duration {
	w := Duration(d)
	return &w
}

// UndrainRequest undrains one peer or, Peer "", everything
// (`ovnbgp undrain`).
type UndrainRequest struct {
	Peer string `json:"peer,omitempty"`
}

// DrainStatus is the drain state: each order as persisted, and each
// configured peer it drains with where it stands.
type DrainStatus struct {
	// Orders are the drain orders (Peer "" = every peer), as in
	// stateDir/drain.json.
	Orders []model.DrainedPeer `json:"orders"`
	// Peers are the configured peers drained, with their phase at Now.
	Peers []DrainedPeer `json:"peers"`
	// File is where the state is kept.
	File string    `json:"file"`
	Now  time.Time `json:"now"`
}

// DrainedPeer is one configured peer's drain.
type DrainedPeer struct {
	model.DrainedPeer
	Phase model.DrainPhase `json:"phase"`
}

// Duration is a time.Duration written as Go writes it ("30s") in JSON.
type Duration time.Duration

// MarshalText writes "30s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what time.ParseDuration reads.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("wait %q: %w (write e.g. 30s, 2m, 0s)", b, err)
	}
	*d = Duration(v)
	return nil
}

// PlanRequest asks for the plan a new config would give. The CLI reads the
// file and sends its text: the daemon may run sandboxed (PrivateTmp,
// ProtectHome) and not see the caller's files.
type PlanRequest struct {
	// Name names the config in error messages (the CLI sends the file's
	// path).
	Name string `json:"name"`
	// Text is the config document (YAML), at most config.MaxConfigSize
	// bytes. Files it names (passwordFile, ovn.tls) are read by the
	// daemon.
	Text string `json:"text"`
}

// ReloadResult is the outcome of a reload (`ovnbgp reload`, or SIGHUP in
// the log).
type ReloadResult struct {
	// Config is the file that was read.
	Config string `json:"config"`
	// Applied is true when the new config runs; false when it was
	// refused and the running config kept (Error says why).
	Applied bool   `json:"applied"`
	Error   string `json:"error,omitempty"`
	// SessionResets are the sessions the reload reset, each with why:
	// what `ovnbgp plan --config` predicted (config.SessionResets).
	SessionResets []config.SessionReset `json:"sessionResets"`
	// Added are the peers the reload added.
	Added []string `json:"added,omitempty"`
	// Warnings are changes not applied by a reload that was (keys that
	// need a restart, new OVN settings that failed).
	Warnings []string `json:"warnings,omitempty"`
}

// PlanResponse is what `ovnbgp plan` prints.
type PlanResponse struct {
	// Plan is every change ovnbgp would make now (with --config: what
	// the new config would make it do).
	Plan   plan.Plan   `json:"plan"`
	Counts plan.Counts `json:"counts"`
	// Manual counts the operations that wait for `ovnbgp apply` (import
	// rules in mode manual); the loop applies the others by itself.
	Manual plan.Counts `json:"manual"`
	// SessionResets (with --config) are the peers whose session the new
	// config would reset, each with why.
	SessionResets []config.SessionReset `json:"sessionResets,omitempty"`
	// Problems are the import problems (rules whose target receives
	// nothing, and why).
	Problems []string `json:"problems,omitempty"`
}

// ApplyResult is what `ovnbgp apply` did.
type ApplyResult struct {
	OVN    []model.OVNOp    `json:"ovn,omitempty"`
	Kernel []model.KernelOp `json:"kernel,omitempty"`
}

// Imported is `ovnbgp routes imported`: OVN and kernel side by side with
// the rule, and whether each is what the import rules want.
type Imported struct {
	OVN    []ImportedOVN    `json:"ovn"`
	Kernel []ImportedKernel `json:"kernel"`
}

// The states of an imported route.
const (
	// ImportInstalled: wanted and in place.
	ImportInstalled = "installed"
	// ImportMissing: wanted, not in place (Reason says why: a manual
	// rule waiting for apply, or the error of the last try).
	ImportMissing = "missing"
	// ImportStale: in place, no longer wanted (Reason: held by fail
	// static, or waiting for apply).
	ImportStale = "stale"
	// ImportDrift: in place with other next hops than wanted.
	ImportDrift = "drift"
)

// ImportedOVN is one static route ovnbgp owns or wants.
type ImportedOVN struct {
	model.OVNRoute
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// ImportedKernel is one kernel route ovnbgp owns or wants.
type ImportedKernel struct {
	model.KernelRoute
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// Want are the wanted next hops when State is drift.
	Want []model.NextHop `json:"want,omitempty"`
}

// Explanation is `ovnbgp explain PREFIX`.
type Explanation = plan.Explanation

// Route lists (advertised, learned) are streamed: a JSON array written item
// by item, so the daemon's memory does not grow with the answer. Their
// trailers say how the list ended.
const (
	// TrailerTruncated is "true" when the list stopped at limit=N items.
	TrailerTruncated = "Ovnbgp-Truncated"
	// TrailerError carries an error met after the first item was sent
	// (the status code was already 200); the list is then incomplete.
	TrailerError = "Ovnbgp-Error"
)

// The daemon's phases (Status.Phase). While the BGP speaker is being
// started (at startup, or when a reload restarts it), peers are reported
// in the state of the phase and the route lists answer 503 saying so.
const (
	PhaseStarting   = "starting"
	PhaseRunning    = "running"
	PhaseRestarting = "restarting"
	PhaseStopping   = "stopping"
)

// PeerStarting is a peer's state (Peer.State) while the speaker runs but
// the sessions have not been started yet: they start with the first plan
// from the OVN Northbound DB, or at the latest 15 s after startup (with
// graceful restart, bgp.gracefulRestart.restartTime), so that the first
// UPDATEs carry the whole table.
const PeerStarting = "starting"

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error"`
}

// Status is the daemon's health: what it runs, and the state of its sources.
type Status struct {
	Version    string    `json:"version"`
	Node       string    `json:"node"`
	ConfigFile string    `json:"configFile"`
	StartedAt  time.Time `json:"startedAt"`
	// Phase is starting, running, restarting (the speaker, on a reload)
	// or stopping.
	Phase string `json:"phase"`
	// Ready is true once the first reconcile with OVN data has run.
	Ready bool     `json:"ready"`
	NB    NBStatus `json:"northbound"`
	// Reconciles counts reconcile passes; LastReconcile is when the last
	// one ended and LastError what it reported ("" = all applied).
	Reconciles    uint64    `json:"reconciles"`
	LastReconcile time.Time `json:"lastReconcile,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	// ConfigError is the last failed reload ("" if the running config is
	// the file's content).
	ConfigError string `json:"configError,omitempty"`
	// NotApplied counts advertisements the speaker could not apply: each
	// keeps its last good state (or is not sent if new); `routes
	// advertised` lists them with their problem.
	NotApplied int `json:"notApplied,omitempty"`
	// Import summarises route import (absent without import rules).
	Import *ImportStatus `json:"import,omitempty"`
	// Drained are the configured peers drained (`ovnbgp drain`): since
	// when, when the withdraw happens, and where each stands.
	Drained []DrainedPeer `json:"drained,omitempty"`
	// BMP are the BMP stations configured (bmp.servers), up or not.
	BMP []model.BMPStation `json:"bmp,omitempty"`
	// SessionRepairs counts the speaker's session-start repairs (absent
	// while no speaker runs).
	SessionRepairs *model.SessionRepairs `json:"sessionRepairs,omitempty"`
}

// ImportStatus summarises route import.
type ImportStatus struct {
	// Accepted counts learned paths an import rule accepts, Rejected the
	// others.
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	// OVN and Kernel count the routes wanted in each target.
	OVN    int `json:"ovn"`
	Kernel int `json:"kernel"`
	// Manual counts operations waiting for `ovnbgp apply`, Held those
	// fail static holds back (until End-of-RIB or deferralTime).
	Manual int `json:"manual,omitempty"`
	Held   int `json:"held,omitempty"`
	// Alarms are the import caps reached; Problems the rules whose
	// target receives nothing, and why.
	Alarms   []string `json:"alarms,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// NBStatus is the state of the OVN Northbound connection.
type NBStatus struct {
	// Endpoint is what is dialled: ovn.northbound, or the sockets found
	// while it is unset ("" when none was found).
	Endpoint string `json:"endpoint"`
	// Source is "configured" (ovn.northbound) or "discovered" (found
	// among ovn.northboundSockets).
	Source string `json:"source,omitempty"`
	// Tried is, when discovered, every socket path looked at, in order,
	// and what was there ("socket", "absent", "not a socket").
	Tried []NBTried `json:"tried,omitempty"`
	// Current is the member of a clustered NB in use ("" = Endpoint).
	Current   string    `json:"current,omitempty"`
	Connected bool      `json:"connected"`
	Synced    bool      `json:"synced"`
	Since     time.Time `json:"since,omitzero"`
	// LastError is what ended the last session or failed the last attempt;
	// "" while connected (cleared on every successful connect).
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Attempts counts failed connection attempts since the last session;
	// losing a live session is not one, so it is 0 right after a disconnect.
	Attempts int `json:"attempts,omitempty"`
	// Problems lists NB rows of unexpected shape that were skipped.
	Problems []string `json:"problems,omitempty"`
	// Northd is the version of ovn-northd NB gives (NB_Global
	// options:northd_internal_version); nil before a first sync.
	Northd *model.NorthdVersion `json:"northd,omitempty"`
}

// NBTried is one NB socket path looked at, and what was there.
type NBTried struct {
	Path  string `json:"path"`
	State string `json:"state"`
}

// LearnedRoute is a path a peer sent, with the import verdict.
type LearnedRoute = model.LearnedPath

// Peer is a peer's live status.
type Peer = model.PeerStatus

// Advertised is one prefix advertised to one peer, with the rule and OVN
// object behind it.
type Advertised = model.Advertisement
