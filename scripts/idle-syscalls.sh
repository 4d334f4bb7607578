#!/bin/bash
# Counts the system calls of an idle pair of daemons in 30 s: alice and bob on 127.0.0.1 only
# (--no-discovery, no dashboard), paired, alice sharing a folder of 20 small files that bob has
# taken; once synced and 5 s quiet, `strace -c -f` follows each daemon for TRACE_SECONDS (default 30).
# Before that, the CPU time each spends idle over the same span, untraced. Prints each daemon's
# busiest calls and total. Usage: scripts/idle-syscalls.sh [BINARY]
# (default .build/debug/syncpeer; needs strace).
set -e
B=${1:-.build/debug/syncpeer}
SECONDS_TRACED=${TRACE_SECONDS:-30}
export SYNCPEER_INTERFACE=lo
D=$(mktemp -d /tmp/syncpeer-idle.XXXXXX)
trap 'kill $A $BOB 2>/dev/null; wait 2>/dev/null; rm -rf $D' EXIT
mkdir -p $D/shared $D/inbox
for i in $(seq 1 20); do echo "file $i" > $D/shared/f$i.txt; done
$B --home $D/alice init --name alice > /dev/null
$B --home $D/bob init --name bob > /dev/null
$B --home $D/alice daemon --listen 127.0.0.1:0 --no-discovery --gui off > $D/alice.log 2>&1 & A=$!
$B --home $D/bob daemon --listen 127.0.0.1:0 --no-discovery --gui off --auto-accept --receive-dir $D/inbox > $D/bob.log 2>&1 & BOB=$!
for i in $(seq 1 100); do grep -q "listening on" $D/bob.log && grep -q "listening on" $D/alice.log && break; sleep 0.2; done
$B --home $D/alice pair "$(grep -o 'listening on [0-9.:]*' $D/bob.log | awk '{print $3}')" > /dev/null
$B --home $D/alice share $D/shared --with bob > /dev/null
for i in $(seq 1 150); do [ -f $D/inbox/shared/f20.txt ] && break; sleep 0.2; done
[ -f $D/inbox/shared/f20.txt ] || { echo "bob did not get the folder" >&2; exit 1; }
sleep 5
# CPU time (user + system, clock ticks) of each over the same span, before tracing (strace costs CPU).
cpu() { awk '{print $14 + $15}' /proc/$1/stat; }
A0=$(cpu $A); B0=$(cpu $BOB); sleep $SECONDS_TRACED; A1=$(cpu $A); B1=$(cpu $BOB)
HZ=$(getconf CLK_TCK)
echo "CPU in $SECONDS_TRACED s: alice $(( (A1 - A0) * 1000 / HZ )) ms, bob $(( (B1 - B0) * 1000 / HZ )) ms"
timeout -s INT $SECONDS_TRACED strace -c -f -p $A -o $D/alice.strace > /dev/null 2>&1 &
S1=$!
timeout -s INT $SECONDS_TRACED strace -c -f -p $BOB -o $D/bob.strace > /dev/null 2>&1 &
S2=$!
wait $S1 $S2 || true
for name in alice bob; do
    echo "$name, idle for $SECONDS_TRACED s:"
    awk '$4 ~ /^[0-9]+$/ && $NF != "total" {print $4, $NF}' $D/$name.strace | sort -n -r | head -6 | tr '\n' ' '
    echo
    awk '$NF == "total" {print "  total", $4}' $D/$name.strace
done
