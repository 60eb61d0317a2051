package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestCommunities: config reads every accepted community form into the
// typed value the BGP layer sends, with IANA's values, and prints it back
// as written.
func TestCommunities(t *testing.T) {
	values := map[string]model.Community{
		"graceful-shutdown":   0xFFFF0000,
		"accept-own":          0xFFFF0001,
		"no-llgr":             0xFFFF0007,
		"blackhole":           0xFFFF029A,
		"no-export":           0xFFFFFF01,
		"no-advertise":        0xFFFFFF02,
		"no-export-subconfed": 0xFFFFFF03,
		"no-peer":             0xFFFFFF04,
		"65001:100":           65001<<16 | 100,
		"0:0":                 0,
		"65535:65535":         0xFFFFFFFF,
	}
	var list []string
	for s := range values {
		list = append(list, `"`+s+`"`)
	}
	c := mustParse(t, edit(t, afterPods, afterPods+"    communities: ["+strings.Join(list, ", ")+"]\n    largeCommunities: [\"4294967295:0:1\"]\n"))
	r := c.Advertise[0]
	for i, s := range list {
		s = strings.Trim(s, `"`)
		if r.Communities[i] != values[s] {
			t.Errorf("%s = %#x, want %#x", s, uint32(r.Communities[i]), uint32(values[s]))
		}
		if got := r.Communities[i].String(); got != s && s != "0:0" && s != "65535:65535" {
			t.Errorf("%s prints as %q", s, got)
		}
	}
	if r.LargeCommunities[0] != (model.LargeCommunity{ASN: 4294967295, Data1: 0, Data2: 1}) {
		t.Errorf("large community = %+v", r.LargeCommunities[0])
	}
	// config show prints them as written.
	j, _ := json.Marshal(r)
	if !strings.Contains(string(j), `"graceful-shutdown"`) || !strings.Contains(string(j), `"largeCommunities":["4294967295:0:1"]`) {
		t.Errorf("JSON: %s", j)
	}
	var back AdvertiseRule
	if err := json.Unmarshal(j, &back); err != nil || len(back.Communities) != len(r.Communities) || back.Communities[0] != r.Communities[0] {
		t.Errorf("JSON does not read back: %v %+v", err, back)
	}

	errs := parseErrors(t, edit(t, afterPods, afterPods+"    communities: [no-export, llgr-stale]\n"), fakeHost(nil))
	checkErrors(t, errs, want{"advertise[0].communities[1]", "llgr-stale marks a stale route during long-lived graceful restart", 0})
	if c, err := model.ParseCommunity("llgr-stale"); err != nil || c != 0xFFFF0006 || c.String() != "llgr-stale" {
		t.Errorf("llgr-stale (as learned from a peer) = %#x %v", uint32(c), err)
	}

	for _, bad := range []string{"65536:1", "1:2:3", "no-such", "NO-EXPORT", "65537", " 1:2", "+1:2", "-1:2", ""} {
		errs := parseErrors(t, edit(t, afterPods, afterPods+"    communities: [\""+bad+"\"]\n"), fakeHost(nil))
		checkErrors(t, errs, want{"advertise[0].communities[0]", "is not a community: write ASN:VALUE", 17})
	}
	for _, bad := range []string{"1:2", "1:2:3:4", "4294967296:0:0", "a:b:c"} {
		errs := parseErrors(t, edit(t, afterPods, afterPods+"    largeCommunities: [\""+bad+"\"]\n"), fakeHost(nil))
		checkErrors(t, errs, want{"advertise[0].largeCommunities[0]", "is not a large community: write A:B:C", 17})
	}
}
