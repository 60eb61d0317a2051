#!/usr/bin/env bash
# run.sh - ovnbgp vs FRR on the same FRR "ToR": single-change latency and
# bulk convergence. Prints each benchmark's numbers, then one table with the
# ratios. See bench/README.md.
#
#   sudo bench/run.sh                              # everything (~2 min)
#   sudo bench/run.sh -bench 'SingleChange'        # one job
#   sudo bench/run.sh -bench 'Bulk/ovnbgp'         # one job, one contender
#   sudo OVNBGP_BENCH_BULK=1000,5000 bench/run.sh  # also 5000 switches (~5 min more: FRR(reload)'s withdraw)
#   sudo OVNBGP_BIN=bin/ovnbgp bench/run.sh        # a given binary (default: go build of this tree)
#
# Needs root (network namespaces) and frr + ovn-central: scripts/test-deps.sh
# installs them when missing. Everything the run starts is stopped by PID and
# its namespaces and files removed, as in test/e2e.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: needs root (network namespaces, FRR): sudo bench/run.sh" >&2
  exit 1
fi
scripts/test-deps.sh

GO=${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}
export OVNBGP_BENCH=1
# -benchtime 1x: each benchmark does a fixed amount of work (N rounds, one
# bulk per size) once; the numbers are in its own metrics, not in ns/op.
exec "$GO" test -count=1 -run '^$' -bench . -benchtime 1x -timeout 60m ./bench/ "$@"
