package bgp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
)

// normAttrs are PathAttrs in canonical order, so that equal attribute sets
// share one export statement whatever order the rules used. The values
// are already parsed (config parses them when it loads the file): nothing
// here parses a string, so nothing here can fail.
type normAttrs struct {
	communities []model.Community
	large       []model.LargeCommunity
	localPref   uint32
	// localPrefSet: localPref is sent even when 0 (a drained iBGP peer).
	localPrefSet bool
	med          uint32
	prepend      uint8
	// linkBW: the link-bandwidth community, when linkBWSet.
	linkBW    model.LinkBandwidth
	linkBWSet bool
}

func normalize(a model.PathAttrs) normAttrs {
	n := normAttrs{med: a.MED, prepend: a.ASPathPrepend}
	if a.LocalPreference != nil {
		n.localPref, n.localPrefSet = *a.LocalPreference, true
	}
	if a.LinkBandwidth != nil {
		n.linkBW, n.linkBWSet = *a.LinkBandwidth, true
	}
	n.communities = slices.Compact(slices.Sorted(slices.Values(a.Communities)))
	n.large = slices.Clone(a.LargeCommunities)
	slices.SortFunc(n.large, model.LargeCommunity.Compare)
	n.large = slices.Compact(n.large)
	return n
}

// communityStrings renders communities as numbers "A:B", which gobgp's
// policy actions parse for every value (its name table lacks some
// well-known communities, graceful-shutdown among them).
func (n normAttrs) communityStrings() []string {
	out := make([]string, 0, len(n.communities))
	for _, c := range n.communities {
		out = append(out, fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xffff))
	}
	return out
}

func (n normAttrs) largeStrings() []string {
	return model.Strings(n.large)
}

// key is the canonical identity of the attribute set.
func (n normAttrs) key() string {
	lp := "-"
	if n.localPrefSet {
		lp = fmt.Sprint(n.localPref)
	}
	k := fmt.Sprintf("c=%s;l=%s;lp=%s;med=%d;pp=%d",
		strings.Join(n.communityStrings(), ","), strings.Join(n.largeStrings(), ","), lp, n.med, n.prepend)
	if n.linkBWSet {
		// only then, so that the keys (and group names) of the
		// attribute sets without it stay what they were
		k += ";lb=" + n.linkBW.String()
	}
	return k
}

// attrs renders n back in ovnbgp's vocabulary.
func (n normAttrs) attrs() model.PathAttrs {
	a := model.PathAttrs{MED: n.med, ASPathPrepend: n.prepend}
	if n.localPrefSet {
		a.LocalPreference = new(n.localPref)
	}
	if n.linkBWSet {
		a.LinkBandwidth = new(n.linkBW)
	}
	if len(n.communities) > 0 {
		a.Communities = slices.Clone(n.communities)
	}
	if len(n.large) > 0 {
		a.LargeCommunities = slices.Clone(n.large)
	}
	return a
}

// formatCommunity prints a community as config reads it: a well-known one
// by name (model.WellKnownCommunities), others as A:B.
func formatCommunity(c uint32) string {
	return model.Community(c).String()
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}
