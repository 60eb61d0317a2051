package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"gopkg.in/yaml.v3"
)

// Peer returns the peer called name.
func (c *Config) Peer(name string) (Peer, bool) {
	for _, p := range c.BGP.Peers {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// SpeakerChanged reports whether going from old to c needs the BGP speaker
// to restart: the ASN, router ID, listen port or graceful-restart settings
// differ (or there is no old config); gobgp negotiates graceful restart per
// session from the global settings, so a change reaches peers only through
// new sessions. Everything else is applied to the running speaker, including
// gracefulRestart.deferralTime and stalePathTime, which only the reconcile
// loop reads.
func (c *Config) SpeakerChanged(old *Config) bool {
	if old == nil {
		return true
	}
	return c.BGP.ASN != old.BGP.ASN ||
		c.BGP.RouterID != old.BGP.RouterID ||
		c.BGP.ListenPort != old.BGP.ListenPort ||
		c.BGP.GracefulRestart.Enabled != old.BGP.GracefulRestart.Enabled ||
		c.BGP.GracefulRestart.RestartTime != old.BGP.GracefulRestart.RestartTime
}

// RedactedPassword stands for a password in printed configurations.
const RedactedPassword = "(redacted)"

// Redacted returns a deep copy that is safe to print: every Password is
// cleared and its peer marked PasswordRedacted (passwordFile paths stay), so marshalled
// output shows `password: (redacted)`.
func (c *Config) Redacted() *Config {
	if c == nil {
		return nil
	}
	r := c.clone()
	for i := range r.BGP.Peers {
		if p := &r.BGP.Peers[i]; p.Password != "" {
			p.Password = ""
			p.PasswordRedacted = true
		}
	}
	return r
}

// clone deep-copies c: no slice is shared with the original.
func (c *Config) clone() *Config {
	r := *c
	r.BGP.Peers = slices.Clone(c.BGP.Peers)
	for i := range r.BGP.Peers {
		r.BGP.Peers[i].Families = slices.Clone(r.BGP.Peers[i].Families)
	}
	r.Advertise = slices.Clone(c.Advertise)
	for i := range r.Advertise {
		a := &r.Advertise[i]
		a.Networks = slices.Clone(a.Networks)
		a.Namespaces = slices.Clone(a.Namespaces)
		a.Services = slices.Clone(a.Services)
		a.Peers = slices.Clone(a.Peers)
		a.Communities = slices.Clone(a.Communities)
		a.LargeCommunities = slices.Clone(a.LargeCommunities)
	}
	r.Import = slices.Clone(c.Import)
	for i := range r.Import {
		r.Import[i].Peers = slices.Clone(r.Import[i].Peers)
		r.Import[i].Accept = slices.Clone(r.Import[i].Accept)
		r.Import[i].RejectCommunities = slices.Clone(r.Import[i].RejectCommunities)
		for j := range r.Import[i].Accept {
			m := &r.Import[i].Accept[j]
			m.Communities = slices.Clone(m.Communities)
			m.LargeCommunities = slices.Clone(m.LargeCommunities)
			m.ASPathContains = slices.Clone(m.ASPathContains)
		}
	}
	r.ProtectedPrefixes = slices.Clone(c.ProtectedPrefixes)
	r.Cluster.ServiceCIDRs = slices.Clone(c.Cluster.ServiceCIDRs)
	return &r
}

// passwordMarker is what marshalled output shows for the password: the
// marker if the peer has (or had, before Redacted) one, else nothing.
func (p Peer) passwordMarker() string {
	if p.Password != "" || p.PasswordRedacted {
		return RedactedPassword
	}
	return ""
}

// Format prints a Peer for the fmt verbs (%v, %+v, %s, ...) with its
// password replaced by RedactedPassword, so that logging a Peer or a Config
// never shows the secret.
func (p Peer) Format(f fmt.State, verb rune) {
	type plain Peer // no methods: no recursion
	q := plain(p)
	if q.Password != "" {
		q.Password = RedactedPassword
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), q)
}

// MarshalYAML writes durations as "90s" and, in place of the password,
// `password: (redacted)` when the peer has one.
func (p Peer) MarshalYAML() (any, error) {
	type plain Peer
	n, err := textNode(plain(p))
	if err != nil {
		return nil, err
	}
	if m := p.passwordMarker(); m != "" {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "password"},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: m})
	}
	return n, nil
}

// MarshalJSON is MarshalYAML's output as JSON: same keys, same order.
func (p Peer) MarshalJSON() ([]byte, error) { return jsonOf(p) }

// MarshalYAML writes durations as "300ms".
func (b BFD) MarshalYAML() (any, error) {
	type plain BFD
	return textNode(plain(b))
}

// MarshalJSON is MarshalYAML's output as JSON.
func (b BFD) MarshalJSON() ([]byte, error) { return jsonOf(b) }

