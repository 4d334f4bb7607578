#!/usr/bin/env bash
# Builds examples/dependent, a package of its own that names syncpeer by URL and version
# (`.package(url:from: "0.1.0")`), as a program elsewhere would (issue 42, point 4).
#
#   dependent-package.sh build DIR   in the foreground: DIR/syncpeer, a git repository of this
#                                    checkout's files (tracked or new, not ignored) tagged 0.1.0;
#                                    DIR/dependent, a copy of examples/dependent that reaches it
#                                    by a file:// URL; then `swift build` of the dependent. Its
#                                    output goes to DIR/build.log, its exit status to DIR/status
#                                    (written last), the binary to DIR/dependent/.build/debug/dependent.
#   dependent-package.sh start DIR   the same in the background at the lowest CPU priority, so
#                                    it takes only what the main build and the tests leave
#                                    (`make test` starts it first; DependentPackageTests waits
#                                    for DIR/status and runs the binary).
#
# SwiftPM refuses a versioned dependency that has unsafe compiler flags; a path dependency or
# the root package would be exempt, hence the tagged copy. The copy builds every target of the
# Syncpeer product from its own checkout (~2.5 min of CPU on a quiet 2-core machine).
set -euo pipefail
command=${1:-}
dir=${2:-}
if [[ -z "$dir" || ( "$command" != build && "$command" != start ) ]]; then
    echo "usage: $0 build|start DIR" >&2
    exit 2
fi
repository=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
swift=${SWIFT:-$(command -v swift || echo /opt/swift/usr/bin/swift)}

if [[ "$command" == start ]]; then
    # A build this script started before in DIR (its PID file) is stopped, then DIR starts empty.
    if [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        kill -- "-$(cat "$dir/pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    # setsid: its own process group, so a later start can stop the whole build.
    setsid nice -n 19 bash "$0" build "$dir" </dev/null >/dev/null 2>&1 &
    echo $! >"$dir/pid"
    exit 0
fi

rm -rf "$dir/syncpeer" "$dir/dependent" "$dir/status"
exec >"$dir/build.log" 2>&1
# The status is written last, whatever ends the build (set -e: the first failing step).
trap 'status=$?; echo "$status" >"$dir/status.new"; mv "$dir/status.new" "$dir/status"' EXIT
set -x
mkdir -p "$dir/syncpeer" "$dir/dependent"
(cd "$repository" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$dir/syncpeer"
git -C "$dir/syncpeer" init -q
git -C "$dir/syncpeer" add -A
git -C "$dir/syncpeer" -c user.name=syncpeer -c user.email=dev@syncpeer.invalid commit -q -m "syncpeer, tagged for a dependent package"
git -C "$dir/syncpeer" tag 0.1.0
cp -R "$repository/examples/dependent/Package.swift" "$repository/examples/dependent/Sources" "$dir/dependent/"
SYNCPEER_PACKAGE_URL="file://$dir/syncpeer" "$swift" build --package-path "$dir/dependent" \
    --scratch-path "$dir/dependent/.build" --cache-path "$dir/cache" --product dependent
