package cmd

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

func newStatusCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's health: OVN Northbound connection, reconciles, config errors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := api.NewClient(o.socket).Status(cmd.Context())
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, st, func(w *tabwriter.Writer) {
				row(w, "version", st.Version)
				row(w, "node", st.Node)
				row(w, "config", st.ConfigFile)
				row(w, "up for", ago(st.StartedAt))
				row(w, "phase", dash(st.Phase))
				row(w, "ready", st.Ready)
				conn := "disconnected"
				if st.NB.Connected {
					conn = "connected"
				}
				row(w, "northbound", fmt.Sprintf("%s %s for %s (synced: %v)", nbEndpoint(st.NB), conn, ago(st.NB.Since), st.NB.Synced))
				if len(st.NB.Tried) > 0 {
					row(w, "northbound tried", nbTried(st.NB.Tried))
				}
				if st.NB.LastError != "" {
					row(w, "northbound error", nbError(st.NB))
				}
				if st.NB.Northd != nil {
					row(w, "northd", northdText(*st.NB.Northd))
				}
				for _, p := range st.NB.Problems {
					row(w, "skipped NB row", p)
				}
				row(w, "reconciles", fmt.Sprintf("%d, last %s ago", st.Reconciles, ago(st.LastReconcile)))
				row(w, "last error", dash(st.LastError))
				if st.NotApplied > 0 {
					row(w, "not applied", fmt.Sprintf("%d advertisements (see ovnbgp routes advertised)", st.NotApplied))
				}
				row(w, "config error", dash(st.ConfigError))
				if len(st.Drained) == 0 {
					row(w, "drained", "-")
				}
				for _, p := range st.Drained {
					row(w, "drained", fmt.Sprintf("peer %s: %s since %s, %s", p.Peer, p.Phase, p.Since.Local().Format(time.RFC3339), withdrawText(p, time.Now())))
				}
				for _, b := range st.BMP {
					row(w, "bmp", bmpText(b))
				}
				if r := st.SessionRepairs; r != nil {
					row(w, "session start repairs", repairText(*r))
				}
			})
		},
	}
}

// repairText is the session-start repairs' line: how many, and the last.
func repairText(r model.SessionRepairs) string {
	out := fmt.Sprintf("%d of %d sessions checked", r.Repairs, r.Checks)
	if l := r.Last; l != nil {
		out += fmt.Sprintf("; last: peer %s %s ago, %d paths put back, soft reset out %v, %d removed again",
			l.Peer, ago(l.At), l.PutBack, l.SoftReset, l.Removed)
		if l.Error != "" {
			out += " (" + l.Error + ")"
		}
	}
	return out
}

// bmpText is one BMP station's line: up or down, and for how long.
func bmpText(b model.BMPStation) string {
	state := "down"
	if b.Up {
		state = "up"
	}
	if b.Since.IsZero() {
		if !b.Up {
			return fmt.Sprintf("%s %s: down, never connected (ovnbgp keeps dialing)", b.Name, b.Station)
		}
		return fmt.Sprintf("%s %s: %s", b.Name, b.Station, state)
	}
	return fmt.Sprintf("%s %s: %s for %s", b.Name, b.Station, state, ago(b.Since))
}

// nbEndpoint is what NB endpoints are dialled, where they come from, and
// the member in use when that is not all of them:
// "unix:/var/run/ovn-ic/ovnnb_db.sock (discovered)".
func nbEndpoint(nb api.NBStatus) string {
	ep := nb.Endpoint
	if ep == "" {
		ep = "no socket found"
	}
	if nb.Source != "" {
		ep += " (" + nb.Source + ")"
	}
	if nb.Current != "" && nb.Current != nb.Endpoint {
		ep += ", using " + nb.Current
	}
	return ep
}

// northdText is northd's release, the option it comes from, and where an
// IPv4 route via an IPv6 next hop goes.
func northdText(v model.NorthdVersion) string {
	var s string
	switch {
	case v.Known():
		s = fmt.Sprintf("%s (options:northd_internal_version %s)", v, v.Raw)
	case v.Raw == "":
		s = "unknown (NB_Global has no options:northd_internal_version)"
	default:
		s = fmt.Sprintf("unknown (options:northd_internal_version %q)", v.Raw)
	}
	if v.MixedFamilyRoutes() {
		return s + "; OVN takes IPv4 routes via IPv6 next hops"
	}
	return s + "; IPv4 routes via IPv6 next hops go to a kernel target only (northd before OVN 25.03 ignores them)"
}

// nbTried lists the socket paths looked at and what was there.
func nbTried(tried []api.NBTried) string {
	parts := make([]string, len(tried))
	for i, t := range tried {
		parts[i] = t.Path + " (" + t.State + ")"
	}
	return strings.Join(parts, ", ")
}

// nbError says what went wrong with NB, when, and how many reconnect
// attempts failed since.
func nbError(nb api.NBStatus) string {
	s := nb.LastError
	if !nb.LastErrorAt.IsZero() {
		s += fmt.Sprintf(" (%s ago)", ago(nb.LastErrorAt))
	}
	switch nb.Attempts {
	case 0:
	case 1:
		s += "; 1 failed attempt since the last session"
	default:
		s += fmt.Sprintf("; %d failed attempts since the last session", nb.Attempts)
	}
	return s
}
