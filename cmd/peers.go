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
	row(w, "PEER", "ADDRESS", "ASN", "STATE", "FOR", "BFD", "EXT NH", "RECEIVED", "ACCEPTED", "ADVERTISED", "HELD BACK", "DRAIN", "IMPORTED", "LAST ERROR", "IMPORT ALARM")
	for _, p := range peers {
		var rcv, acc, adv []string
		for _, f := range p.Families {
			rcv = append(rcv, fmt.Sprintf("%s:%d", f.Family, f.Received))
			acc = append(acc, fmt.Sprintf("%s:%d", f.Family, f.Accepted))
			if f.Withheld != "" {
				adv = append(adv, f.Family+":withheld")
			} else {
				adv = append(adv, fmt.Sprintf("%s:%d", f.Family, f.Advertised))
			}
		}
		row(w, p.Name, addressColumn(p), p.ASN, p.State, ago(p.Since), bfdColumn(p.BFD), extNHColumn(p), dash(strings.Join(rcv, " ")),
			dash(strings.Join(acc, " ")), dash(strings.Join(adv, " ")), dashZero(p.HeldBack), dash(string(p.Drain)), p.Imported, lastError(p), dash(p.ImportAlarm))
	}
}

// addressColumn is the peer's address; for a peer on a link, with the
// link, and how the address was learned (or that it is not yet).
func addressColumn(p model.PeerStatus) string {
	switch {
	case p.Interface == "":
		return p.Address.String()
	case !p.Address.IsValid():
		return p.Interface + " (unnumbered: no neighbour learned yet)"
	case p.Learned != "":
		return p.Address.String() + " (" + p.Learned + ")"
	}
	return p.Address.String()
}

// extNHColumn says whether an Established IPv6 session carries IPv4
// (the extended next hop capability, RFC 8950): "-" where it does not
// apply.
func extNHColumn(p model.PeerStatus) string {
	if p.State != model.StateEstablished {
		return "-"
	}
	for _, f := range p.Families {
		if f.Family == "ipv4" && f.Negotiated && (p.Interface != "" || p.Address.Is6()) {
			if p.ExtendedNextHop {
				return "yes"
			}
			return "no"
		}
	}
	return "-"
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
