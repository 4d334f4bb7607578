# syncpeer — two commands do all set-up on a fresh Debian machine (as root):
#   make demo    install dependencies, build, show two local peers at work
#   make test    install dependencies, build, run every test
#   make bench   release build, throughput/resume/memory figures on loopback (~5 min)
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)
# Every run from this Makefile pins discovery to loopback: nothing leaves the machine.
export SYNCPEER_INTERFACE ?= lo

SWIFT_FLAGS ?=
.PHONY: deps build release test demo bench clean schema

deps:
	@bash scripts/install-deps.sh

build: deps
	swift build $(SWIFT_FLAGS)

release: deps
	swift build -c release --static-swift-stdlib $(SWIFT_FLAGS)

test: build
	swift build --build-tests $(SWIFT_FLAGS)
	swift test --skip-build $(SWIFT_FLAGS)

demo: build
	@bash scripts/demo.sh "$$(swift build --show-bin-path)/syncpeer"

# Release build, then throughput (1 GiB over loopback) next to this machine's limits, bytes
# re-sent after a SIGKILL at 50 %, peak memory of both daemons, folder sync (10,000 small files,
# 1 MiB changed in 1 GiB, indexing 100,000 files); table + .build/bench/results.json.
bench: deps
	@bash scripts/bench.sh

# Regenerates the embedded copy of schema/*.sql (a test fails when the two differ).
schema:
	@python3 scripts/embed-schema.py

clean:
	swift package clean
