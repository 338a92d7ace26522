#!/usr/bin/env bash
# The clients side by side in one run (docs/benchmarks.md, "Clients"):
#
#   clients/bench.sh [MEMBERS] [SECONDS]      # default: 1000 members, 10 s
#
# Builds a release host and the Rust client's bench example, builds the
# other clients (clients/build.sh), starts `assignd serve` on a free port
# (--fsync never: the member's side is measured, not the disk), and for
# each client runs its bench driver with MEMBERS members in one process:
#   - peak: a group with heartbeat_interval_ms 1 (each member beats as
#     often as its client allows, 10 ms apart at most): heartbeats/s;
#   - steady: a group with the default 3 s interval: CPU per member.
# The members hold no state (no lags), so the groups run without learners:
# they settle at once and beat at the group's interval.
# Rounds alternate between clients (rust, go, python, rust, go, python)
# so that drift on a shared machine hits all of them alike. Then it times
# each client's replay of the conformance vectors (its runner's start
# included). Every JSON line goes to target/clients-bench.jsonl, a table to
# stdout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
members="${1:-1000}"
seconds="${2:-10}"
out="$root/target/clients-bench.jsonl"
token="clients-bench-admin-token"
say() { echo "clients/bench.sh: $*" >&2; }

cd "$root"
cargo build --release -q -p assignd -p assignd-client --example bench
clients/build.sh go python >/dev/null
data="$(mktemp -d)"
ASSIGND_ADMIN_TOKEN="$token" target/release/assignd serve --listen 127.0.0.1:0 \
    --data-dir "$data" --fsync never > "$data/stdout" 2> "$data/stderr" &
host_pid=$!
trap 'kill $host_pid 2>/dev/null; wait $host_pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 600); do
    url="$(sed -n 's/^listening on //p' "$data/stdout")"
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { say "the host did not start: $(cat "$data/stderr")"; exit 1; }

group=0
# Runs CLIENT's driver against a new group whose heartbeat interval is
# INTERVAL_MS; appends its JSON line, tagged, to $out.
run() {
    local client=$1 interval_ms=$2 round=$3
    group=$((group + 1))
    curl -sf -X PUT -H "authorization: Bearer $token" -H 'content-type: application/json' \
        "$url/v1/groups/b$group" -d "{\"topics\":[{\"name\":\"orders\",\"partitions\":$members}],
            \"heartbeat_interval_ms\":$interval_ms,\"session_timeout_ms\":30000,\"learners\":\"off\"}" >/dev/null
    local args=(--url "$url" --group "b$group" --members "$members" --topics orders --duration "$seconds")
    local line
    case $client in
        rust) line="$(target/release/examples/bench "${args[@]}")" ;;
        go) line="$(clients/go/bin/assignd-bench "${args[@]}")" ;;
        python) line="$(clients/python/target/venv/bin/python -m assignd.bench "${args[@]}")" ;;
    esac
    echo "$line" | python3 -c "import json,sys; d=json.load(sys.stdin); d.update(interval_ms=$interval_ms, round=$round); print(json.dumps(d))" >> "$out"
}

: > "$out"
for round in 1 2; do
    for client in rust go python; do
        say "round $round: $client, peak"
        run "$client" 1 "$round"
        say "round $round: $client, 3 s interval"
        run "$client" 3000 "$round"
    done
done

# The conformance vectors, each client's replay with its runner's start
# (the Rust test binary built first; Maven's start and up-to-date check
# are in Java's figure).
time_it() {
    local client=$1; shift
    local started=$EPOCHREALTIME
    "$@" >/dev/null 2>&1 || { say "$client: the vectors failed"; exit 1; }
    python3 -c "print('{\"client\": \"$client\", \"vectors_s\": %.2f}' % ($EPOCHREALTIME - $started))" >> "$out"
}
cargo test -q -p assignd-client --test conformance --no-run 2>/dev/null
time_it rust cargo test -q -p assignd-client --test conformance
time_it go bash -c 'cd clients/go && source ./env.sh && go test -count=1 -run TestVectors .'
time_it python clients/python/target/venv/bin/python -m pytest -q clients/python/tests/test_vectors.py
if [ -f clients/typescript/.built ]; then
    time_it typescript node --test clients/typescript/dist/test/vectors.test.js
fi
if [ -f clients/java/.built ]; then
    time_it java bash -c 'cd clients/java && ./test.sh -Dtest=ConformanceVectorsTest'
fi

python3 - "$out" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs = [r for r in rows if "heartbeats_per_s" in r]
print(f"{'client':8} {'peak heartbeats/s':>18} {'CPU ms/member/min @3s':>22}")
for client in ("rust", "go", "python"):
    peak = [r["heartbeats_per_s"] for r in runs if r["client"] == client and r["interval_ms"] == 1]
    cpu = [r["cpu_ms_per_member_per_min"] for r in runs if r["client"] == client and r["interval_ms"] == 3000]
    if peak:
        print(f"{client:8} {statistics.median(peak):>18,.0f} {statistics.median(cpu):>22.2f}")
for r in rows:
    if "vectors_s" in r:
        print(f"vectors  {r['client']:10} {r['vectors_s']:.2f} s")
EOF
