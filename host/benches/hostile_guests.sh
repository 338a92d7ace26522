#!/usr/bin/env bash
# What each hostile guest costs the host (issue 15): its peak memory, and a
# bystander group's heartbeats while it runs. One fresh release host per
# case (`assignd serve` on a free loopback port, its own data dir), so that
# the host's peak RSS (VmHWM) is the case's own. In every case:
#
# - 8 bystander groups x 4 members x 8 tasks heartbeat every 100 ms for
#   DURATION s of measuring (`assignd loadgen --report`: p50 / p99 / p99.9);
# - a hostile group of MEMBERS x TASKS (4 x 64; 10 x 5,000 for `big`;
#   4 such groups for `hog4`, 16 for `spin16`) served by the `spin-when-told` test guest
#   (uploaded as spinner@0.1.0) with its round-robin answer, under its own
#   loadgen (1 s heartbeats);
# - once that group is stable, until the bystanders' window ends, the case
#   acts: a bind case re-binds the hostile group every REBIND_S s to the
#   guest with the case's params (and a fresh `n`, so that each bind is a
#   new binding and an urgent call of the guest; retries after a failure
#   call it too); an upload case uploads its component again and again
#   (UPLOADERS at once), each refusal timed;
# - /healthz is timed every 200 ms; the host's children (the compiler
#   processes of uploads) have their VmHWM polled every 100 ms;
# - after the window (peak RSS and the bystanders' figures taken), a bind
#   case whose group shows no failure yet is given up to 15 s more without
#   binds: a call that outlives its epoch is discarded, failure and all.
#
# Cases (CASES to pick): baseline (the guest's round-robin, re-bound like
# the others), spin, spin16 (16 groups spinning at once: every call slot
# of the default --concurrent-calls-max busy), trap, recurse, hog, hog4
# (4 groups hogging at once),
# grow (one memory.grow to 4 GiB),
# log_flood (128 MiB lines), invalid (an invalid answer), big (8 standbys
# per task on 10 x 5,000: 40,000 standby rows, the row cap), and the
# uploads foreign (a WASI import), invalid_output (the test guest that
# fails its self-test), start_loop (a start function that never returns),
# slow_compile (the crafted component Cranelift takes ~29 s on, 2 at once:
# the default --compiles-max). Each run starts and ends with baseline; run
# 2, 4, ... go through the cases in reverse. Prints one line per case and
# at the end a Markdown table: medians over the runs, peak RSS against the
# baselines' median.
#
#   cargo build --release -p assignd
#   cargo run --release -p assignd --example hostile_guests -- target/hostile-guests
#   RUNS=2 host/benches/hostile_guests.sh
#
# Settings: RUNS (1), DURATION (20 s), REBIND_S (3), CASES (all), SERVE_ARGS
# (more flags for `assignd serve`, e.g. --concurrent-calls-max 2), GUESTS
# (target/hostile-guests), ASSIGND (target/release/assignd), OUT (a fresh
# temporary folder: one folder per case and run, results.tsv, table.md).
# About 10 minutes a run. Builds on the machine are reniced to 19 before
# each case. Needs curl and python3.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${ASSIGND:-$ROOT/target/release/assignd}
GUESTS=${GUESTS:-$ROOT/target/hostile-guests}
RUNS=${RUNS:-1} DURATION=${DURATION:-20} REBIND_S=${REBIND_S:-3} SERVE_ARGS=${SERVE_ARGS:-}
ALL="baseline spin spin16 trap recurse hog hog4 grow log_flood invalid big foreign invalid_output start_loop slow_compile"
CASES=${CASES:-$ALL}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/hostile-guests.XXXXXX")}
MODULE=spinner@0.1.0
mkdir -p "$OUT"
for f in spin-when-told invalid-output wasi-import slow-to-compile start-loop; do
  [ -f "$GUESTS/$f.wasm" ] || { echo "no $GUESTS/$f.wasm: run the example first (see the header)" >&2; exit 1; }
done
echo "out: $OUT"
RESULTS=$OUT/results.tsv
printf 'run\tcase\treported\tpeak_rss_kb\tend_rss_kb\tp50_ms\tp99_ms\tp999_ms\tmax_ms\terrors\thealthz_max_s\thealthz_p99_s\tactions\taction_median_s\taction_max_s\tchild_peak_kb\tload\n' > "$RESULTS"

# A case's settings: KIND (bind or upload), PARAMS (JSON members of the
# binding's params), FILE and UPLOADERS (uploads), MEMBERS and TASKS of the
# hostile group.
spec() {
  KIND=bind PARAMS='' FILE='' UPLOADERS=1 HOSTILE_GROUPS=1 MEMBERS=4 TASKS=64 FAILS=no
  case $1 in
    baseline) ;;
    spin | trap | recurse | hog | grow | log_flood | invalid) PARAMS="\"$1\": \"yes\", " FAILS=yes ;;
    hog4) PARAMS='"hog": "yes", ' HOSTILE_GROUPS=4 FAILS=yes ;;
    spin16) PARAMS='"spin": "yes", ' HOSTILE_GROUPS=16 FAILS=yes ;;
    big) PARAMS='"standbys": "8", ' MEMBERS=10 TASKS=5000 ;;
    foreign) KIND=upload FILE=wasi-import ;;
    invalid_output) KIND=upload FILE=invalid-output ;;
    start_loop) KIND=upload FILE=start-loop ;;
    slow_compile) KIND=upload FILE=slow-to-compile UPLOADERS=2 ;;
    *) echo "unknown case $1" >&2; return 1 ;;
  esac
}

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null; }

