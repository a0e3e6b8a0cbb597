# forkbox — build, serve and test. See README.md.
# Everything a fresh Debian/Ubuntu machine lacks is installed by scripts/deps.sh:
# `make serve` installs only what serving needs (deps-serve), `make test` also
# what the tests need (deps: npm clients, Chromium, …); runsc is built from the
# Go module proxy at the version pinned in go.mod.

SHELL      := /bin/bash
.SHELLFLAGS := -o pipefail -c

BIN        := $(CURDIR)/bin
DATA_DIR   ?= /var/lib/forkbox
LISTEN     ?= 127.0.0.1:3000
GO         ?= go
# -timeout is per test binary: the e2e package alone runs 25–35 minutes on two
# cores (every npm client file, template builds from a loopback registry); 25m
# cut it short in CI.
GOTEST_FLAGS ?= -count=1 -timeout 50m
# Where `make test` keeps what tests write to t.ArtifactDir() (the dashboard's
# browser screenshot): go test -artifacts -outputdir puts them under
# $(TEST_ARTIFACTS)/_artifacts/; without -artifacts Go removes them. Emptied at
# the start of each run and listed at its end, for CI to collect.
TEST_ARTIFACTS ?= $(DATA_DIR)/test-artifacts
# The packages whose tests also run under the race detector (Manager, proxy).
RACE_PKGS  := ./internal/sandbox ./internal/server
# Fuzz targets (package:Target) and how long `make fuzz` runs each.
FUZZ_TARGETS := ./internal/server:FuzzRESTDecoders ./internal/server:FuzzDataPlaneTarget ./internal/guest/agent:FuzzSignedURL
FUZZTIME   ?= 15s

.PHONY: all build deps deps-serve serve test test-race fuzz template bench clean

all: build

## build: forkbox, the static agent, and the pinned static runsc into bin/
build: $(BIN)/runsc
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/forkbox-agent ./cmd/forkbox-agent
	$(GO) build -o $(BIN)/forkbox ./cmd/forkbox

# runsc takes a few minutes the first time (and a minute more to precompile its
# seccomp programs, once per gvisor version); rebuilt only when its inputs change.
# A cgo build fails at sandbox boot (the chroot has no dynamic loader).
$(BIN)/runsc: go.mod go.sum scripts/build-runsc.sh $(wildcard tools/seccompgen/*.go) $(wildcard patches/gvisor/*.patch)
	@mkdir -p $(BIN)
	GO=$(GO) scripts/build-runsc.sh $(BIN)/runsc
	@touch $(BIN)/runsc

## deps: install what serving and testing need (apt packages, npm test clients)
deps:
	@scripts/deps.sh test

## deps-serve: install only what serving needs (no npm, no browser)
deps-serve:
	@scripts/deps.sh serve

## template: build (once) the base template into $(DATA_DIR)/templates
template: build
	$(BIN)/forkbox template build --data-dir $(DATA_DIR) --agent $(BIN)/forkbox-agent

## serve: install what serving needs, build, and start the daemon (Ctrl-C or SIGTERM stops it)
serve: deps-serve build
	$(BIN)/forkbox serve --listen $(LISTEN) --data-dir $(DATA_DIR) --runsc $(BIN)/runsc --agent $(BIN)/forkbox-agent

## test: the whole suite — unit, runtime conformance on real runsc, integration and e2e with the npm E2B clients
## (test artifacts such as the dashboard's screenshot are kept in $(TEST_ARTIFACTS) and listed at the end)
test: deps build template
	@rm -rf $(TEST_ARTIFACTS) && mkdir -p $(TEST_ARTIFACTS)
	FORKBOX_BIN=$(BIN) FORKBOX_ROOTFS=$(DATA_DIR)/templates/base/rootfs FORKBOX_TEMPLATE_DIR=$(DATA_DIR)/templates \
		$(GO) test $(GOTEST_FLAGS) -artifacts -outputdir $(TEST_ARTIFACTS) -p 1 ./... \
		|| { scripts/test-artifacts.sh $(TEST_ARTIFACTS); exit 1; }
	$(MAKE) --no-print-directory test-race fuzz
	@scripts/test-artifacts.sh --require TestDashboardInBrowser.png $(TEST_ARTIFACTS)

## test-race: the Manager's and the proxy's tests under the race detector
test-race:
	$(GO) test -race -count=1 $(RACE_PKGS)

## fuzz: each fuzz target for $(FUZZTIME); a failing input is kept in the package's testdata/fuzz
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo ">> fuzz $$fn in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## bench: the benchmark program; writes docs/benchmarks.md
bench: deps build template
	$(GO) run ./bench -bin $(BIN) -template-dir $(DATA_DIR)/templates -out docs/benchmarks.md
	$(GO) run ./bench/proxythroughput -bin $(BIN) -template-dir $(DATA_DIR)/templates >> docs/benchmarks.md
	$(GO) run ./bench/fspause -bin $(BIN) -template-dir $(DATA_DIR)/templates >> docs/benchmarks.md
	$(GO) run ./bench/density -bin $(BIN) -template-dir $(DATA_DIR)/templates >> docs/benchmarks.md
	$(GO) run ./bench/templates -bin $(BIN) -template-dir $(DATA_DIR)/templates >> docs/benchmarks.md

clean:
	rm -rf $(BIN)
