#!/usr/bin/env bash
# Heartbeats/s: one host vs a 3-node cluster on a 3-member etcd, this machine.
set -u
B="$(cd "$(dirname "$0")/../.." && pwd)/target/release/assignd"
cd "$(mktemp -d)"
export ASSIGND_ADMIN_TOKEN=bench-token-0123456789abcdef
LG="--groups 100 --members 10 --tasks 100 --interval-ms ${INTERVAL:-0} --duration 10 --token $ASSIGND_ADMIN_TOKEN"
single() {
  rm -rf single; $B serve --listen 127.0.0.1:7270 --data-dir single > single.log 2>&1 & local pid=$!
  sleep 1; $B loadgen --host http://127.0.0.1:7270 $LG 2>&1 | grep -iE "heartbeats/s|p99|errors|double" | head -4
  kill $pid; wait $pid 2>/dev/null
}
cluster() {
  rm -rf etcd-* node-*
  CL="e1=http://127.0.0.1:12380,e2=http://127.0.0.1:22380,e3=http://127.0.0.1:32380"
  local pids=()
  for i in 1 2 3; do
    etcd --name e$i --data-dir ./etcd-e$i --listen-client-urls http://127.0.0.1:${i}2379 --advertise-client-urls http://127.0.0.1:${i}2379 \
      --listen-peer-urls http://127.0.0.1:${i}2380 --initial-advertise-peer-urls http://127.0.0.1:${i}2380 \
      --initial-cluster "$CL" --initial-cluster-state new --initial-cluster-token hb > etcd-e$i.log 2>&1 & pids+=($!)
  done
  sleep 3
  E=http://127.0.0.1:12379,http://127.0.0.1:22379,http://127.0.0.1:32379
  for n in 1 2 3; do $B serve --listen 127.0.0.1:727$n --data-dir node-$n --etcd $E --node n$n > node-$n.log 2>&1 & pids+=($!); done
  sleep 4
  $B loadgen --host http://127.0.0.1:7271,http://127.0.0.1:7272,http://127.0.0.1:7273 $LG 2>&1 | grep -iE "heartbeats/s|p99|errors|double" | head -4
  kill "${pids[@]}"; wait 2>/dev/null
}
for round in 1 2; do echo "== single $round"; single; echo "== cluster $round"; cluster; done
