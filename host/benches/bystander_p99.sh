#!/usr/bin/env bash
# A bystander's heartbeat p99 while one big group rebalances (issue 15, item 4).
# usage: host/benches/bystander_p99.sh BIN LABEL [loadgen args of the big group...]
# 8 bystander groups x 4 members x 8 tasks beat every 100 ms for 60 s; 8 s in, one
# big group starts (the args); /healthz is sampled every 200 ms. Prints the
# bystanders' loadgen line, /healthz p99 and max (s), and the host's RSS / peak (kB).
# Builds running on the machine are reniced to 19 first. LG=other-binary runs loadgen from it.
set -u
BIN=$1; LABEL=$2; shift 2; LG=${LG:-$BIN}
pgrep -f "rustc|cargo |/cc1|collect2|/ld" | xargs -r renice -n 19 -p >/dev/null 2>&1
D=${TMPDIR:-/tmp}/bystander-$LABEL; rm -rf $D; mkdir -p $D
PORT=$((20000 + RANDOM % 20000))
$BIN serve --listen 127.0.0.1:$PORT --data-dir $D/data > $D/serve.log 2>&1 &
SP=$!
for i in $(seq 100); do [ -f $D/data/admin-token ] && curl -s 127.0.0.1:$PORT/healthz >/dev/null && break; sleep 0.2; done
export ASSIGND_TOKEN=$(cat $D/data/admin-token)
H=http://127.0.0.1:$PORT
# bystanders: 8 groups x 4 members x 8 tasks, 100 ms heartbeats, 60 s
$LG loadgen --host $H --prefix by --groups 8 --members 4 --tasks 8 --interval-ms 100 --duration 60 --report $D/by.json > $D/by.out 2>&1 &
BY=$!
sleep 8
# the big group, with churn so its target is recomputed
$LG loadgen --host $H --prefix big --groups 1 "$@" --report $D/big.json > $D/big.out 2>&1 &
BG=$!
# healthz latency sampled
( for i in $(seq 200); do curl -s -o /dev/null -w '%{time_total}\n' $H/healthz; sleep 0.2; done ) > $D/healthz.txt &
HZ=$!
wait $BY; kill $BG $HZ 2>/dev/null
ps -o rss= -p $SP > $D/rss.txt
grep -E "VmHWM" /proc/$SP/status >> $D/rss.txt
kill $SP; wait
tail -3 $D/by.out; echo "healthz max: $(sort -n $D/healthz.txt | tail -1)  p99: $(sort -n $D/healthz.txt | awk '{a[NR]=$1} END{print a[int(NR*0.99)]}')"; cat $D/rss.txt
