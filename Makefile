# shedfs — build, demo, tests, benchmarks, lint.
#
#   make build   build bin/shedfs, stamped with the release, commit and build date (shedfs version)
#   make run     the demo: shedfs serve with alice, bob, carol and team-alpha under demo/mnt (Ctrl-C stops)
#   make test    every test: unit tests with -race, the metadata tests again on etcd, FUSE/integration tests, a short fuzz budget
#   make bench   native dir vs go-fuse loopback vs shedfs, medians, ratios and PASS/MISS per docs/design.md "Performance" target (cmd/shedfs-bench)
#   make lint    gofmt, go vet, staticcheck
#   make image   the container image (Containerfile): a static shedfs built here, FROM scratch, with podman
#   make clean   unmount demo views, remove bin/ and demo/
#
# Knobs: make test FUZZTIME=30s   make bench BENCH_FLAGS=-quick   make run DEMO_MODE=mount

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

# DEMO_MODE=serve: `shedfs serve` with several users and a group, one view
# each under demo/mnt/, metrics on DEMO_METRICS, share-by-link links on
# DEMO_HTTP (both loopback) and the audit trail on.
# DEMO_MODE=mount: one view of alice with `shedfs mount`.
DEMO_MODE  ?= serve
DEMO_DIR   := demo
DEMO_STORE := $(DEMO_DIR)/store
DEMO_MNT   := $(DEMO_DIR)/mnt
DEMO_USER  ?= alice
DEMO_USERS ?= alice bob carol
DEMO_GROUP ?= team-alpha
DEMO_MEMBERS ?= alice bob
DEMO_METRICS ?= 127.0.0.1:9567
DEMO_HTTP    ?= 127.0.0.1:8467

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

.PHONY: build run demo-mount demo-serve test bench lint clean image

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
# of a demo that was killed), so mkdir and rm never trip over them.
define unmount_under
	@abs="$$(realpath -m $(1))"; \
	awk -v d="$$abs" '$$2 == d || index($$2, d "/") == 1 { print $$2 }' /proc/mounts | sort -r | \
	while read -r m; do echo "unmounting stale $$m"; umount -l "$$m" || true; done
endef

run: build demo-$(DEMO_MODE)

demo-mount:
	$(call unmount_under,$(DEMO_MNT))
	@mkdir -p $(DEMO_MNT)/$(DEMO_USER)
	@$(SHEDFS) init --store $(DEMO_STORE)
	@echo
	@echo "shedfs demo: the view of user '$(DEMO_USER)' is mounted at $(CURDIR)/$(DEMO_MNT)/$(DEMO_USER)"
	@echo "  look at it from another terminal:  ls -la $(DEMO_MNT)/$(DEMO_USER) $(DEMO_MNT)/$(DEMO_USER)/share"
	@echo "  its store (metadata + blobs):      $(DEMO_STORE)"
	@echo "  Ctrl-C stops the daemon and unmounts the view."
	@echo
	@trap : INT TERM; rc=0; \
	$(SHEDFS) mount --store $(DEMO_STORE) --user $(DEMO_USER) $(DEMO_MNT)/$(DEMO_USER) || rc=$$?; \
	if grep -qs " $$(realpath -m $(DEMO_MNT)/$(DEMO_USER)) " /proc/mounts; then umount -l $(DEMO_MNT)/$(DEMO_USER) || true; fi; \
	echo "shedfs demo stopped"; \
	if [ $$rc -ne 0 ] && [ $$rc -ne 130 ]; then exit $$rc; fi

demo-serve:
	$(call unmount_under,$(DEMO_MNT))
	@mkdir -p $(DEMO_MNT)
	@S="$(SHEDFS)"; st="--store $(DEMO_STORE)"; \
	$$S init $$st; \
	for u in $(DEMO_USERS); do $$S user list $$st | grep -qw "^$$u" || $$S user add $$st $$u; done; \
	$$S group list $$st | grep -qw "^$(DEMO_GROUP)" || $$S group add $$st $(DEMO_GROUP); \
	$$S group add-member $$st $(DEMO_GROUP) $(DEMO_MEMBERS) >/dev/null; \
	$$S quota set $$st user:alice --bytes 1GiB --inodes 100000 >/dev/null; \
	$$S quota set $$st group:$(DEMO_GROUP) --bytes 2GiB >/dev/null; \
	$$S import $$st --user alice --replace README.md >/dev/null
	@echo
	@echo "shedfs demo: one view per user under $(CURDIR)/$(DEMO_MNT)/ ($(DEMO_USERS)); $(DEMO_MEMBERS) share groups/$(DEMO_GROUP)"
	@echo "  look from another terminal:"
	@echo "    ls -la $(DEMO_MNT)/alice $(DEMO_MNT)/alice/groups $(DEMO_MNT)/carol/groups"
	@echo "    echo hi > $(DEMO_MNT)/alice/groups/$(DEMO_GROUP)/note; cat $(DEMO_MNT)/bob/groups/$(DEMO_GROUP)/note"
	@echo "    getfattr -n user.shedfs.owner $(DEMO_MNT)/bob/groups/$(DEMO_GROUP)/note; df -h $(DEMO_MNT)/alice"
	@echo "    echo no > $(DEMO_MNT)/alice/uploads/README.md   # refused: uploads/ is read-only"
	@echo "  a link:   curl -s \"\$$(getfattr --only-values -n user.shedfs.link $(DEMO_MNT)/alice/uploads/README.md)\" | head -3"
	@echo "  metrics:  curl -s http://$(DEMO_METRICS)/metrics | grep ^shedfs_"
	@echo "  audit:    $(SHEDFS) audit --store $(DEMO_STORE)   (add --denied, --follow)"
	@echo "  status:   $(SHEDFS) status --store $(DEMO_STORE)"
	@echo "  Ctrl-C stops the daemon and unmounts every view."
	@echo
	@trap : INT TERM; rc=0; \
	$(SHEDFS) serve --store $(DEMO_STORE) --mount-root $(DEMO_MNT) --metrics $(DEMO_METRICS) --http $(DEMO_HTTP) || rc=$$?; \
	abs="$$(realpath -m $(DEMO_MNT))"; \
	awk -v d="$$abs" 'index($$2, d "/") == 1 { print $$2 }' /proc/mounts | sort -r | while read -r m; do umount -l "$$m" || true; done; \
	echo "shedfs demo stopped"; \
	if [ $$rc -ne 0 ] && [ $$rc -ne 130 ]; then exit $$rc; fi

# test runs every test and reports every failure before failing: the pure
# packages with -race, the FUSE and integration packages without, then each
# fuzz target found in any *_test.go for FUZZTIME.
test:
	@rc=0; \
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

# bench builds both binaries and runs the benchmark; BENCH_FLAGS go to
# shedfs-bench (-quick, -reps N, -json FILE, -targets native,loopback, -workloads smallfiles,views ...).
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
	$(call unmount_under,$(DEMO_DIR))
	rm -rf $(BIN) $(DEMO_DIR)