# Times one upload of $1; appends "seconds status code" to $2.
upload() {
  local answer=$3/answer.$BASHPID.json t
  t=$(curl -s -o "$answer" -w '%{time_total} %{http_code}' -X POST \
    -H "authorization: Bearer $TOKEN" -H 'content-type: application/wasm' \
    --data-binary @"$1" "$H/v1/assignors?name=hostile-$RANDOM&version=1")
  echo "$t $(json "$answer" "d['error']['code'] if 'error' in d else d.get('id','?')[:12]")" >> "$2"
}

run_case() { # run case
  local run=$1 name=$2 D=$OUT/$1-$2 SP BY HG HZ CP
  spec "$name" || return
  rm -rf "$D"; mkdir -p "$D"
  pgrep -f "rustc|cargo |/cc1|collect2|/ld" | xargs -r renice -n 19 -p > /dev/null 2>&1
  local load_before; load_before=$(cut -d' ' -f1 /proc/loadavg)
  # shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
  "$B" serve --listen 127.0.0.1:0 --data-dir "$D/data" $SERVE_ARGS > "$D/serve.log" 2>&1 &
  SP=$!
  H=
  for _ in $(seq 100); do
    H=$(grep -o 'listening on http://[0-9.:]*' "$D/serve.log" | head -1 | sed 's/listening on //')
    [ -n "$H" ] && [ -f "$D/data/admin-token" ] && break
    sleep 0.1
  done
  TOKEN=$(cat "$D/data/admin-token")
  export ASSIGND_TOKEN=$TOKEN
  curl -s -o "$D/upload.json" -X POST -H "authorization: Bearer $TOKEN" -H 'content-type: application/wasm' \
    --data-binary @"$GUESTS/spin-when-told.wasm" "$H/v1/assignors?name=spinner&version=0.1.0"
  "$B" loadgen --host "$H" --prefix by --groups 8 --members 4 --tasks 8 --interval-ms 100 \
    --duration "$DURATION" --report "$D/by.json" > "$D/by.out" 2>&1 &
  BY=$!
  "$B" loadgen --host "$H" --prefix hostile --groups "$HOSTILE_GROUPS" --members "$MEMBERS" --tasks "$TASKS" \
    --interval-ms 1000 --assignor "$MODULE" --duration $((DURATION + 60)) > "$D/hostile.out" 2>&1 &
  HG=$!
  ( while kill -0 "$BY" 2> /dev/null; do
      curl -s -o /dev/null -w '%{time_total}\n' "$H/healthz"; sleep 0.2
    done ) > "$D/healthz.txt" &
  HZ=$!
  ( peak=0
    while kill -0 "$BY" 2> /dev/null; do
      for c in $(pgrep -P "$SP"); do
        k=$(awk '/VmHWM/ {print $2}' "/proc/$c/status" 2> /dev/null)
        [ -n "$k" ] && [ "$k" -gt "$peak" ] && peak=$k && echo "$peak" > "$D/child_peak"
      done
      sleep 0.1
    done ) &
  CP=$!
  # The hostile group stable, with its first target: then act.
  for _ in $(seq 300); do
    curl -s -H "authorization: Bearer $TOKEN" "$H/v1/groups/hostile-0" > "$D/view.json"
    [ "$(json "$D/view.json" "d['state'] == 'stable' and d['target_epoch'] > 0")" = True ] && break
    sleep 0.2
  done
  : > "$D/actions.txt"
  local i=0
  while kill -0 "$BY" 2> /dev/null; do
    i=$((i + 1))
    if [ "$KIND" = bind ]; then
      local pids=()
      for g in $(seq 0 $((HOSTILE_GROUPS - 1))); do
        curl -s -o "$D/bind.json" -w '%{time_total} %{http_code}\n' -X PUT \
          -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
          -d "{\"module\": \"$MODULE\", \"params\": {$PARAMS\"n\": \"$i\"}}" \
          "$H/v1/groups/hostile-$g/assignor" >> "$D/actions.txt" &
        pids+=($!)
      done
      wait "${pids[@]}"
      sleep "$REBIND_S"
    else
      local pids=()
      for _ in $(seq "$UPLOADERS"); do upload "$GUESTS/$FILE.wasm" "$D/actions.txt" "$D" & pids+=($!); done
      wait "${pids[@]}"
      sleep 1
    fi
  done
  wait "$BY"
  local hwm rss
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$SP/status")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$SP/status")
  curl -s -H "authorization: Bearer $TOKEN" "$H/v1/groups/hostile-0" > "$D/view.json"
  local reported later=''
  if [ "$FAILS" = yes ] && [ -z "$(json "$D/view.json" "d.get('assignor_failures') or ''")" ]; then
    for w in $(seq 150); do
      sleep 0.1
      curl -s -H "authorization: Bearer $TOKEN" "$H/v1/groups/hostile-0" > "$D/view.json"
      [ -n "$(json "$D/view.json" "d.get('assignor_failures') or ''")" ] && later=" (shown $((w / 10)).$((w % 10)) s after the binds stopped)" && break
    done
  fi
  if [ "$KIND" = bind ]; then
    reported=$(json "$D/view.json" "'%s x%s: %s' % (d['assignor_failures']['code'], d['assignor_failures']['total'], d['assignor_failures']['message'][:110].replace('\t',' ')) if d.get('assignor_failures') else 'ok: target %s of group epoch %s' % (d['target_epoch'], d['group_epoch'])")
    reported="$reported$later"
  else
    reported=$(awk '{print $2, $3}' "$D/actions.txt" | sort | uniq -c | awk '{printf "%s%s %s x%s", (NR>1?", ":""), $2, $3, $1}')
  fi
  kill "$HG" "$HZ" "$CP" 2> /dev/null
  kill "$SP"
  for _ in $(seq 50); do kill -0 "$SP" 2> /dev/null || break; sleep 0.1; done
  kill -9 "$SP" 2> /dev/null
  wait 2> /dev/null
  local line
  line=$(python3 - "$D" "$run" "$name" "$reported" "$hwm" "$rss" "$load_before" << 'EOF'
import json, statistics, sys
d, run, name, reported, hwm, rss, load_before = sys.argv[1:]
by = json.load(open(f"{d}/by.json"))
lat = by["latency_ms"]
hz = sorted(float(x) for x in open(f"{d}/healthz.txt") if x.strip())
acts = [float(l.split()[0]) for l in open(f"{d}/actions.txt") if l.strip()]
try:
    child = open(f"{d}/child_peak").read().strip()
except OSError:
    child = "0"
load_after = open("/proc/loadavg").read().split()[0]
row = [run, name, reported, hwm, rss,
       f"{lat['p50']:.2f}", f"{lat['p99']:.2f}", f"{lat['p999']:.2f}", f"{lat['max']:.2f}", str(by["errors"]),
       f"{hz[-1]:.4f}" if hz else "", f"{hz[int(len(hz) * 0.99) - 1]:.4f}" if hz else "",
       str(len(acts)), f"{statistics.median(acts):.3f}" if acts else "", f"{max(acts):.3f}" if acts else "",
       child, f"{load_before}->{load_after}"]
print("\t".join(row))
EOF
)
  echo "$line" >> "$RESULTS"
  echo "$line"
}

