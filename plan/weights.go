package plan

import (
	"math"

	"github.com/ovnbgp/ovnbgp/model"
)

// Import weights (issue 21): the accepted paths of one prefix that a
// kernel target installs as one multipath route weigh its next hops by the
// link bandwidth they carry (model.LearnedPath.LinkBandwidth). The kernel
// takes weights 1..256 (model.MaxWeight):
//
//   - when every path carries a bandwidth above 0, and they are whole
//     numbers of bytes per second in a ratio of whole numbers up to 256
//     (1:3, 2:5, 10:10; FRR's `set extcommunity bandwidth` gives whole
//     Mbit/s, so whole bytes too), the weights are that ratio exactly, in
//     its smallest terms: 125000 and 375000 become 1 and 3;
//   - otherwise the bandwidths are scaled so that the largest gets 256,
//     each weight rounded to the nearest whole number (halves up) and kept
//     at least 1, so that no accepted path stops carrying traffic;
//   - a path without the community, or with bandwidth 0, gets the
//     smallest weight, 1, beside the largest's 256 (the scaled form: in
//     smallest terms a lone bandwidth would be 1 too, and weigh no more
//     than the path without one). That is FRR's `bgp bestpath bandwidth
//     default-weight-for-missing`: of FRR's other choices, skip-missing
//     would drop an accepted path, which is the import decision's to do,
//     not the weights', and falling back to equal cost (FRR's default)
//     would let one peer that does not send the community undo the
//     weights every other peer asked for;
//   - without any bandwidth, or with every weight equal, the next hops are
//     equal cost (Weight 0), as before issue 21.
//
// The OVN target takes no weights: its static routes are equal cost
// (explain says so for a prefix whose paths carry bandwidth).

// noBandwidth marks a path without the community in bandwidthWeights' input.
const noBandwidth = -1

// bandwidthWeights sets the weights of next hops nhs from the bandwidths
// of their paths, bw[i] for nhs[i] in bytes per second (noBandwidth: the
// path carries none), in model.CanonicalWeights' form.
func bandwidthWeights(nhs []model.NextHop, bw []float64) {
	for i := range nhs {
		nhs[i].Weight = 0
	}
	top, whole := 0.0, true
	for _, b := range bw {
		top = max(top, b)
		if b <= 0 || b != math.Trunc(b) || b > 1<<53 {
			whole = false
		}
	}
	if len(nhs) < 2 || top <= 0 {
		return // nothing to weigh by: equal cost
	}
	var w []int
	if whole {
		w, whole = exactWeights(bw)
	}
	if whole {
		for i := range nhs {
			nhs[i].Weight = w[i]
		}
	} else {
		for i, b := range bw {
			nhs[i].Weight = max(1, int(math.Round(b/top*model.MaxWeight)))
		}
	}
	model.CanonicalWeights(nhs)
}

// exactWeights is bw, whole numbers, divided by their greatest common
// divisor, when the largest quotient is at most model.MaxWeight; every
// bandwidth is above 0.
func exactWeights(bw []float64) ([]int, bool) {
	var g uint64
	for _, b := range bw {
		g = gcd(g, uint64(b))
	}
	w := make([]int, len(bw))
	for i, b := range bw {
		q := uint64(b) / g
		if q > model.MaxWeight {
			return nil, false
		}
		w[i] = int(q)
	}
	return w, true
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pathBandwidth is p's bandwidth for bandwidthWeights.
func pathBandwidth(p model.LearnedPath) float64 {
	if p.LinkBandwidth == nil {
		return noBandwidth
	}
	return float64(p.LinkBandwidth.BytesPerSecond)
}
