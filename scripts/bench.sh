#!/usr/bin/env bash
# make bench: builds syncpeer and syncpeer-bench in release mode, then runs scripts/bench.py
# (limits of this machine, a 1 GiB send over loopback, a resume after SIGKILL, peak memory,
# optionally rsync, and folder sync: 10,000 small files, a 1 MiB change in a 1 GiB file,
# indexing 100,000 files). Figures: a table on stdout and .build/bench/results.json.
#
# Knobs (environment): BENCH_SIZE (bytes, default 1 GiB), BENCH_TMP (default /tmp),
# BENCH_RSYNC=0 (do not install or run rsync), BENCH_ARGS (more options for bench.py,
# e.g. "--skip rsync --keep").
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

# bench.py kills every process it starts (by PID) and removes its temporary directory,
# also on failure or Ctrl-C; this trap only forwards a signal to it.
python3 scripts/bench.py "${args[@]}" ${BENCH_ARGS:-} &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"' INT TERM HUP
wait "$child"
