package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestImportAttrMatches: accept entries read communities, large
// communities, AS path matches and a metric, and rejectCommunities reads
// both kinds, through the one parser of each (issue 21, items 3 and 4).
func TestImportAttrMatches(t *testing.T) {
	c := mustParse(t, baseDoc+importDoc(
		"      - {prefix: 10.0.0.0/8, maxLength: 24, communities: [\"65001:100\", no-export], largeCommunities: [\"64512:1:100\"], asPathContains: [65010, 65020], originAS: 65030, metric: 20}\n",
		"    rejectCommunities: [blackhole, \"65001:666\", \"64512:0:666\"]\n"))
	m := c.Import[0].Accept[0]
	if len(m.Communities) != 2 || m.Communities[0] != 65001<<16|100 || m.Communities[1] != 0xFFFFFF01 {
		t.Errorf("communities = %v", m.Communities)
	}
	if len(m.LargeCommunities) != 1 || m.LargeCommunities[0] != (model.LargeCommunity{ASN: 64512, Data1: 1, Data2: 100}) {
		t.Errorf("largeCommunities = %v", m.LargeCommunities)
	}
	if len(m.ASPathContains) != 2 || m.ASPathContains[1] != 65020 || m.OriginAS != 65030 || m.Metric != 20 {
		t.Errorf("entry = %+v", m)
	}
	want := "10.0.0.0/8 length 8..24 communities [65001:100 no-export] largeCommunities [64512:1:100] asPathContains [65010 65020] originAS 65030 metric 20"
	if m.String() != want {
		t.Errorf("String = %q, want %q", m.String(), want)
	}
	rc := c.Import[0].RejectCommunities
	if len(rc) != 3 || rc[0].Large || rc[0].Community != 0xFFFF029A || rc[1].Community != 65001<<16|666 ||
		!rc[2].Large || rc[2].LargeCommunity != (model.LargeCommunity{ASN: 64512, Data1: 0, Data2: 666}) {
		t.Errorf("rejectCommunities = %+v", rc)
	}
	j, _ := json.Marshal(c.Import[0])
	if !strings.Contains(string(j), `"rejectCommunities":["blackhole","65001:666","64512:0:666"]`) {
		t.Errorf("JSON: %s", j)
	}
	var back ImportRule
	if err := json.Unmarshal(j, &back); err != nil || len(back.RejectCommunities) != 3 || back.RejectCommunities[2] != rc[2] {
		t.Errorf("JSON does not read back: %v %+v", err, back)
	}
	// a deep copy
	d := c.clone()
	d.Import[0].Accept[0].Communities[0] = 1
	d.Import[0].RejectCommunities[0].Community = 1
	if c.Import[0].Accept[0].Communities[0] == 1 || c.Import[0].RejectCommunities[0].Community == 1 {
		t.Error("clone shares the import rule's community lists")
	}
}

// TestImportAttrMatchErrors: wrong values name the key and the fix.
func TestImportAttrMatchErrors(t *testing.T) {
	errs := parseErrors(t, baseDoc+importDoc(
		"      - {prefix: 10.0.0.0/8, maxLength: 24, communities: [\"65001:100\", \"65001:100\"], asPathContains: [0]}\n"+
			"      - {prefix: 10.0.0.0/8, maxLength: 24, communities: [\"65001:666\"]}\n",
		"    rejectCommunities: [\"65001:666\", \"65001:666\"]\n"), fakeHost(nil))
	checkErrors(t, errs,
		want{"import[0].accept[0].communities[1]", "65001:100 is listed twice", 0},
		want{"import[0].accept[0].asPathContains[0]", "AS 0 is never in an imported path", 0},
		want{"import[0].accept[1]", "requires only 65001:666, which rejectCommunities rejects", 0},
		want{"import[0].rejectCommunities[1]", "65001:666 is listed twice", 0})
	errs = parseErrors(t, baseDoc+importDoc(acceptTen, "    rejectCommunities: [\"65001:70000\"]\n"), fakeHost(nil))
	checkErrors(t, errs, want{"import[0].rejectCommunities[0]", "is not a community: write ASN:VALUE", 0})
	errs = parseErrors(t, baseDoc+importDoc("      - {prefix: 10.0.0.0/8, largeCommunities: [\"1:2\"]}\n", ""), fakeHost(nil))
	checkErrors(t, errs, want{"import[0].accept[0].largeCommunities[0]", "is not a large community: write A:B:C", 0})
}
