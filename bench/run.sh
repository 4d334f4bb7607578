#!/usr/bin/env bash
# make bench: builds syncpeer and syncpeer-bench in release mode, then runs the benchmark
# package (python3 -m bench, see bench/README.md): this machine's limits, then workloads A-F
# and the growth table, each run by syncpeer, Syncthing and rsync, interleaved.
# Figures: a table on stdout and .build/bench/results.json.
#
# As root, everything runs in a private network namespace made here (loopback only, removed
# at the end), and Syncthing and rsync are installed from Debian if missing (for the bench
# only: the product needs neither).
#
# Knobs (environment): BENCH_SIZE (bytes, default 1 GiB), BENCH_TMP (default /tmp),
# BENCH_RSYNC=0 (do not install or run rsync), BENCH_SYNCTHING=0 (same for Syncthing),
# BENCH_FULL=1 (the long runs too: F with 1,000,000 files and 5 min of idle, A at 8 GiB,
# B with 100,000 files), BENCH_ARGS (more options, e.g. "--skip limits,large --keep";
# python3 -m bench --help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH

swift build -c release --static-swift-stdlib --product syncpeer
swift build -c release --static-swift-stdlib --product syncpeer-bench
bin="$(swift build -c release --static-swift-stdlib --show-bin-path)"

args=(--syncpeer "$bin/syncpeer" --bench-bin "$bin/syncpeer-bench" --output .build/bench/results.json
      --size "${BENCH_SIZE:-1073741824}" --tmp "${BENCH_TMP:-/tmp}")
if [ "${BENCH_RSYNC:-1}" = "0" ]; then
  args+=(--skip rsync)
elif ! command -v rsync >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  # Nice to have: the comparison with rsync, from Debian, if it installs quietly.
  echo "bench: installing rsync from Debian for the comparison (BENCH_RSYNC=0 skips it)" >&2
  (apt-get install -y -qq rsync >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq rsync >/dev/null 2>&1; }) \
    || echo "bench: rsync could not be installed; that comparison is skipped" >&2
fi

if [ "${BENCH_SYNCTHING:-1}" = "0" ]; then
  args+=(--skip syncthing)
elif ! command -v syncthing >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "bench: installing syncthing from Debian for the comparison (BENCH_SYNCTHING=0 skips it)" >&2
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq syncthing >/dev/null 2>&1 \
     || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq syncthing >/dev/null 2>&1; }) \
    || echo "bench: syncthing could not be installed; that comparison is skipped" >&2
fi
skip_extra=""
command -v syncthing >/dev/null 2>&1 || skip_extra="syncthing"

# A private network namespace (root only): nothing of the benchmark, Syncthing included,
# can reach or be reached from a real interface.
run=()
ns=""
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1; then
  ns="syncpeer-bench-$$"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  run=(ip netns exec "$ns")
fi
cleanup() { if [ -n "$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi; }
trap cleanup EXIT
if [ -n "$skip_extra" ]; then args+=(--skip "$skip_extra"); fi

# The benchmark kills every process it starts (by PID) and removes its temporary directory,
# also on failure or Ctrl-C; this trap only forwards a signal to it.
"${run[@]}" env BENCH_FULL="${BENCH_FULL:-0}" python3 -m bench "${args[@]}" ${BENCH_ARGS:-} &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; cleanup' INT TERM HUP
wait "$child"
