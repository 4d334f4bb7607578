#!/usr/bin/env bash
# The syncpeer demo: two local nodes on this machine, each in its own temporary home.
# Everything stays on loopback (127.0.0.1, SYNCPEER_INTERFACE=lo); nothing leaves the machine.
# Discovery (multicast DNS) runs only inside a network namespace made here (syncpeer-demo-PID,
# multicast on its own lo) and deleted on exit; without root (no `ip netns`), the daemons
# run with --no-discovery and pair by address.
# Grows with each capability: identity, secure sessions and discovery now; send and sync next.
set -euo pipefail
bin=${1:?usage: demo.sh PATH-TO-syncpeer}
export SYNCPEER_INTERFACE=lo
work=$(mktemp -d /tmp/syncpeer-demo.XXXXXX)
pids=()
ns=""
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A private network namespace for discovery: nothing in it can reach a real interface.
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add "syncpeer-demo-$$" 2>/dev/null; then
  ns="syncpeer-demo-$$"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set lo multicast on
  ip -n "$ns" route add 224.0.0.0/4 dev lo
  discovery=(--interface lo)
else
  discovery=(--no-discovery)
fi

# Starts a daemon in the background and records its real PID (not a subshell's), so the
# cleanup ends exactly the processes this demo started.
start_daemon() {
  local name=$1; shift
  if [ -n "$ns" ]; then
    ip netns exec "$ns" "$bin" --home "$work/$name" daemon "$@" > "$work/$name.log" 2>&1 &
  else
    "$bin" --home "$work/$name" daemon "$@" > "$work/$name.log" 2>&1 &
  fi
  pids+=($!)
}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }
alice() { "$bin" --home "$work/alice" "$@"; }
bob() { "$bin" --home "$work/bob" "$@"; }
wait_for() { # wait_for FILE PATTERN: until the daemon log shows PATTERN (10 s at most)
  for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "demo: timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1
}

step "Two nodes, each with its own home and identity"
show "$bin" --home "$work/alice" init --name alice
show "$bin" --home "$work/bob" init --name bob

step "Their device IDs (BLAKE2b-256 of the public key, base32 with check characters)"
show "$bin" --home "$work/alice" id
show "$bin" --home "$work/bob" id --json

if [ -n "$ns" ]; then
  step "Both daemons start on 127.0.0.1 inside the network namespace $ns (discovery on its lo)"
else
  step "Both daemons start on 127.0.0.1 (not root: no namespace, so discovery is off)"
fi
start_daemon alice --listen 127.0.0.1:0 "${discovery[@]}"
start_daemon bob --listen 127.0.0.1:0 "${discovery[@]}"
wait_for "$work/alice.log" "listening on"
wait_for "$work/bob.log" "listening on"
bob_address=$(grep -o 'listening on [0-9.:]*' "$work/bob.log" | head -1 | cut -d' ' -f3)
echo "alice: $(grep 'listening on' "$work/alice.log")"
echo "bob:   $(grep 'listening on' "$work/bob.log")"

target="$bob_address"
if [ -n "$ns" ]; then
  step "They find each other by name (DNS-SD over multicast DNS: _syncpeer._tcp.local)"
  wait_for "$work/alice.log" "found bob"
  wait_for "$work/bob.log" "found alice"
  echo "alice: $(grep 'found bob' "$work/alice.log")"
  echo "bob:   $(grep 'found alice' "$work/bob.log")"
  show "$bin" --home "$work/alice" browse
  target=bob
fi

step "alice invites bob (Noise XX handshake; both ends show the same 6-digit code)"
printf '$ syncpeer pair %s --context "demo"\n' "$target"
alice pair "$target" --context "demo" > "$work/pair.log" 2>&1 & pair_pid=$!
wait_for "$work/bob.log" "invitation"
show "$bin" --home "$work/bob" invitations
invitation=$(bob invitations --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["invitation"])')
code_bob=$(bob invitations --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["code"])')
wait_for "$work/pair.log" "has the invitation"
code_alice=$(grep -o 'code [0-9]*' "$work/pair.log" | head -1 | cut -d' ' -f2)
echo "code on alice's screen: $code_alice — code on bob's screen: $code_bob"
[ "$code_alice" = "$code_bob" ] && echo "the codes match: nobody is in the middle"

