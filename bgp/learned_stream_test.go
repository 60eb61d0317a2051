package bgp

import (
	"context"
	"errors"
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestEachLearnedStops: EachLearned hands over the paths one at a time and
// ends the walk at the first error of its callback (the control API's
// limit, or a client gone), returning that error; Learned collects all.
func TestEachLearnedStops(t *testing.T) {
	parallel(t)
	l := newLab(t, 77)
	port := freePort(t)
	prov := l.provider(3, port, provASN, false, "")
	node := l.node(false, l.peerOf("tor", 3, port, provASN))
	var advs []model.Advertisement
	for _, p := range []string{"10.77.0.0/24", "10.77.1.0/24", "10.77.2.0/24", "10.77.3.0/24", "fd00:77::/64"} {
		advs = append(advs, adv("node", p, model.PathAttrs{}))
	}
	set(t, prov, advs...)
	waitEstablished(t, node, "tor")
	waitLearned(t, node, "tor", pfx("10.77.0.0/24"), pfx("10.77.1.0/24"), pfx("10.77.2.0/24"), pfx("10.77.3.0/24"), pfx("fd00:77::/64"))

	stop := errors.New("enough")
	calls := 0
	err := node.EachLearned(context.Background(), "tor", func(p model.LearnedPath) error {
		calls++
		if p.Peer != "tor" || !p.Prefix.IsValid() {
			t.Errorf("path %+v", p)
		}
		if calls == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("EachLearned = %v after %d calls; want the callback's error after 2", err, calls)
	}
	all := 0
	if err := node.EachLearned(context.Background(), "", func(model.LearnedPath) error { all++; return nil }); err != nil || all != 5 {
		t.Fatalf("EachLearned(all) = %d paths, %v; want 5", all, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := node.EachLearned(ctx, "", func(model.LearnedPath) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("EachLearned with a cancelled context = %v", err)
	}
}