for run in $(seq "$RUNS"); do
  order="baseline $(echo "$CASES" | tr ' ' '\n' | grep -vx baseline | tr '\n' ' ') baseline"
  if [ $((run % 2)) -eq 0 ]; then order=$(echo "$order" | tr ' ' '\n' | grep . | tac | tr '\n' ' '); fi
  for name in $order; do run_case "$run" "$name"; done
done

python3 - "$RESULTS" << 'EOF' | tee "$OUT/table.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by_case = {}
for r in rows:
    by_case.setdefault(r["case"], []).append(r)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs if r[k] != "")
base = med(by_case["baseline"], "peak_rss_kb") if "baseline" in by_case else None
print("| case | what the host reported | host peak RSS (× baseline) | RSS at the end | bystander p50 / p99 / p99.9 | /healthz max | p99 < 20 ms |")
# RSS in MiB (VmHWM and VmRSS are in KiB).
print("|---|---|---|---|---|---|---|")
for case, rs in by_case.items():
    peak = med(rs, "peak_rss_kb")
    ratio = f" ({peak / base:.2f}×)" if base else ""
    reported = rs[-1]["reported"]
    acts = [r for r in rs if r["action_median_s"]]
    if acts and case in ("foreign", "invalid_output", "start_loop", "slow_compile"):
        reported += f"; refusal median {med(acts, 'action_median_s') * 1e3:.0f} ms, max {max(float(r['action_max_s']) for r in acts) * 1e3:.0f} ms"
    child = med(rs, "child_peak_kb")
    if child > 0:
        reported += f"; compiler child peak {child / 1024:.0f} MiB"
    p99s = [float(r["p99_ms"]) for r in rs]
    print(f"| {case} (runs: {len(rs)}) | {reported} | {peak / 1024:.0f} MiB{ratio} | {med(rs, 'end_rss_kb') / 1024:.0f} MiB "
          f"| {med(rs, 'p50_ms'):.2f} / {med(rs, 'p99_ms'):.1f} / {med(rs, 'p999_ms'):.1f} ms (p99 each run: {', '.join(f'{p:.1f}' for p in p99s)}) "
          f"| {med(rs, 'healthz_max_s') * 1e3:.0f} ms | {'yes' if max(p99s) < 20 else 'no'} |")
EOF