step "bob compares the codes and accepts: each side pins the other's key"
show "$bin" --home "$work/bob" accept "$invitation"
wait "$pair_pid"
cat "$work/pair.log"
show "$bin" --home "$work/alice" peers

step "Encrypted messages both ways"
show "$bin" --home "$work/alice" msg --to bob "hello bob, this is alice"
show "$bin" --home "$work/bob" msg --to alice "hi alice!"
wait_for "$work/bob.log" "alice: hello bob"
wait_for "$work/alice.log" "bob: hi alice"
echo "bob's daemon shows:   $(grep 'alice: hello' "$work/bob.log")"
echo "alice's daemon shows: $(grep 'bob: hi' "$work/alice.log")"

step "alice disconnects; both ends see the session end"
show "$bin" --home "$work/alice" disconnect bob
wait_for "$work/bob.log" "notConnected"
grep "notConnected" "$work/alice.log" | sed 's/^/alice: /'
grep "notConnected" "$work/bob.log" | sed 's/^/bob:   /'

if [ -n "$ns" ]; then
  step "bob hides (visibility off): alice sees it leave; peers merges nearby and paired"
  show "$bin" --home "$work/bob" visibility off
  wait_for "$work/alice.log" "lost bob"
  echo "alice: $(grep 'lost bob' "$work/alice.log")"
  show "$bin" --home "$work/bob" visibility on
  for _ in $(seq 100); do [ "$(grep -c 'found bob' "$work/alice.log")" -ge 2 ] && break; sleep 0.1; done
  echo "alice: $(grep 'found bob' "$work/alice.log" | tail -1) (not reconnected: alice disconnected it)"
  show "$bin" --home "$work/alice" peers
fi

step "alice sends a 200 MB file: chunked, each chunk verified, live progress on both ends"
mkdir -p "$work/inbox"
head -c 200000000 /dev/urandom > "$work/video.bin"
# bob waits for the offer and accepts it into its inbox (progress as NDJSON in bob-receive.log).
bob receive --dir "$work/inbox" --accept --json > "$work/bob-receive.log" 2>&1 &
receive_pid=$!
printf '$ syncpeer send video.bin --to bob\n'
if [ -t 1 ]; then
  alice send "$work/video.bin" --to bob > /dev/tty 2>&1 & send_pid=$!
else
  alice send "$work/video.bin" --to bob --json > "$work/send.log" 2>&1 & send_pid=$!
fi

step "Halfway through, bob's daemon is killed (SIGKILL): the partial file and its verified chunks survive"
for _ in $(seq 600); do
  grep -q '"bytes":[0-9]\{9\}' "$work/bob-receive.log" 2>/dev/null && break
  sleep 0.05
done
kill -9 "${pids[1]}"
wait "$receive_pid" 2>/dev/null || true
echo "bob's receive saw: $(grep -o '"bytes":[0-9]*' "$work/bob-receive.log" | tail -1 | cut -d: -f2) of 200000000 bytes verified before the kill"
ls -l "$work/inbox/.syncpeer-partial"

step "bob's daemon restarts; the peers reconnect and the transfer continues where it stopped"
start_daemon bob --listen 127.0.0.1:0 "${discovery[@]}"
wait "$send_pid"
if [ -f "$work/send.log" ]; then
  # No terminal here: the live bars became NDJSON events; show the percentages alice saw.
  python3 -c 'import json,sys
seen=[]
for line in open(sys.argv[1]):
    e=json.loads(line)
    if e.get("total"):
        p=int(100*e.get("bytes",0)/e["total"])
        if not seen or p>=seen[-1]+10 or (p<seen[-1]): seen.append(p)
print("progress on alice (every ~10%, a dip is the interruption): " + " ".join("%d%%" % p for p in seen))' "$work/send.log"
  python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print("sent %s: %d bytes, %d bytes re-sent after the interruption" % (r["name"], r["total"], r.get("resent", 0)))' "$work/send.log"
fi
cmp "$work/video.bin" "$work/inbox/video.bin" && echo "the received file is byte-identical (cmp)"
show "$bin" --home "$work/alice" transfers

