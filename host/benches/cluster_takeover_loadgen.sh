#!/usr/bin/env bash
# What members see across a takeover (issue 14): a 3-member etcd and 3
# `assignd serve` nodes on loopback (free ports), `assignd loadgen` against
# all three; once every group is stable and loadgen measures, one node (not
# the first, through which loadgen creates and reads its groups) is killed
# with kill -9. Prints loadgen's summary line and the figures of its JSON
# report; one run per argument-less call, RUNS=N for more.
#
#   cargo build --release -p assignd
#   RUNS=3 host/benches/cluster_takeover_loadgen.sh
#
# Settings: NGROUPS (20), MEMBERS (10), TASKS (20), DURATION (30 s of
# measuring), KILL_AFTER (5 s into measuring), LEASE_TTL_MS (5000, the
# default). Needs etcd on PATH, curl and python3.
set -u
B=${ASSIGND:-"$(cd "$(dirname "$0")/../.." && pwd)/target/release/assignd"}
NGROUPS=${NGROUPS:-20} MEMBERS=${MEMBERS:-10} TASKS=${TASKS:-20}
DURATION=${DURATION:-30} KILL_AFTER=${KILL_AFTER:-5} LEASE_TTL_MS=${LEASE_TTL_MS:-5000}
RUNS=${RUNS:-1}
export ASSIGND_ADMIN_TOKEN=bench-token-0123456789abcdef
WORK=$(mktemp -d)
cd "$WORK" || exit 1
echo "work dir: $WORK"

free_ports() { # N free loopback ports
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# Waits (deadline $2 s) until the command $1 succeeds.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1" > /dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out: $1" >&2; return 1; fi
    sleep 0.2
  done
}

# Every group stable with every member stable, as the nodes' /metrics
# show them (a group just created, with no member yet, is stable too).
settled() {
  local groups=0 members=0 n m
  for url in "$@"; do
    read -r n m <<< "$(curl -s "$url/metrics" | awk '
      /^assignd_groups\{state="stable"\}/ {g=$2}
      /^assignd_members\{state="stable"\}/ {m=$2}
      END {print g+0, m+0}')"
    groups=$((groups + n)) members=$((members + m))
  done
  [ "$groups" -ge "$NGROUPS" ] && [ "$members" -ge $((NGROUPS * MEMBERS)) ]
}

served() { curl -s "$1/metrics" | awk '/^assignd_shards_served / {print $2}'; }

