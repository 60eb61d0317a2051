# ovnbgp: `make lab` for the demo, `make test` for everything CI runs.
SHELL   := /bin/bash
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/ovnbgp/ovnbgp/cmd.version=$(VERSION)
BIN     := bin/ovnbgp
export CGO_ENABLED := 0

.PHONY: all build test unit race e2e vet lab generate deps clean

all: build

## build: the static, version-stamped binary in bin/ovnbgp
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) .
	@file $(BIN) 2>/dev/null | grep -q 'statically linked' || { echo "$(BIN) is not statically linked" >&2; file $(BIN) >&2; exit 1; }

# The unit packages: everything but the end-to-end tests, the VM tests and the benchmarks.
UNIT_PKGS = $$($(GO) list ./... | grep -v -e /test/e2e -e /bench -e /vrf/vmtest -e /packaging/vmtest)

## test: install test packages (as root), vet, build, the race detector on the unit packages, unit and end-to-end tests
test: deps vet build race
	OVNBGP_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 25m ./...

## unit: only the tests that need no root and no packages
unit:
	$(GO) test -count=1 $(UNIT_PKGS)

## race: the unit packages under the race detector (cgo is on for this target only)
## (a C compiler is needed: scripts/test-deps.sh installs gcc; without one,
## CI=true fails and elsewhere the target says so and skips)
race:
	@cc=$$(CGO_ENABLED=1 $(GO) env CC); if ! command -v "$${cc%% *}" >/dev/null; then \
	  msg="make race: no C compiler ($$cc) for cgo, which -race needs: run scripts/test-deps.sh as root, or apt-get install gcc libc6-dev"; \
	  if [ "$$CI" = true ]; then echo "$$msg" >&2; exit 1; fi; \
	  echo "$$msg; skipping the race detector" >&2; exit 0; fi; \
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m $(UNIT_PKGS)

## e2e: only the end-to-end tests (root; real ovsdb-server and FRR in netns)
e2e: deps build
	OVNBGP_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 25m -v ./test/e2e/

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); [ -z "$$out" ] || { echo "gofmt needed: $$out" >&2; exit 1; }

## lab: the embedded demo (no root, no OVN, no FRR)
lab: build
	$(BIN) lab

## generate: libovsdb models from ovn/nbdb's schema
generate:
	CGO_ENABLED=1 $(GO) generate ./...

## deps: apt packages the tests need (frr, ovn-central...), when root
deps:
	@if [ "$$(id -u)" = 0 ]; then scripts/test-deps.sh; \
	 else echo "not root: skipping package install; end-to-end tests will skip"; fi

clean:
	rm -rf bin