step "A third node, carol, joins; alice shares a folder with bob and carol"
show "$bin" --home "$work/carol" init --name carol
export SYNCPEER_WATCH_DELAY_MS=300
start_daemon carol --listen 127.0.0.1:0 "${discovery[@]}" --auto-accept --receive-dir "$work/carol-inbox"
carol_pid=${pids[-1]}
mkdir -p "$work/carol-inbox"
wait_for "$work/carol.log" "listening on"
carol_address=$(grep -o 'listening on [0-9.:]*' "$work/carol.log" | head -1 | cut -d' ' -f3)
echo "(carol runs with --auto-accept: she accepts invitations and shared folders without asking)"
alice pair "$carol_address" > /dev/null
mkdir -p "$work/shared/notes"
echo "shopping: milk" > "$work/shared/list.txt"
echo "first idea" > "$work/shared/notes/ideas.txt"
head -c 2000000 /dev/urandom > "$work/shared/photo.bin"
show "$bin" --home "$work/alice" share "$work/shared" --with bob --with carol
wait_for "$work/bob.log" "shares"
folder_id=$(bob status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["offers"][0]["folder"])')
show "$bin" --home "$work/bob" accept "$folder_id" --into "$work/bob-shared"
tree_of() { (cd "$1" && find . -mindepth 1 -not -name '*.syncpeer-tmp' -not -name '.syncpeer-folder' | sort | tr '\n' ' '); }
same_everywhere() { [ "$(tree_of "$work/shared")" = "$(tree_of "$work/bob-shared")" ] && [ "$(tree_of "$work/shared")" = "$(tree_of "$work/carol-inbox/shared")" ]; }
wait_same() { for _ in $(seq 300); do same_everywhere && return 0; sleep 0.1; done; echo "demo: folders differ" >&2; for d in "$work/shared" "$work/bob-shared" "$work/carol-inbox/shared"; do echo "$d: $(tree_of "$d")" >&2; done; tail -5 "$work/carol.log" "$work/alice.log" >&2; return 1; }
wait_same
echo "alice: $(tree_of "$work/shared")"
echo "bob:   $(tree_of "$work/bob-shared")"
echo "carol: $(tree_of "$work/carol-inbox/shared")"

step "bob edits, carol renames, alice deletes: every change reaches everyone"
echo "shopping: milk, bread" > "$work/bob-shared/list.txt"
mv "$work/carol-inbox/shared/notes/ideas.txt" "$work/carol-inbox/shared/notes/plan.txt"
rm "$work/shared/photo.bin"
for _ in $(seq 300); do
  same_everywhere && grep -q bread "$work/shared/list.txt" 2>/dev/null && [ -f "$work/shared/notes/plan.txt" ] && break
  sleep 0.1
done
echo "alice: $(tree_of "$work/shared")  list.txt: $(cat "$work/shared/list.txt")"
echo "carol: $(tree_of "$work/carol-inbox/shared")  list.txt: $(cat "$work/carol-inbox/shared/list.txt")"
show "$bin" --home "$work/alice" status

step "A concurrent edit (carol offline, carol and bob edit list.txt): both versions are kept"
kill "$carol_pid"; wait "$carol_pid" 2>/dev/null || true
echo "shopping: milk, bread, eggs (carol)" > "$work/carol-inbox/shared/list.txt"
sleep 0.1
echo "shopping: milk, bread, tea (bob)" > "$work/bob-shared/list.txt"
for _ in $(seq 100); do grep -q tea "$work/shared/list.txt" 2>/dev/null && break; sleep 0.1; done
start_daemon carol --listen "$carol_address" "${discovery[@]}" --auto-accept --receive-dir "$work/carol-inbox"
conflicts_everywhere() {
  for d in "$work/shared" "$work/bob-shared" "$work/carol-inbox/shared"; do
    [ "$(ls "$d" | grep -c sync-conflict)" = 1 ] || return 1
  done
  same_everywhere
}
for _ in $(seq 300); do conflicts_everywhere && break; sleep 0.1; done
show "$bin" --home "$work/alice" conflicts
echo "list.txt everywhere (the newer edit): $(cat "$work/carol-inbox/shared/list.txt")"
echo "the conflict copy everywhere:         $(cat "$work/shared/"list.sync-conflict-*)"

step "A mistyped flag is a clear error"
"$bin" --home "$work/alice" init --nmae x || echo "(exit code $?)"
echo
echo "Demo finished: identities, discovery by name, pairing with matching codes, encrypted messages,"
echo "disconnect, a verified file transfer interrupted by a kill and resumed, and a folder shared by three"
echo "nodes with an edit, a rename, a deletion and a conflict copy."
