package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
)

func newPeersCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "peers",
		Short: "Show BGP peers: state, uptime, prefix counts, last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			peers, err := api.NewClient(o.socket).Peers(cmd.Context())
			if err != nil {
				return err
			}
			return render(o.stdout, o.output, peers, func(w *tabwriter.Writer) { peersTable(w, peers) })
		},
	}
}

func peersTable(w *tabwriter.Writer, peers []model.PeerStatus) {
	row(w, "PEER", "ADDRESS", "ASN", "STATE", "FOR", "BFD", "RECEIVED", "ACCEPTED", "ADVERTISED", "HELD BACK", "DRAIN", "IMPORTED", "LAST ERROR", "IMPORT ALARM")
	for _, p := range peers {
		var rcv, acc, adv []string
		for _, f := range p.Families {
			rcv = append(rcv, fmt.Sprintf("%s:%d", f.Family, f.Received))
			acc = append(acc, fmt.Sprintf("%s:%d", f.Family, f.Accepted))
			adv = append(adv, fmt.Sprintf("%s:%d", f.Family, f.Advertised))
		}
		row(w, p.Name, p.Address, p.ASN, p.State, ago(p.Since), bfdColumn(p.BFD), dash(strings.Join(rcv, " ")),
			dash(strings.Join(acc, " ")), dash(strings.Join(adv, " ")), dashZero(p.HeldBack), dash(string(p.Drain)), p.Imported, lastError(p), dash(p.ImportAlarm))
	}
}

// lastError is the peer's last error with its age; one older than the
// Established session is marked as past.
func lastError(p model.PeerStatus) string {
	if p.LastError == "" {
		return "-"
	}
	s := p.LastError
	if !p.LastErrorAt.IsZero() {
		s += " (" + ago(p.LastErrorAt) + " ago)"
		if p.State == model.StateEstablished && p.LastErrorAt.Before(p.Since) {
			s = "before this session: " + s
		}
	}
	return s
}

// bfdColumn is the peer's BFD state, "off" when BFD is not enabled.
func bfdColumn(b *model.BFDStatus) string {
	if b == nil {
		return string(model.BFDOff)
	}
	return string(b.State)
}

// dashZero is n, or "-" for 0.
func dashZero(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}
