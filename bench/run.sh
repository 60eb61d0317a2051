#!/usr/bin/env bash
# run.sh - ovnbgp vs FRR and BIRD on the same FRR "ToR": advertising
# (single-change latency, bulk convergence) and importing into the kernel.
# Prints each benchmark's numbers, then one table with the ratios, and writes
# results.json and benchmarks.png (default bench/out/). See bench/README.md.
#
#   sudo bench/run.sh -compare                     # THE side-by-side suite: each job 3 times, medians (make bench)
#   sudo bench/run.sh                              # every job once
#   sudo bench/run.sh -bench 'SingleChange'        # one job
#   sudo bench/run.sh -bench 'Bulk/ovnbgp'         # one job, one contender
#   sudo bench/run.sh -bench SingleChange -count 3 # one job, median of 3 runs
#   sudo OVNBGP_BENCH_BULK=1000,5000 bench/run.sh  # also 5000 switches (~5 min more: FRR(reload)'s withdraw)
#   sudo OVNBGP_BIN=bin/ovnbgp bench/run.sh        # a given binary (default: go build of this tree)
#   sudo OVNBGP_BENCH_OUT=/tmp/b bench/run.sh ...  # results.json and benchmarks.png there (default bench/out)
#   bench/run.sh -chart [results.json]             # the table and benchmarks.png again from a run's results (no root)
#   OVNBGP_BENCH_OUT=d bench/run.sh -chart a.json b.json   # two runs combined (e.g. import and advertise run apart)
#
# Needs root (network namespaces) and frr, bird2 and ovn-central:
# scripts/test-deps.sh installs them when missing. Everything the run starts
# is stopped by PID and its namespaces and files removed, as in test/e2e.
set -euo pipefail

# The side-by-side comparison of -compare: a `go test -bench` regexp of the
# jobs (BenchmarkBulk and BenchmarkAdvertiseBulk both match Bulk), each run
# COMPARE_COUNT times. OVNBGP_BENCH_COMPARE overrides the jobs.
COMPARE_JOBS=${OVNBGP_BENCH_COMPARE:-'ImportKernel|ImportInject|SingleChange|Bulk|AdvertiseBulk|AdvertiseChange|AdvertiseNBScale|AdvertiseWorkload'}
COMPARE_COUNT=3

# Paths given relative to where run.sh was called from.
if [ -n "${OVNBGP_BENCH_OUT:-}" ]; then
  OVNBGP_BENCH_OUT=$(realpath -m -- "$OVNBGP_BENCH_OUT")
  export OVNBGP_BENCH_OUT
fi
if [ -n "${OVNBGP_BIN:-}" ]; then
  OVNBGP_BIN=$(realpath -m -- "$OVNBGP_BIN")
  export OVNBGP_BIN
fi
mode=all
case "${1:-}" in
  -compare) mode=compare; shift ;;
  -chart)
    mode=chart; shift
    # Several results files (e.g. the import and the advertise jobs run
    # apart) are combined: OVNBGP_BENCH_OUT must say where the combined
    # results.json and the chart go.
    results=
    for f in "$@"; do
      results=${results:+$results,}$(realpath -m -- "$f")
    done
    set --
    if [ -z "$results" ]; then
      results=${OVNBGP_BENCH_OUT:-$(realpath -m -- "$(dirname "$0")/out")}/results.json
    fi
    ;;
esac
cd "$(dirname "$0")/.."
GO=${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}

if [ "$mode" = chart ]; then
  # No root, no lab: reads the file, prints the table, writes the chart
  # beside it (or into $OVNBGP_BENCH_OUT).
  exec "$GO" test -count=1 -run '^TestRenderChart$' -v ./bench/ -args -results "$results"
fi

if [ "$(id -u)" != 0 ]; then
  echo "bench/run.sh: needs root (network namespaces, FRR): sudo bench/run.sh" >&2
  exit 1
fi
scripts/test-deps.sh

export OVNBGP_BENCH=1
out=${OVNBGP_BENCH_OUT:-$PWD/bench/out}
# -benchtime 1x: each benchmark does a fixed amount of work (N rounds, one
# bulk per size) once; the numbers are in its own metrics, not in ns/op.
# -count N runs each N times; the table shows the median. Flags given to
# run.sh come last and win.
args=(-count=1 -run '^$' -bench . -benchtime 1x -timeout 60m)
if [ "$mode" = compare ]; then
  args=(-count="$COMPARE_COUNT" -run '^$' -bench "$COMPARE_JOBS" -benchtime 1x -timeout 240m)
  echo "bench/run.sh -compare: $COMPARE_JOBS, $COMPARE_COUNT times each; results in $out" >&2
fi
rc=0
"$GO" test "${args[@]}" ./bench/ "$@" || rc=$?

# What the run wrote belongs to whoever ran sudo, not to root.
if [ -n "${SUDO_UID:-}" ]; then
  for f in "$out" "$out/results.json" "$out/benchmarks.png"; do
    if [ -e "$f" ] && [ "$(stat -c %u "$f")" = 0 ]; then
      chown "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$f"
    fi
  done
fi
exit "$rc"
