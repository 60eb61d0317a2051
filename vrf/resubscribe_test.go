package vrf_test

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ovnbgp/ovnbgp/vrf"
)

// TestResubscribeAfterOverflow: while notify is held up, 100k route
// changes overflow the subscription's socket (ENOBUFS; its buffer is
// large, routeRcvBuf, so a large import's echoes do not). The manager
// must notice, call notify, renew the subscription, and the renewed
// subscription must see the next change (a route of ours deleted by hand).
func TestResubscribeAfterOverflow(t *testing.T) {
	n := newNS(t)
	core, logs := observer.New(zap.DebugLevel)
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	pokes := make(chan struct{}, 1)
	m, err := vrf.OpenAt(n.h, proto, zap.New(core), func() {
		once.Do(func() { close(held); <-release }) // the first call blocks
		select {
		case pokes <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)

	var batch strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&batch, "route add %d.%d.%d.0/24 via 192.0.2.2 table 100 proto 200\n", 11+i>>16, byte(i>>8), byte(i))
	}
	cmd := exec.Command("ip", "-n", n.name, "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v: %s", err, out)
	}
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("notify was never called for 100k route adds")
	}
	close(release)

	renewed := func() bool {
		return logs.FilterMessage("netlink subscription renewed").
			FilterField(zap.String("subscription", "route")).Len() > 0
	}
	for deadline := time.Now().Add(60 * time.Second); !renewed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			var msgs []string
			for _, e := range logs.All() {
				msgs = append(msgs, e.Message)
			}
			t.Fatalf("the route subscription was not renewed within 60s after the overflow; log: %v", msgs)
		}
	}
	if logs.FilterMessage("netlink subscription ended, renewing").Len() == 0 {
		t.Error("no log line says the subscription ended")
	}
	drain(pokes)
	n.ip("route", "del", "11.0.7.0/24", "table", "100")
	waitPoke(t, pokes, "ip route del on the renewed subscription")
}
