# forkbox — build, serve and test. See README.md.
# Everything a fresh Debian/Ubuntu machine lacks is installed by `make deps`
# (apt packages, npm packages of the end-to-end tests); runsc is built from the
# Go module proxy at the version pinned in go.mod.

SHELL      := /bin/bash
.SHELLFLAGS := -o pipefail -c

BIN        := $(CURDIR)/bin
DATA_DIR   ?= /var/lib/forkbox
LISTEN     ?= 127.0.0.1:3000
GO         ?= go
GOTEST_FLAGS ?= -count=1 -timeout 25m

.PHONY: all build deps serve test template bench clean

all: build

## build: forkbox, the static agent, and the pinned static runsc into bin/
build: $(BIN)/runsc
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/forkbox-agent ./cmd/forkbox-agent
	$(GO) build -o $(BIN)/forkbox ./cmd/forkbox

# runsc takes a few minutes the first time (and a minute more to precompile its
# seccomp programs, once per gvisor version); rebuilt only when its inputs change.
# A cgo build fails at sandbox boot (the chroot has no dynamic loader).
$(BIN)/runsc: go.mod go.sum scripts/build-runsc.sh $(wildcard tools/seccompgen/*.go)
	@mkdir -p $(BIN)
	GO=$(GO) scripts/build-runsc.sh $(BIN)/runsc
	@touch $(BIN)/runsc

## deps: install what the machine lacks (apt packages, npm test clients)
deps:
	@scripts/deps.sh

## template: build (once) the base template into $(DATA_DIR)/templates
template: build
	$(BIN)/forkbox template build --data-dir $(DATA_DIR) --agent $(BIN)/forkbox-agent

## serve: install what is missing, build, and start the daemon
serve: deps build
	$(BIN)/forkbox serve --listen $(LISTEN) --data-dir $(DATA_DIR) --runsc $(BIN)/runsc --agent $(BIN)/forkbox-agent

## test: the whole suite — unit, runtime conformance on real runsc, integration and e2e with the npm E2B clients
test: deps build template
	FORKBOX_BIN=$(BIN) FORKBOX_ROOTFS=$(DATA_DIR)/templates/base/rootfs FORKBOX_TEMPLATE_DIR=$(DATA_DIR)/templates \
		$(GO) test $(GOTEST_FLAGS) -p 1 ./...

## bench: the benchmark program; writes docs/benchmarks.md
bench: deps build template
	$(GO) run ./bench -bin $(BIN) -template-dir $(DATA_DIR)/templates -out docs/benchmarks.md
	$(GO) run ./bench/proxythroughput -bin $(BIN) -template-dir $(DATA_DIR)/templates >> docs/benchmarks.md

clean:
	rm -rf $(BIN)
