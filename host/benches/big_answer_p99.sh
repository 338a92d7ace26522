#!/usr/bin/env bash
# Bystanders' heartbeat p99 while a guest's big answers keep a group reassigning.
# usage: host/benches/big_answer_p99.sh BIN GUEST.wasm LABEL [loadgen args of the big group...]
# GUEST.wasm: the spin-when-told test guest (cargo run -p assignd --example hostile_guests -- DIR
# builds it as DIR/spin-when-told.wasm); docs/benchmarks.md has the runs.
# One host of 4 shards (so bystanders share the big group's shard as well as not);
# 8 bystander groups x 4 members x 8 tasks beat every 100 ms for 60 s; 8 s in, the
# big group starts with the args, its assignor being GUEST uploaded as far@1.0.0.
# Prints the bystanders' loadgen summary, the big group's target epoch at the end,
# and the host's CPU time (utime+stime, ticks).
set -u
BIN=$1; GUEST=$2; LABEL=$3; shift 3
D=${TMPDIR:-/tmp}/big-answer-$LABEL; rm -rf $D; mkdir -p $D
PORT=$((20000 + RANDOM % 20000))
$BIN serve --listen 127.0.0.1:$PORT --data-dir $D/data --shards 4 > $D/serve.log 2>&1 &
SP=$!
for i in $(seq 100); do [ -f $D/data/admin-token ] && curl -s 127.0.0.1:$PORT/healthz >/dev/null && break; sleep 0.2; done
export ASSIGND_TOKEN=$(cat $D/data/admin-token)
H=http://127.0.0.1:$PORT
curl -s -o /dev/null -w 'upload %{http_code}\n' -X POST -H "authorization: Bearer $ASSIGND_TOKEN" \
  -H 'content-type: application/wasm' --data-binary @$GUEST "$H/v1/assignors?name=far&version=1.0.0"
$BIN loadgen --host $H --prefix by --groups 8 --members 4 --tasks 8 --interval-ms 100 --duration 60 --report $D/by.json > $D/by.out 2>&1 &
BY=$!
sleep 8
$BIN loadgen --host $H --prefix big --groups 1 "$@" --report $D/big.json > $D/big.out 2>&1 &
BG=$!
wait $BY; kill $BG 2>/dev/null
curl -s -H "authorization: Bearer $ASSIGND_TOKEN" $H/v1/groups/big-0 | python3 -c 'import json,sys; v=json.load(sys.stdin); print("big target_epoch", v["target_epoch"], "state", v["state"])'
echo "host cpu ticks: $(awk '{print $14+$15}' /proc/$SP/stat)"
kill $SP; wait
tail -3 $D/by.out
