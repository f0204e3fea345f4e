# shedfs — build, demo, tests, benchmarks, lint.
#
#   make build   build bin/shedfs, stamped with the release, commit and build date (shedfs version)
#   make run     the demo, bin/shedfs demo: alice, bob, carol and team-alpha under demo/mnt, links and metrics on loopback (Ctrl-C stops)
#   make docs    regenerate README.md's flag reference from the command definitions
#   make test    every test: unit tests with -race, the metadata tests again on etcd, FUSE/integration tests, a short fuzz budget (builds SeaweedFS once)
#   make test-uring  the FUSE/integration tests again with views over FUSE io_uring (turns the fuse module's enable_uring on for the run, puts it back)
#   make bench   native dir vs go-fuse loopback (no passthrough: the anchor) vs shedfs, medians, ratios and PASS/MISS per docs/design.md "Performance" target (cmd/shedfs-bench)
#   make lint    gofmt, go vet, staticcheck
#   make image   the container image (Containerfile): a static shedfs built here, FROM scratch, with podman
#   make clean   unmount demo views, remove bin/ and demo/
#
# Knobs: make test FUZZTIME=30s   make bench BENCH_FLAGS=-quick   make run DEMO_FLAGS="--dir /tmp/demo"

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO        ?= go
BIN       := bin
SHEDFS    := $(BIN)/shedfs
BENCH_BIN := $(BIN)/shedfs-bench

# --- test settings ----------------------------------------------------------

# Packages that mount FUSE, or drive a daemon that does, run without -race
# (go-fuse under the race detector is slow, and they exercise the kernel more
# than Go's memory model). Everything else is pure and runs with -race; a new
# package is picked up automatically.
NORACE_PKGS ?= ./integration/... ./fusefs/... ./cmd/shedfs/...
TESTFLAGS   ?=
# The integration package takes about 4 minutes on 2 idle cores, over 10
# (go test's default timeout) on a loaded machine: a slow run is not a
# failure.
INTEGRATION_TIMEOUT ?= 30m
FUZZTIME    ?= 10s

# --- lint settings ----------------------------------------------------------

# staticcheck 2026.2.x (v0.8.x) is the first line that supports Go 1.26.
STATICCHECK_VERSION ?= v0.8.2
GOBIN_DIR = $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
STATICCHECK = $(GOBIN_DIR)/staticcheck

# --- demo settings ----------------------------------------------------------

# make run is `shedfs demo` (see README.md, "Quick start"): a store in
# demo/store with several users and a group, one view each under demo/mnt/,
# metrics and share-by-link links on loopback, the audit trail on. The
# recipe execs it, so that a signal to the recipe's shell reaches the demo;
# a signal to make itself does not (make waits for its child), so scripts
# start bin/shedfs demo directly. DEMO_FLAGS go to shedfs demo
# (--dir, --http, --metrics, --users, --import FILE ...; see shedfs demo --help).
DEMO_FLAGS ?=

# --- release stamp -------------------------------------------------------------

# What `shedfs version` prints: the release (the nearest tag, or 0.0.0-dev
# before the first one), the commit (with -dirty for uncommitted changes)
# and the build date in UTC. A plain `go build` says "dev" instead.
RELEASE    ?= $(shell git describe --tags --abbrev=0 2>/dev/null || echo 0.0.0-dev)
COMMIT     ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS    := -X main.version=$(RELEASE) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

# --- image settings -----------------------------------------------------------

PODMAN ?= podman
IMAGE  ?= localhost/shedfs:$(RELEASE)
# IMAGE_TAGS: every tag the image gets (a test gives only its own).
IMAGE_TAGS ?= -t $(IMAGE) -t localhost/shedfs:latest

.PHONY: build run docs test test-uring bench lint clean image

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(SHEDFS) ./cmd/shedfs

# image builds a static shedfs (no cgo: nothing to link at run time) into
# bin/image/, the whole build context, and the image from Containerfile on
# it, tagged IMAGE and localhost/shedfs:latest (IMAGE_TAGS). No registry is needed: the
# binary is built here, and the image starts FROM scratch.
image:
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BIN)/image/shedfs ./cmd/shedfs
	cp LICENSE $(BIN)/image/LICENSE
	$(PODMAN) build --quiet --layers=false -f Containerfile $(IMAGE_TAGS) \
	  --label org.opencontainers.image.version=$(RELEASE) --label org.opencontainers.image.revision=$(COMMIT) \
	  $(BIN)/image

# unmount_under(dir): lazily unmount every mount at or below dir (stale views
# of a demo that was killed), so rm never trips over them.
define unmount_under
	@abs="$$(realpath -m $(1))"; \
	awk -v d="$$abs" '$$2 == d || index($$2, d "/") == 1 { print $$2 }' /proc/mounts | sort -r | \
	while read -r m; do echo "unmounting stale $$m"; umount -l "$$m" || true; done
endef

run: build
	exec $(SHEDFS) demo $(DEMO_FLAGS)

# docs regenerates README.md's flag reference (between the flags:begin and
# flags:end markers) from the command definitions; TestREADMEFlagReference
# fails until it is run after a flag changes (after a merge too: take
# either side of a conflict in the block, then make docs).
docs: build
	$(SHEDFS) help-markdown --write README.md