# The nodes given hold an even share each of every shard: placement is done.
spread() {
  local total sum=0 n
  total=$(curl -s "$1/metrics" | awk '/^assignd_shards / {print $2}')
  for url in "$@"; do
    n=$(served "$url")
    [ "${n:-0}" -ge $((total / $#)) ] || return 1
    sum=$((sum + n))
  done
  [ "$sum" -eq "$total" ]
}

# loadgen and the nodes first, then etcd (a node stopping releases its
# shards in etcd).
PIDS=() ETCD_PIDS=()
cleanup() {
  [ ${#PIDS[@]} -gt 0 ] && kill "${PIDS[@]}" 2> /dev/null
  for pid in "${PIDS[@]}"; do wait "$pid" 2> /dev/null; done
  [ ${#ETCD_PIDS[@]} -gt 0 ] && kill "${ETCD_PIDS[@]}" 2> /dev/null
  wait 2> /dev/null
  PIDS=() ETCD_PIDS=()
}
trap cleanup EXIT

run() {
  local run=$1 ports e_client=() cl="" i
  rm -rf etcd-* node-*
  read -r -a ports <<< "$(free_ports 9)"
  for i in 0 1 2; do cl+="${cl:+,}e$i=http://127.0.0.1:${ports[$((3 + i))]}"; done
  for i in 0 1 2; do
    local c=${ports[$i]} p=${ports[$((3 + i))]}
    e_client+=("http://127.0.0.1:$c")
    etcd --name "e$i" --data-dir "etcd-e$i" \
      --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
      --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
      --initial-cluster "$cl" --initial-cluster-state new --initial-cluster-token "takeover-$run" \
      > "etcd-e$i.log" 2>&1 &
    ETCD_PIDS+=($!)
  done
  for url in "${e_client[@]}"; do wait_for "curl -sf $url/health | grep -q true" 30 || return 1; done
  local etcd_urls nodes=() node_pids=()
  etcd_urls=$(IFS=,; echo "${e_client[*]}")
  for i in 0 1 2; do
    local url="http://127.0.0.1:${ports[$((6 + i))]}"
    nodes+=("$url")
    "$B" serve --listen "127.0.0.1:${ports[$((6 + i))]}" --data-dir "node-$i" --etcd "$etcd_urls" \
      --node "n$i" --advertise "$url" --lease-ttl-ms "$LEASE_TTL_MS" > "node-$i.log" 2>&1 &
    node_pids+=($!)
    PIDS+=($!)
  done
  for url in "${nodes[@]}"; do wait_for "curl -sf $url/healthz" 30 || return 1; done
  # Every node holds its share before loadgen starts.
  wait_for "spread ${nodes[*]}" 60 || return 1

  local hosts
  hosts=$(IFS=,; echo "${nodes[*]}")
  echo "== run $run: loadgen --host $hosts --groups $NGROUPS --members $MEMBERS --tasks $TASKS --duration $DURATION; kill -9 n1 ${KILL_AFTER}s into measuring"
  # loadgen measures once every group settled: wait for every group
  # stable on the nodes, then kill n1 a while into the measuring. A group
  # created while placement still moves a shard is refused (503
  # shard_unavailable, which loadgen does not retry): start it again.
  local loadgen attempt
  for attempt in 1 2 3; do
    "$B" loadgen --host "$hosts" --token "$ASSIGND_ADMIN_TOKEN" --groups "$NGROUPS" \
      --members "$MEMBERS" --tasks "$TASKS" --duration "$DURATION" --report "report-$run.json" \
      > "loadgen-$run.log" 2>&1 &
    loadgen=$!
    PIDS+=($loadgen)
    wait_for "settled ${nodes[*]} || ! kill -0 $loadgen" 150 || return 1
    kill -0 "$loadgen" 2> /dev/null && break
    grep -q shard_unavailable "loadgen-$run.log" || { cat "loadgen-$run.log"; return 1; }
    echo "loadgen refused shard_unavailable (placement still moving), again"
    sleep 1
  done
  sleep "$KILL_AFTER"
  local killed_at shards_n1
  shards_n1=$(served "${nodes[1]}")
  killed_at=$(date +%s.%N)
  kill -9 "${node_pids[1]}"
  echo "kill -9 n1 at $(date -u +%T.%3N) (UTC; loadgen's log lines are UTC too)"
  # Time until the survivors serve every shard again.
  wait_for "spread ${nodes[0]} ${nodes[2]}" 60
  echo "n1 served $shards_n1 shards; survivors serve all $(python3 -c "import time;print(round((time.time()-$killed_at)*1000))") ms after kill -9"
  wait "$loadgen"
  echo "loadgen exit $?"
  grep -E "^members=" "loadgen-$run.log"
  python3 - "report-$run.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
b = r["baseline"]
print(f"lease_lapses={r['lease_lapses']} errors={r['errors']} double_ownership={r['double_ownership']} "
      f"p50_ms={r['latency_ms']['p50']:.1f} p99_ms={r['latency_ms']['p99']:.1f} max_ms={r['latency_ms']['max']:.1f} "
      f"tasks_moved={b['tasks_moved']} ownerless_task_s={b['ownerless_task_s']:.2f} ownerless_max={b['ownerless_max']}")
EOF
  echo "\"runs late\" lines: $(grep -c 'runs late' node-0.log node-2.log | tr '\n' ' ')"
  cleanup
}

for r in $(seq 1 "$RUNS"); do run "$r"; done
