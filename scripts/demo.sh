#!/usr/bin/env bash
# The syncpeer demo: two local nodes on this machine, each in its own temporary home.
# Everything stays on loopback (SYNCPEER_INTERFACE=lo); nothing is sent anywhere else.
# Grows with each capability: identity now; pairing, sync and resumable send next.
set -euo pipefail
bin=${1:?usage: demo.sh PATH-TO-syncpeer}
export SYNCPEER_INTERFACE=lo
work=$(mktemp -d /tmp/syncpeer-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

step "Two nodes, each with its own home"
show "$bin" --home "$work/alice" init --name alice
show "$bin" --home "$work/bob" init --name bob

step "Their device IDs (BLAKE2b-256 of the public key, base32 with check characters)"
show "$bin" --home "$work/alice" id
show "$bin" --home "$work/bob" id --json

step "A second init keeps the identity"
show "$bin" --home "$work/alice" init

step "The key file is private to its owner"
show ls -l "$work/alice/identity.key"

step "A mistyped flag is a clear error"
"$bin" --home "$work/alice" init --nmae x || echo "(exit code $?)"
echo
echo "Demo finished: identities work. Pairing, messages, discovery, send and sync come next."
