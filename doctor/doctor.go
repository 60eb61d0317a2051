package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/ovnbgp/ovnbgp/config"
)

// Status is the outcome of one check.
type Status string

// The outcomes, from best to worst (skip: the check does not apply here,
// or needs something that failed first).
const (
	Pass Status = "pass"
	Skip Status = "skip"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one finding.
type Result struct {
	// ID names the check (stable: scripts may match it), e.g. "bgp-port".
	ID     string `json:"id"`
	Status Status `json:"status"`
	// Finding says what was found, in one line.
	Finding string `json:"finding"`
	// Fix is the command or config key that fixes a warn or fail.
	Fix string `json:"fix,omitempty"`
}

// Report is every result, in the order the checks ran, with the counts and
// the exit code.
type Report struct {
	Checks []Result `json:"checks"`
	// Summary counts the results by status.
	Summary map[Status]int `json:"summary"`
	// ExitCode is 0 (all pass or skip), 1 (a warn, no fail) or 2 (a fail).
	ExitCode int `json:"exitCode"`
}

// Input is what the checks look at besides the Env.
type Input struct {
	// ConfigPath is the file the config came from (for the findings).
	ConfigPath string
	// Config is the parsed, validated config; nil when ConfigErr is set.
	// It is loaded without reading secrets (config.LoadOptions
	// SkipSecrets): the secrets check reads them.
	Config *config.Config
	// ConfigErr is why the config could not be loaded (the validator's
	// message): checks that need the config are skipped.
	ConfigErr error
	// Socket is the control socket to look for a running daemon on.
	Socket string
	// Timeout bounds each network step: the NB connection and the daemon's
	// socket (default 5s). IMDS has its own, short, timeout.
	Timeout time.Duration
}

// IMDSTimeout bounds the IMDSv2 token request that tells whether this is
// an EC2 instance: off AWS nothing answers, and doctor must not hang there.
const IMDSTimeout = 300 * time.Millisecond

// state is what one run shares between checks: what earlier checks found.
type state struct {
	in  Input
	env Env
	cfg *config.Config
	// daemon is the running daemon's view, nil when it does not answer.
	daemon *DaemonView
	// daemonErr is why the daemon did not answer.
	daemonErr error
	// nb is NB's view once read (northbound), nbErr why it could not be.
	nb    *NBView
	nbErr error
}

// northbound reads NB's view of this node once per run (within the
// timeout); every check that needs it shares the read.
func (s *state) northbound(ctx context.Context) (*NBView, error) {
	if s.nb == nil && s.nbErr == nil {
		nctx, cancel := context.WithTimeout(ctx, s.in.Timeout)
		defer cancel()
		v, err := s.env.Northbound(nctx, s.cfg.OVN, s.cfg.Node.Name)
		if err != nil {
			s.nbErr = err
		} else {
			s.nb = &v
		}
	}
	return s.nb, s.nbErr
}

// check is one check: a function of the shared state.
type check func(ctx context.Context, s *state) []Result

// Run runs every check against env and returns the report.
func Run(ctx context.Context, env Env, in Input) Report {
	if in.Timeout <= 0 {
		in.Timeout = 5 * time.Second
	}
	s := &state{in: in, env: env, cfg: in.Config}
	var out []Result
	out = append(out, checkConfig(s)...)
	if s.cfg != nil {
		sock := in.Socket
		if sock == "" {
			sock = s.cfg.Control.Socket
		}
		dctx, cancel := context.WithTimeout(ctx, in.Timeout)
		s.daemon, s.daemonErr = env.Daemon(dctx, sock)
		cancel()
	}
	for _, c := range []check{
		checkDaemon,
		checkSecrets,
		checkNB,
		checkPeerNextHops,
		checkPorts,
		checkForwarding,
		checkUnnumbered,
		checkRPFilter,
		checkVRFSupport,
		checkRouteProtocol,
		checkTables,
		checkAWS,
	} {
		out = append(out, c(ctx, s)...)
	}
	return NewReport(out)
}

// NewReport counts results and computes the exit code.
func NewReport(rs []Result) Report {
	r := Report{Checks: rs, Summary: map[Status]int{Pass: 0, Warn: 0, Fail: 0, Skip: 0}}
	for _, c := range rs {
		r.Summary[c.Status]++
	}
	switch {
	case r.Summary[Fail] > 0:
		r.ExitCode = 2
	case r.Summary[Warn] > 0:
		r.ExitCode = 1
	}
	return r
}

func pass(id, format string, args ...any) Result {
	return Result{ID: id, Status: Pass, Finding: fmt.Sprintf(format, args...)}
}

func skip(id, format string, args ...any) Result {
	return Result{ID: id, Status: Skip, Finding: fmt.Sprintf(format, args...)}
}

func warn(id, fix, format string, args ...any) Result {
	return Result{ID: id, Status: Warn, Finding: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(id, fix, format string, args ...any) Result {
	return Result{ID: id, Status: Fail, Finding: fmt.Sprintf(format, args...), Fix: fix}
}

// needConfig is the skip of a check that needs a valid config.
func needConfig(id string) []Result {
	return []Result{skip(id, "needs a valid config (see check config)")}
}

// checkConfig reports the config's validity.
func checkConfig(s *state) []Result {
	const id = "config"
	if s.in.ConfigErr != nil || s.cfg == nil {
		msg := "no config"
		if s.in.ConfigErr != nil {
			msg = s.in.ConfigErr.Error()
		}
		return []Result{fail(id, "fix the keys named, then `ovnbgp config validate "+s.in.ConfigPath+"`",
			"%s is not valid: %s", s.in.ConfigPath, oneLine(msg))}
	}
	c := s.cfg
	return []Result{pass(id, "%s is valid: node %s, AS %d, %d peers, %d advertise and %d import rules",
		s.in.ConfigPath, c.Node.Name, c.BGP.ASN, len(c.BGP.Peers), len(c.Advertise), len(c.Import))}
}

// checkDaemon says whether the daemon answers on its socket; other checks
// use its view when it does.
func checkDaemon(_ context.Context, s *state) []Result {
	const id = "daemon"
	if s.cfg == nil {
		return needConfig(id)
	}
	if s.daemon == nil {
		return []Result{skip(id, "the daemon does not answer on its control socket (%v): checks use the config alone", s.daemonErr)}
	}
	return []Result{pass(id, "the daemon answers on its control socket: %d peers", len(s.daemon.Peers))}
}
