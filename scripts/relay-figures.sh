#!/bin/bash
# Measures a SIZE_MIB (default 200) MiB send through a local strelaysrv between two daemons that cannot dial each other.
# Both daemons and the relay run on 127.0.0.1 only (the relay with -pools=, private). Figures:
# wall seconds from `send` to the identical file on the receiver, CPU seconds of each daemon and
# of the relay, and peak RSS. Usage: scripts/relay-figures.sh (after `swift build`).
set -e
B=${SYNCPEER:-.build/debug/syncpeer}
D=$(mktemp -d /tmp/syncpeer-relay-figures.XXXXXX)
PORT=${RELAY_PORT:-22901}
SIZE_MIB=${SIZE_MIB:-200}
export SYNCPEER_INTERFACE=lo SYNCPEER_KEEPALIVE_MS=300 SYNCPEER_DEAD_PEER_MS=2000 SYNCPEER_REDIAL_MS=300
mkdir -p $D/relay
strelaysrv -listen 127.0.0.1:$PORT -keys $D/relay -pools= -status-srv= > $D/relay.log 2>&1 &
RPID=$!
for i in $(seq 50); do grep -q "URI:" $D/relay.log && break; sleep 0.1; done
URL=$(grep -o "relay://[^&]*" $D/relay.log | head -1)
for n in alice bob; do $B --home $D/$n init --name $n >/dev/null; mkdir -p $D/$n/in; done
start() { $B --home $D/$1 daemon --listen 127.0.0.1:0 --no-discovery --auto-accept --gui off --relay "$URL" --receive-dir $D/$1/in --json > $D/$1.log 2>&1 & echo $!; }
A=$(start alice); Bp=$(start bob); sleep 1.5
BADDR=$(grep -o '"address":"127.0.0.1:[0-9]*"' $D/bob.log | head -1 | cut -d'"' -f4)
$B --home $D/alice pair $BADDR --json > /dev/null
sleep 2
kill $A $Bp; wait $A $Bp 2>/dev/null || true
A=$(start alice); Bp=$(start bob)
for i in $(seq 100); do $B --home $D/alice peers --json 2>/dev/null | grep -q '"path":"relay' && break; sleep 0.2; done
$B --home $D/alice peers
head -c $((SIZE_MIB * 1048576)) /dev/urandom > $D/big.bin
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
a0=$(cpu $A); b0=$(cpu $Bp); r0=$(cpu $RPID); t0=$(date +%s.%N)
$B --home $D/alice send $D/big.bin --to bob --json > $D/send.log
for i in $(seq 600); do [ -f $D/bob/in/big.bin ] && cmp -s $D/big.bin $D/bob/in/big.bin && break; sleep 0.2; done
t1=$(date +%s.%N)
a1=$(cpu $A); b1=$(cpu $Bp); r1=$(cpu $RPID)
TCK=$(getconf CLK_TCK)
echo "seconds $(echo "$t1 - $t0" | bc) alice-cpu $(echo "($a1-$a0)/$TCK" | bc -l | cut -c1-5) bob-cpu $(echo "($b1-$b0)/$TCK" | bc -l | cut -c1-5) relay-cpu $(echo "($r1-$r0)/$TCK" | bc -l | cut -c1-5)"
echo "rss KiB alice $(grep VmHWM /proc/$A/status | awk '{print $2}') bob $(grep VmHWM /proc/$Bp/status | awk '{print $2}') relay $(grep VmHWM /proc/$RPID/status | awk '{print $2}')"
cmp $D/big.bin $D/bob/in/big.bin && echo "identical"
kill $A $Bp $RPID
rm -rf $D
