package model

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestPathAttrsJSON: the control API shows communities as people write
// them, and the CLI reads them back to the same values.
func TestPathAttrsJSON(t *testing.T) {
	a := PathAttrs{
		Communities:      []Community{0xFFFF0000, 0xFFFFFF01, 65001<<16 | 100, 0xFFFF0006},
		LargeCommunities: []LargeCommunity{{64512, 1, 2}},
		MED:              5,
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"communities":["graceful-shutdown","no-export","65001:100","llgr-stale"],"largeCommunities":["64512:1:2"],"med":5}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back PathAttrs
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Communities, a.Communities) || !slices.Equal(back.LargeCommunities, a.LargeCommunities) || back.MED != 5 {
		t.Errorf("read back %+v, want %+v", back, a)
	}
	if err := json.Unmarshal([]byte(`{"communities":["planned-shut"]}`), &back); err == nil {
		t.Errorf("an unknown name decoded")
	}
}