// MarshalYAML writes the hold time as "5s".
func (h Handover) MarshalYAML() (any, error) {
	type plain Handover
	return textNode(plain(h))
}

// MarshalJSON is MarshalYAML's output as JSON.
func (h Handover) MarshalJSON() ([]byte, error) { return jsonOf(h) }

// MarshalYAML writes the restart time as "120s".
func (g GracefulRestart) MarshalYAML() (any, error) {
	type plain GracefulRestart
	return textNode(plain(g))
}

// MarshalJSON is MarshalYAML's output as JSON.
func (g GracefulRestart) MarshalJSON() ([]byte, error) { return jsonOf(g) }

// textNode encodes struct v as a YAML mapping whose time.Duration fields
// read as they are written in the file ("90s", "300ms") rather than
// time.Duration.String's "1m30s".
func textNode(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	rv := reflect.ValueOf(v)
	for _, f := range yamlFields(rv.Type()) {
		if rv.Field(f.index).Type() != durationType {
			continue
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == f.key {
				d := time.Duration(rv.Field(f.index).Int())
				n.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: durationText(d)}
			}
		}
	}
	return &n, nil
}

// durationText writes d in the largest of s and ms that is exact.
func durationText(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
	return d.String()
}

// jsonOf marshals v's MarshalYAML node as JSON, so both encodings agree.
func jsonOf(v yaml.Marshaler) ([]byte, error) {
	n, err := v.MarshalYAML()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := writeJSON(&b, n.(*yaml.Node)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON writes a YAML node tree made by yaml.Node.Encode as JSON.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(b, n.Content[0])
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float", "!!bool":
			b.WriteString(n.Value)
		case "!!null":
			b.WriteString("null")
		default:
			s, _ := json.Marshal(n.Value)
			b.Write(s)
		}
	default:
		return fmt.Errorf("cannot write YAML node kind %d as JSON", n.Kind)
	}
	return nil
}

// ImportRule returns the import rule called name.
func (c *Config) ImportRule(name string) (ImportRule, bool) {
	for _, r := range c.Import {
		if r.Name == name {
			return r, true
		}
	}
	return ImportRule{}, false
}

// Lengths returns the accepted prefix lengths [lo, hi], 0 meaning the
// covering prefix's own length.
func (m PrefixMatch) Lengths() (lo, hi int) {
	lo, hi = m.MinLength, m.MaxLength
	if lo == 0 {
		lo = m.Prefix.Bits()
	}
	if hi == 0 {
		hi = m.Prefix.Bits()
	}
	return lo, hi
}

// Matches reports whether p is inside the entry's prefix (same family)
// with a length in [lo, hi].
func (m PrefixMatch) Matches(p netip.Prefix) bool {
	lo, hi := m.Lengths()
	return m.Prefix.IsValid() && p.IsValid() && p.Addr().Is4() == m.Prefix.Addr().Is4() &&
		p.Bits() >= m.Prefix.Bits() && m.Prefix.Contains(p.Addr()) && p.Bits() >= lo && p.Bits() <= hi
}

// String writes the entry as "10.0.0.0/8 length 8..24", followed by its
// attribute matches and metric when it has them ("10.0.0.0/8 length 24
// communities [65001:100] metric 20").
func (m PrefixMatch) String() string {
	lo, hi := m.Lengths()
	s := fmt.Sprintf("%s length %d..%d", m.Prefix, lo, hi)
	if lo == hi {
		s = fmt.Sprintf("%s length %d", m.Prefix, lo)
	}
	if len(m.Communities) > 0 {
		s += " communities [" + strings.Join(model.Strings(m.Communities), " ") + "]"
	}
	if len(m.LargeCommunities) > 0 {
		s += " largeCommunities [" + strings.Join(model.Strings(m.LargeCommunities), " ") + "]"
	}
	if len(m.ASPathContains) > 0 {
		s += " asPathContains " + ASNList(m.ASPathContains)
	}
	if m.OriginAS != 0 {
		s += fmt.Sprintf(" originAS %d", m.OriginAS)
	}
	if m.Metric != 0 {
		s += fmt.Sprintf(" metric %d", m.Metric)
	}
	return s
}

// HasAttrMatch reports whether the entry requires something of a path
// besides its prefix.
func (m PrefixMatch) HasAttrMatch() bool {
	return len(m.Communities) > 0 || len(m.LargeCommunities) > 0 || len(m.ASPathContains) > 0 || m.OriginAS != 0
}

// ASNList writes ASNs as "[65001 65002]".
func ASNList(asns []uint32) string {
	s := make([]string, len(asns))
	for i, a := range asns {
		s[i] = strconv.FormatUint(uint64(a), 10)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// Family is the address family of the entry's prefix.
func (m PrefixMatch) Family() Family { return familyOf(m.Prefix.Addr()) }
