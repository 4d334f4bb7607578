# syncpeer — two commands do all set-up on a fresh Debian machine (as root):
#   make demo    install dependencies, build, show two local peers at work
#   make test    install dependencies, build, run every test
#   make install release build, man pages, completions, systemd user unit (PREFIX, DESTDIR)
#   make bench   release build, syncpeer next to Syncthing and rsync on workloads A-F (~30-40 min;
#                BENCH_FULL=1 adds the long runs; bench/README.md)
#   make chaos   20 long chaos runs: three daemons, random edits, kills and link cuts, then
#                every node must converge and keep every version (~40 min; CHAOS_COUNT=N,
#                CHAOS_SECONDS=S per run, CHAOS_SEED=N replays one seed); then power cuts on a
#                FUSE file system that loses what was not made durable (10 seeds × 12 cuts of
#                four runs, ~35 min; POWERLOSS_COUNT=N, POWERLOSS_SEED=N replays one seed)
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)
# Every run from this Makefile pins discovery to loopback: nothing leaves the machine.
export SYNCPEER_INTERFACE ?= lo

SWIFT_FLAGS ?=
.PHONY: deps build release test demo bench chaos clean schema assets screenshots install uninstall

deps:
	@bash scripts/install-deps.sh

build: deps
	swift build $(SWIFT_FLAGS)

release: deps
	swift build -c release --static-swift-stdlib $(SWIFT_FLAGS)

# Swift Testing runs every test at once by default: on 2 cores that is 100+ daemons, a load of
# 15-25, and waits that time out for no fault of the code. At most TEST_WIDTH tests run at a
# time (589 tests in ~4.5 min at load ~2.5 on 2 cores).
# examples/dependent, a package that depends on syncpeer by URL and version, builds first, in
# the background at the lowest CPU priority (scripts/dependent-package.sh): it takes what the
# main build and the tests leave idle, and DependentPackageTests waits for it and runs it.
TEST_WIDTH ?= 8
DEPENDENT_PACKAGE := $(CURDIR)/.build/dependent-package
test: deps
	bash scripts/dependent-package.sh start $(DEPENDENT_PACKAGE)
	swift build $(SWIFT_FLAGS)
	swift build --build-tests $(SWIFT_FLAGS)
	SYNCPEER_DEPENDENT_PACKAGE=$(DEPENDENT_PACKAGE) SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) swift test --skip-build $(SWIFT_FLAGS)

demo: build
	@bash scripts/demo.sh "$$(swift build --show-bin-path)/syncpeer"

# Release build, then the benchmark package bench/ (bench/README.md): this machine's limits,
# workloads A-F and the growth table for syncpeer, Syncthing and rsync from the same run, the
# load average, ratios; table + .build/bench/results.json.
bench: deps
	@bash bench/run.sh

# The chaos test (Tests/EndToEndTests/ChaosTests.swift) with 20 seeds from 1001 and 60 s of
# chaos each; `make test` runs it with 3 seeds of 12 s. Each run prints its seed and, on
# failure, the invariants broken, the op log and the differences.
CHAOS_COUNT ?= 20
CHAOS_SECONDS ?= 60
CHAOS_SEED ?=
# The power-loss tests (Tests/EndToEndTests/PowerLoss*Tests.swift; `make test` runs seeds 1 and
# 2 with 3 cuts each, the conflict run seed 1), skipped with the reason where FUSE is unavailable.
POWERLOSS_COUNT ?= 10
POWERLOSS_SEED ?=
chaos: build
	swift build --build-tests $(SWIFT_FLAGS)
	SYNCPEER_CHAOS=long SYNCPEER_CHAOS_COUNT=$(CHAOS_COUNT) SYNCPEER_CHAOS_SECONDS=$(CHAOS_SECONDS) \
	  $(if $(CHAOS_SEED),SYNCPEER_CHAOS_SEED=$(CHAOS_SEED)) \
	  SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) swift test --skip-build $(SWIFT_FLAGS) --filter 'EndToEndTests.ChaosTests'
	SYNCPEER_POWERLOSS=long SYNCPEER_POWERLOSS_COUNT=$(POWERLOSS_COUNT) $(if $(POWERLOSS_SEED),SYNCPEER_POWERLOSS_SEED=$(POWERLOSS_SEED)) \
	  SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=$(TEST_WIDTH) swift test --skip-build $(SWIFT_FLAGS) --filter 'EndToEndTests.PowerLoss'

# The release binary, man pages and bash/zsh/fish completions generated from its help texts,
# and a systemd user unit, under $(DESTDIR)$(PREFIX); `make uninstall` removes exactly those.
PREFIX ?= /usr/local
install: release
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" bash scripts/install.sh install "$$(swift build -c release --static-swift-stdlib --show-bin-path)/syncpeer"

uninstall:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" bash scripts/install.sh uninstall

# Regenerates the embedded copy of schema/*.sql (a test fails when the two differ).
schema:
	@python3 scripts/embed-schema.py

# Regenerates the dashboard's embedded copy of web/ (a test fails when the two differ).
assets:
	@python3 scripts/embed-assets.py

# Screenshots of each dashboard view (docs/screenshots/*.png), taken by the browser tests
# in headless Chromium against real daemons.
screenshots: build
	swift build --build-tests $(SWIFT_FLAGS)
	SYNCPEER_SCREENSHOTS=$(CURDIR)/docs/screenshots swift test --skip-build $(SWIFT_FLAGS) --filter DashboardBrowserTests

clean:
	swift package clean