# test runs every test and reports every failure before failing: the pure
# packages with -race, the FUSE and integration packages without, then each
# fuzz target found in any *_test.go for FUZZTIME. First it builds
# SeaweedFS's weed, the S3 server of the object-store tests, once per
# machine (.ci/seaweedfs: about 7 minutes the first time, then reused from
# ~/.cache/shedfs) and passes its path in SHEDFS_WEED.
test:
	@rc=0; \
	echo "==> SeaweedFS for the object-store tests (.ci/seaweedfs, built once per machine)"; \
	if [ -z "$${SHEDFS_WEED:-}" ]; then SHEDFS_WEED="$$(GO=$(GO) .ci/seaweedfs)" || rc=1; fi; \
	export SHEDFS_WEED; echo "SHEDFS_WEED=$$SHEDFS_WEED"; \
	all="$$($(GO) list -e ./... | sort)"; \
	norace="$$($(GO) list -e $(NORACE_PKGS) 2>/dev/null | sort)"; \
	race="$$(comm -23 <(echo "$$all") <(echo "$$norace") | sed '/^$$/d')"; \
	norace="$$(comm -12 <(echo "$$all") <(echo "$$norace") | sed '/^$$/d')"; \
	echo "==> go test -race (pure packages)"; \
	if [ -n "$$race" ]; then $(GO) test -count=1 -race $(TESTFLAGS) $$race || rc=1; fi; \
	echo "==> go test ./metadata on a 3-member etcd cluster (SHEDFS_TEST_META=etcd)"; \
	SHEDFS_TEST_META=etcd $(GO) test -count=1 $(TESTFLAGS) ./metadata || rc=1; \
	echo "==> go test (FUSE and integration packages)"; \
	if [ -n "$$norace" ]; then $(GO) test -count=1 -timeout $(INTEGRATION_TIMEOUT) $(TESTFLAGS) $$norace || rc=1; fi; \
	echo "==> fuzz, $(FUZZTIME) per target"; \
	files="$$(grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=demo --exclude-dir=bin --exclude-dir=testdata -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort || true)"; \
	for f in $$files; do \
	  for fn in $$(grep -oE '^func Fuzz[A-Za-z0-9_]*\(' "$$f" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(/\1/'); do \
	    echo "--> $$fn in ./$$(dirname "$${f#./}")"; \
	    pkg="./$$(dirname "$${f#./}")"; \
	    out="$$($(GO) test -count=1 -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$pkg" 2>&1)" && frc=0 || frc=$$?; echo "$$out"; \
	    if [ $$frc -ne 0 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input'; then \
	      echo "    (the fuzz coordinator missed its deadline with no failing input, a go toolchain hiccup under load: once more)"; \
	      $(GO) test -count=1 -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) "$$pkg" || rc=1; \
	    elif [ $$frc -ne 0 ]; then rc=1; fi; \
	  done; \
	done; \
	if [ $$rc -ne 0 ]; then echo "make test: FAILED (see above)"; else echo "make test: all passed"; fi; \
	exit $$rc

# test-uring runs the FUSE and integration packages with the kernel's
# switch for FUSE over io_uring on, so that every view (--transport auto,
# the default) is served over io_uring; the switch is put back as it was,
# whatever happens. A kernel without the switch fails under CI=true.
URING_PARAM := /sys/module/fuse/parameters/enable_uring
test-uring:
	@if [ ! -e $(URING_PARAM) ]; then \
	  echo "test-uring: this kernel has no $(URING_PARAM)"; \
	  if [ "$${CI:-}" = true ]; then exit 1; fi; exit 0; \
	fi; \
	old="$$(cat $(URING_PARAM))"; trap 'echo "$$old" > $(URING_PARAM)' EXIT; \
	echo Y > $(URING_PARAM); \
	echo "==> go test (FUSE and integration packages) over FUSE io_uring"; \
	$(GO) test -count=1 -timeout $(INTEGRATION_TIMEOUT) $(TESTFLAGS) $(NORACE_PKGS)

# bench builds both binaries and runs the benchmark; BENCH_FLAGS go to
# shedfs-bench (-quick, -reps N, -json FILE, -targets native,loopback, -workloads smallfiles,views ...).
# Targets: native; loopback, go-fuse's loopback on /dev/fuse without FUSE
# passthrough (the anchor of the targets); loopback-pt, the same with
# passthrough (reads and writes bypass the daemon); memfs (the ceiling,
# nothing stored) and memfs-writeback; shedfs and its variants (-h lists
# all). Page, dentry and inode caches are dropped before every timed phase.
# On a work disk whose ext4 has no journal (it skews creates) the bench runs
# every target on a journaled ext4 it loop-mounts for the run (-scratch-fs
# auto, the default; root); -scratch-fs off keeps it on -dir.
BENCH_FLAGS ?=
bench: build
	$(GO) build -o $(BENCH_BIN) ./cmd/shedfs-bench
	$(BENCH_BIN) -shedfs $(SHEDFS) $(BENCH_FLAGS)

lint:
	@echo "==> gofmt -l"
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "==> go vet ./..."
	@$(GO) vet ./...
	@echo "==> staticcheck ./..."
	@if [ ! -x "$(STATICCHECK)" ]; then \
	  echo "installing staticcheck $(STATICCHECK_VERSION) into $(GOBIN_DIR)"; \
	  GOBIN="$(GOBIN_DIR)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi
	@$(STATICCHECK) ./...

clean:
	$(call unmount_under,demo)
	rm -rf $(BIN) demo
