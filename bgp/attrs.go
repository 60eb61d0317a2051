package bgp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/ovnbgp/ovnbgp/model"
)

// normAttrs are PathAttrs parsed and in canonical order, so that equal
// attribute sets share one export statement whatever order or spelling
// the rules used.
type normAttrs struct {
	communities []uint32
	large       []bgppkt.LargeCommunity
	localPref   uint32
	med         uint32
	prepend     uint8
}

func normalize(a model.PathAttrs) (normAttrs, error) {
	n := normAttrs{localPref: a.LocalPreference, med: a.MED, prepend: a.ASPathPrepend}
	for _, c := range a.Communities {
		v, err := parseCommunity(c)
		if err != nil {
			return normAttrs{}, err
		}
		n.communities = append(n.communities, v)
	}
	slices.Sort(n.communities)
	n.communities = slices.Compact(n.communities)
	for _, c := range a.LargeCommunities {
		v, err := bgppkt.ParseLargeCommunity(strings.TrimSpace(c))
		if err != nil {
			return normAttrs{}, fmt.Errorf("large community %q: want ASN:DATA1:DATA2: %w", c, err)
		}
		n.large = append(n.large, *v)
	}
	slices.SortFunc(n.large, compareLarge)
	n.large = slices.Compact(n.large)
	return n, nil
}

func compareLarge(a, b bgppkt.LargeCommunity) int {
	switch {
	case a.ASN != b.ASN:
		return cmpU32(a.ASN, b.ASN)
	case a.LocalData1 != b.LocalData1:
		return cmpU32(a.LocalData1, b.LocalData1)
	}
	return cmpU32(a.LocalData2, b.LocalData2)
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseCommunity reads "65001:100", a well-known name ("no-export") or a
// plain 32-bit number.
func parseCommunity(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	if v, ok := bgppkt.WellKnownCommunityValueMap[strings.ToLower(s)]; ok {
		return uint32(v), nil
	}
	if hi, lo, ok := strings.Cut(s, ":"); ok {
		h, err1 := strconv.ParseUint(hi, 10, 16)
		l, err2 := strconv.ParseUint(lo, 10, 16)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("community %q: want ASN:VALUE with 16-bit numbers", s)
		}
		return uint32(h)<<16 | uint32(l), nil
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("community %q: want ASN:VALUE, a well-known name or a 32-bit number", s)
	}
	return uint32(v), nil
}

// communityStrings renders communities as gobgp's policy actions parse them.
func (n normAttrs) communityStrings() []string {
	out := make([]string, 0, len(n.communities))
	for _, c := range n.communities {
		out = append(out, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
	}
	return out
}

func (n normAttrs) largeStrings() []string {
	out := make([]string, 0, len(n.large))
	for _, c := range n.large {
		out = append(out, fmt.Sprintf("%d:%d:%d", c.ASN, c.LocalData1, c.LocalData2))
	}
	return out
}

// key is the canonical identity of the attribute set.
func (n normAttrs) key() string {
	return fmt.Sprintf("c=%s;l=%s;lp=%d;med=%d;pp=%d",
		strings.Join(n.communityStrings(), ","), strings.Join(n.largeStrings(), ","), n.localPref, n.med, n.prepend)
}

// attrs renders n back in ovnbgp's vocabulary.
func (n normAttrs) attrs() model.PathAttrs {
	a := model.PathAttrs{LocalPreference: n.localPref, MED: n.med, ASPathPrepend: n.prepend}
	for _, c := range n.communities {
		a.Communities = append(a.Communities, formatCommunity(c))
	}
	if len(n.large) > 0 {
		a.LargeCommunities = n.largeStrings()
	}
	return a
}

// formatCommunity prints a well-known community by name, others as A:B.
func formatCommunity(c uint32) string {
	if name, ok := bgppkt.WellKnownCommunityNameMap[bgppkt.WellKnownCommunity(c)]; ok {
		return name
	}
	return fmt.Sprintf("%d:%d", c>>16, c&0xffff)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
