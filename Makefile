# ovnbgp: `make lab` for the demo, `make test` for everything CI runs.
SHELL   := /bin/bash
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Stamps for `ovnbgp version`, from git (the go command's own VCS stamps are
# missing in a git worktree and with GOFLAGS=-buildvcs=false). The commit's
# date stands in for a build date: builds of a commit stay reproducible.
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
TREE_STATE  ?= $(shell git status --porcelain >/dev/null 2>&1 && { [ -z "$$(git status --porcelain 2>/dev/null)" ] && echo clean || echo dirty; })
COMMIT_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
PKG     := github.com/ovnbgp/ovnbgp/cmd
LDFLAGS := -s -w -X $(PKG).version=$(VERSION) -X $(PKG).commit=$(COMMIT) -X $(PKG).treeState=$(TREE_STATE) -X $(PKG).commitDate=$(COMMIT_DATE)
BIN     := bin/ovnbgp
# The daemon built with the race detector (cgo on), for the end-to-end tests
# that run the real daemon under it (OVNBGP_RACE_BIN: the short chaos
# variant and the peer matrix). Not stripped: race reports name the code.
RACE_BIN     := bin/ovnbgp-race
RACE_LDFLAGS := -X $(PKG).version=$(VERSION) -X $(PKG).commit=$(COMMIT) -X $(PKG).treeState=$(TREE_STATE) -X $(PKG).commitDate=$(COMMIT_DATE)
# The daemon with its test-only hooks (-tags ovnbgp_testhooks: SIGUSR2 hangs
# the reconcile loop, daemon/testhooks_on.go), for packaging/vmtest's
# watchdog check (OVNBGP_TESTHOOKS_BIN). Never shipped: bin/ovnbgp lacks the
# hook, and a test in daemon/ checks that it does.
TESTHOOKS_BIN := bin/ovnbgp-testhooks
export CGO_ENABLED := 0

.PHONY: all help build build-race build-testhooks test test-skips unit race e2e soak test-chaos bench vet lab generate docs machineconfig image package fuzz deps clean

all: build

## help: this list
help:
	@sed -n 's/^## \([a-z0-9-]*\): /  make \1\t/p' $(MAKEFILE_LIST) | expand -t 24

## build: the static, version-stamped binary in bin/ovnbgp
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .
	@file $(BIN) 2>/dev/null | grep -q 'statically linked' || { echo "$(BIN) is not statically linked" >&2; file $(BIN) >&2; exit 1; }

## build-race: the daemon built with -race in bin/ovnbgp-race (cgo on; make test's e2e tests run it as OVNBGP_RACE_BIN)
## (without a C compiler: CI=true fails, elsewhere it says so, removes a stale bin/ovnbgp-race and skips)
build-race:
	@cc=$$(CGO_ENABLED=1 $(GO) env CC); if ! command -v "$${cc%% *}" >/dev/null; then \
	  msg="make build-race: no C compiler ($$cc) for cgo, which -race needs: run scripts/test-deps.sh as root, or apt-get install gcc libc6-dev"; \
	  if [ "$$CI" = true ]; then echo "$$msg" >&2; exit 1; fi; \
	  rm -f $(RACE_BIN); echo "$$msg; the e2e tests run the daemon without the race detector" >&2; \
	  $(call SKIP_NOTE,make build-race,$${msg#*: }); exit 0; fi; \
	CGO_ENABLED=1 $(GO) build -race -trimpath -ldflags '$(RACE_LDFLAGS)' -o $(RACE_BIN) .

## build-testhooks: the daemon with its test-only hooks in bin/ovnbgp-testhooks (SIGUSR2 hangs the loop; make test's VM test runs it as OVNBGP_TESTHOOKS_BIN; never ship it)
build-testhooks:
	$(GO) build -trimpath -tags ovnbgp_testhooks -ldflags '$(LDFLAGS)' -o $(TESTHOOKS_BIN) .

# The one test compiled only with the test hooks: SIGUSR2 hangs the loop,
# WATCHDOG=1 stops (daemon/testhooks_on_test.go).
TESTHOOKS_TEST = $(GO) test -count=1 -tags ovnbgp_testhooks -run '^TestTestHookHangsLoop$$' ./daemon/

# Where a test that skips for a missing prerequisite (root, a package; test/
# prereq.Missing) notes why, and so do make's own steps here; make test
# starts it empty and ends by printing it (a loud banner when anything was
# skipped; with CI=true a skip fails make test). SKIP_NOTE,WHO,WHY notes a
# make step's skip, when make test runs it.
SKIP_DIR     := $(CURDIR)/bin/skipped
SKIP_SUMMARY  = $(GO) run ./test/prereq/summary $(SKIP_DIR)
SKIP_NOTE     = { [ -z "$$OVNBGP_SKIP_DIR" ] || { mkdir -p "$$OVNBGP_SKIP_DIR" && printf '%s\t-\t%s\n' '$(1)' "$(2)" >"$$(mktemp "$$OVNBGP_SKIP_DIR/skip-XXXXXX")"; }; }

# OVNBGP_RACE_BIN=... for go test when the race build exists.
RACE_ENV = $$([ -x $(RACE_BIN) ] && echo OVNBGP_RACE_BIN=$(CURDIR)/$(RACE_BIN))

# The unit packages: everything but the end-to-end tests, the VM tests and the benchmarks.
UNIT_PKGS = $$($(GO) list ./... | grep -v -e /test/e2e -e /bench -e /vrf/vmtest -e /packaging/vmtest)
# The race detector skips packaging/ too: it has no concurrent Go code, and
# its tests build the image and the packages and install the deb (make test
# runs them once, without -race).
RACE_PKGS = $$($(GO) list ./... | grep -v -e /test/e2e -e /bench -e /vrf/vmtest -e /packaging/vmtest -e /packaging$$)

## test: install test packages (as root), vet, build (and the -race daemon and the test-hooks daemon), the race detector on the unit packages, unit and end-to-end tests (the short chaos variant and the peer matrix run the -race daemon; a race report fails them; the systemd VM test's watchdog check runs the test-hooks daemon)
## (ends with what was skipped for want of root or packages, loudly; with CI=true such a skip fails)
test: export OVNBGP_SKIP_DIR := $(SKIP_DIR)
test: test-skips deps vet build build-race build-testhooks race
	$(TESTHOOKS_TEST)
	env OVNBGP_BIN=$(CURDIR)/$(BIN) OVNBGP_TESTHOOKS_BIN=$(CURDIR)/$(TESTHOOKS_BIN) $(RACE_ENV) $(GO) test -count=1 -timeout 25m ./...; \
	  rc=$$?; $(SKIP_SUMMARY) || rc=1; exit $$rc

# test-skips: make test's first step, an empty SKIP_DIR.
test-skips:
	@rm -rf $(SKIP_DIR) && mkdir -p $(SKIP_DIR)

## unit: only the tests that need no root and no packages (and the test-hooks build's own test)
unit:
	$(GO) test -count=1 $(UNIT_PKGS)
	$(TESTHOOKS_TEST)

## race: the unit packages but packaging/ under the race detector (cgo is on for this target only)
## (a C compiler is needed: scripts/test-deps.sh installs gcc; without one,
## CI=true fails and elsewhere the target says so and skips)
race:
	@cc=$$(CGO_ENABLED=1 $(GO) env CC); if ! command -v "$${cc%% *}" >/dev/null; then \
	  msg="make race: no C compiler ($$cc) for cgo, which -race needs: run scripts/test-deps.sh as root, or apt-get install gcc libc6-dev"; \
	  if [ "$$CI" = true ]; then echo "$$msg" >&2; exit 1; fi; \
	  echo "$$msg; skipping the race detector" >&2; $(call SKIP_NOTE,make race,$${msg#*: }); exit 0; fi; \
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)

## e2e: only the end-to-end tests (root; real ovsdb-server and FRR in netns)
e2e: deps build build-race
	env OVNBGP_BIN=$(CURDIR)/$(BIN) $(RACE_ENV) $(GO) test -count=1 -timeout 25m -v ./test/e2e/

# The soak test's length (a Go duration) and go test's timeout for it.
DURATION     ?= 30m
SOAK_TIMEOUT ?= 2h

## soak: the soak test for DURATION (default 30m, at least 4m; root): NB and FRR churn, the daemon's RSS, descriptors and goroutines sampled each minute, fails on growth (docs/soak.md)
## (make test runs its 150 s variant; SOAK_TIMEOUT (default 2h) must exceed twice DURATION by 5m)
soak: deps build
	OVNBGP_SOAK=$(DURATION) OVNBGP_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -v -run '^TestSoak$$' ./test/e2e/

# The chaos suite's counts (OVNBGP_CHAOS: full, short, or
# flaps=N,frr=N,ovsdb=N,kills=N,reloads=N) and the seed of its random order
# (empty: the clock; the summary line prints the seed to repeat a run).
CHAOS      ?= full
CHAOS_SEED ?=

## test-chaos: the chaos suite (TestChaos) at full counts: 100 peer link flaps, 20 FRR restarts, 20 ovsdb-server restarts, 20 SIGKILLs of ovnbgp, 20 reloads, each checked; ends with one summary line, 0 violations (CHAOS=flaps=N,frr=N,ovsdb=N,kills=N,reloads=N and CHAOS_SEED=N change counts and order; make test runs a short variant)
test-chaos: deps build
	OVNBGP_BIN=$(CURDIR)/$(BIN) OVNBGP_CHAOS='$(CHAOS)' OVNBGP_CHAOS_SEED='$(CHAOS_SEED)' $(GO) test -count=1 -timeout 120m -v -run '^TestChaos$$' ./test/e2e/

## bench: the side-by-side benchmarks (root): ovnbgp vs FRR and BIRD, each job 3 times (bench/run.sh -compare); the median table, bench/out/results.json and bench/out/benchmarks.png (OVNBGP_BENCH_OUT=DIR elsewhere; bench/README.md)
bench: build
	OVNBGP_BIN=$(CURDIR)/$(BIN) bench/run.sh -compare

vet:
	$(GO) vet ./...
	$(GO) vet -tags ovnbgp_testhooks ./daemon/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out" >&2; exit 1; }

## lab: the embedded demo (no root, no OVN, no FRR)
lab: build
	$(BIN) lab

## generate: libovsdb models from ovn/nbdb's schema
generate:
	CGO_ENABLED=1 $(GO) generate ./...

## docs: regenerate docs/cli-reference.md from the command tree (a test fails when it is stale)
docs:
	$(GO) run . gendocs --markdown docs/cli-reference.md

# Butane, nfpm: Go tools pinned in tools/go.mod (a module of its own, so
# the binary's go.mod stays clean); `go tool` builds them on first use.
TOOL    = $(GO) -C tools tool
BUTANE  = $(TOOL) github.com/coreos/butane/internal
NFPM    = $(TOOL) github.com/goreleaser/nfpm/v2/cmd/nfpm

## machineconfig: render packaging/machineconfig/*.bu into the MachineConfig YAML beside each (a test fails when they differ)
machineconfig:
	@for bu in packaging/machineconfig/*.bu; do \
	  echo "butane $$bu -> $${bu%.bu}.yaml"; \
	  $(BUTANE) --strict --files-dir $(CURDIR)/packaging -o $(CURDIR)/$${bu%.bu}.yaml $(CURDIR)/$$bu || exit 1; \
	done

# image: podman or buildah (both take `build -f FILE -t TAG DIR`)
CONTAINER ?= $(shell command -v podman || command -v buildah)
IMAGE     ?= localhost/ovnbgp:$(VERSION)

## image: the container image that carries the binary (packaging/Containerfile), tagged IMAGE (default localhost/ovnbgp:VERSION), with podman or buildah
image: build
	@[ -n "$(CONTAINER)" ] || { echo "make image: neither podman nor buildah found: apt-get install podman (or dnf install podman)" >&2; exit 1; }
	@ctx=$$(mktemp -d) && cp $(BIN) $$ctx/ovnbgp && \
	  $(CONTAINER) build -f packaging/Containerfile --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) $$ctx; \
	  rc=$$?; rm -rf $$ctx; exit $$rc

DIST    ?= dist

## package: deb and rpm in dist/ (nfpm): binary, unit, tmpfiles, rt_protos.d, example config, completions, man pages
package: build
	GO=$(GO) scripts/package.sh $(BIN) $(DIST)

# The fuzz targets, as package:target. `make test` runs their seed corpora
# (and any crasher saved in the package's testdata/fuzz) as ordinary tests.
FUZZ_TARGETS := config:FuzzParse plan:FuzzImportDecision ovn:FuzzSnapshot daemon:FuzzControlAPI
FUZZTIME ?= 60s

## fuzz: each fuzz target for FUZZTIME (default 60s): config loading, the import filter, the OVN snapshot builder, the control API
## (a crasher is written to the package's testdata/fuzz and then fails make test until fixed)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; 	  echo "== $$fn ($$pkg, $(FUZZTIME))"; 	  $(GO) test ./$$pkg/ -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10s -parallel 1; 	done

## deps: apt packages the tests need (frr, ovn-central...), when root
deps:
	@if [ "$$(id -u)" = 0 ]; then scripts/test-deps.sh; \
	 else echo "not root: skipping package install; end-to-end tests will skip"; fi

clean:
	rm -rf bin
