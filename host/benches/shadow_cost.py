#!/usr/bin/env python3
"""What a shadow assignor costs the live path, side by side in one run
(docs/benchmarks.md, "Shadow assignors and the console").

Three variants, each against a fresh `assignd serve` (free loopback port,
fresh data dir), measured by `assignd loadgen` on the same groups and churn:

  - none:   no shadow;
  - sticky: every group shadowed by the built-in `sticky` (a shadow that
            answers, as cheap as the live call);
  - slow:   every group shadowed by the `spin-when-told` test guest
            (uploaded as spinner@0.1.0) with `spin=yes`: it loops until
            its time limit stops it, every time it is asked (every host
            gets `serve --fuel-base` 10^12 so that the clock, 10 s by
            default, stops it before its fuel does, in 0.1-0.3 s here).

Each run: `assignd loadgen --groups G --members M --tasks T --interval-ms I
--duration D --churn SPEC --host-pid PID --report FILE [--shadow ...]`, the
churn scaling every group up by one member and back every few seconds, so
each group rebalances (one live call, and one shadow call beside it) at
every event. From the report: heartbeats/s, the members' p50/p99/p99.9 and
the host's CPU over the measuring window; from `GET /metrics` at the end
the live calls (`assignd_assignor_call_seconds`, sum and count) and the
shadow calls (`assignd_shadow_call_seconds`, failures by code, dropped),
so a shadow's cost per rebalance (shadow seconds / shadow calls) next to
the live call's; from every group's `GET /v1/groups/{g}/shadow` the
totals (compared, skipped). ROUNDS rounds of the three variants in turn
(none, sticky, slow, none, sticky, slow, ...), so that the machine's noise
hits all alike; a Markdown table of the medians and the ratios to `none`.

    python3 host/benches/shadow_cost.py [--rounds 3] [--skip-build] [--json FILE]

Builds `target/release/assignd` and, if missing,
`target/hostile-guests/spin-when-told.wasm` (the hostile_guests example)
unless --skip-build. Python 3.11, standard library only.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKEN = "shadow-cost-admin-token-0123456789abcdef"
STARTUP_TIMEOUT_S = 60
GUEST_NAME, GUEST_VERSION = "spinner", "0.1.0"
# Every group up by one member and back every 3 s: one rebalance a group
# an event, six events in the default 20 s.
DEFAULT_CHURN = ",".join(
    f"scale:{a}->{b}@{t}s" for t, (a, b) in zip(range(2, 20, 3), [("M", "M1"), ("M1", "M")] * 3)
)
VARIANTS = {
    "none": [],
    "sticky": ["--shadow", "sticky"],
    "slow": ["--shadow", f"{GUEST_NAME}@{GUEST_VERSION}", "--shadow-param", "spin=yes"],
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignd", default=os.path.join(ROOT, "target/release/assignd"))
    parser.add_argument("--guest", default=os.path.join(ROOT, "target/hostile-guests/spin-when-told.wasm"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--tasks", type=int, default=100, help="tasks per group")
    parser.add_argument("--interval-ms", type=int, default=33)
    parser.add_argument("--duration-s", type=int, default=20)
    parser.add_argument("--fuel-base", type=int, default=10**12,
                        help="serve --fuel-base of every host (the default lets the spinning "
                             "shadow run to its time limit)")
    parser.add_argument("--churn", help="loadgen --churn (default: up one member and back every 3 s)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="which variants, in this order each round")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write every run's figures here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (logs, reports)")
    args = parser.parse_args()
    if args.churn is None:
        m = args.members
        args.churn = DEFAULT_CHURN.replace("M1", str(m + 1)).replace("M", str(m))
    return args


def build(args):
    subprocess.run(["cargo", "build", "--release", "-p", "assignd", "--bin", "assignd"],
                   cwd=ROOT, check=True)
    if not os.path.exists(args.guest):
        subprocess.run(["cargo", "run", "--release", "-p", "assignd", "--example", "hostile_guests",
                        "--", os.path.dirname(args.guest)], cwd=ROOT, check=True)


def call(url, method, path, body=None, content_type="application/json"):
    request = urllib.request.Request(url + path, data=body, method=method)
    request.add_header("authorization", "Bearer " + TOKEN)
    if body is not None:
        request.add_header("content-type", content_type)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.read().decode()


class Serve:
    """A fresh `assignd serve` on a free port."""

    def __init__(self, binary, scratch, name, fuel_base):
        self.log_path = os.path.join(scratch, name + ".serve.log")
        self.log = open(self.log_path, "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ASSIGND_")}
        env["ASSIGND_ADMIN_TOKEN"] = TOKEN
        data_dir = os.path.join(scratch, name + ".data")
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
             "--fuel-base", str(fuel_base)],
            env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on http://"):
            self.stop()
            sys.exit(f"serve did not start: {line!r}; see {self.log_path}")
        self.url = line.strip().removeprefix("listening on ")
        self.pid = self.process.pid

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def metric_lines(text, name):
    """(labels dict, value) of every sample named exactly `name`."""
    pattern = re.compile(r"^" + re.escape(name) + r"(?:\{([^}]*)\})? (\S+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            yield labels, float(match.group(2))


def metric_sum(text, name, **want):
    return sum(v for labels, v in metric_lines(text, name)
               if all(labels.get(k) == w for k, w in want.items()))


def call_figures(metrics, groups_totals):
    """The live and shadow calls' counts and seconds from /metrics, and
    the groups' shadow totals summed."""
    shadow_failures = {}
    for labels, value in metric_lines(metrics, "assignd_shadow_failures_total"):
        if value:
            shadow_failures[labels.get("code", "?")] = shadow_failures.get(labels.get("code", "?"), 0) + value
    live_calls = metric_sum(metrics, "assignd_assignor_call_seconds_count")
    shadow_calls = metric_sum(metrics, "assignd_shadow_call_seconds_count")
    live_s = metric_sum(metrics, "assignd_assignor_call_seconds_sum")
    shadow_s = metric_sum(metrics, "assignd_shadow_call_seconds_sum")
    return {
        "live_calls": live_calls,
        "live_ms_per_call": live_s / live_calls * 1e3 if live_calls else None,
        "shadow_calls": shadow_calls,
        "shadow_ms_per_call": shadow_s / shadow_calls * 1e3 if shadow_calls else None,
        "shadow_failures": shadow_failures,
        "shadow_dropped": metric_sum(metrics, "assignd_shadow_calls_dropped_total"),
        "compared": sum(t.get("compared", 0) for t in groups_totals),
        "skipped": sum(t.get("skipped", 0) for t in groups_totals),
    }


def run_once(args, variant, scratch, label):
    serve = Serve(args.assignd, scratch, label, args.fuel_base)
    try:
        with open(args.guest, "rb") as f:
            # Every variant uploads it, so every host holds the same modules.
            call(serve.url, "POST", f"/v1/assignors?name={GUEST_NAME}&version={GUEST_VERSION}",
                 f.read(), "application/wasm")
        report = os.path.join(scratch, label + ".report.json")
        argv = [args.assignd, "loadgen", "--host", serve.url, "--token", TOKEN,
                "--groups", str(args.groups), "--members", str(args.members),
                "--tasks", str(args.tasks), "--interval-ms", str(args.interval_ms),
                "--duration", str(args.duration_s), "--churn", args.churn,
                "--host-pid", str(serve.pid), "--report", report] + VARIANTS[variant]
        load = open("/proc/loadavg").read().split()[0]
        with open(os.path.join(scratch, label + ".loadgen.log"), "w") as log:
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True)
        metrics = call(serve.url, "GET", "/metrics")
        totals = []
        if variant != "none":
            for g in range(args.groups):
                view = json.loads(call(serve.url, "GET", f"/v1/groups/loadgen-{g}/shadow"))
                totals.append(view["totals"])
        with open(report) as f:
            r = json.load(f)
        return {
            "variant": variant,
            "load": float(load),
            "heartbeats_per_s": r["heartbeats_per_s"],
            "p50_ms": r["latency_ms"]["p50"],
            "p99_ms": r["latency_ms"]["p99"],
            "p999_ms": r["latency_ms"]["p999"],
            "errors": r["errors"],
            "double_ownership": r["double_ownership"],
            "host_cpu_percent": (r.get("host") or {}).get("cpu_percent"),
            **call_figures(metrics, totals),
            "argv": argv,
        }
    finally:
        serve.stop()


def median(rows, key):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def print_table(args, results, load_before, load_after):
    variants = list(results)
    base = {k: median(results[variants[0]], k) for k in ("heartbeats_per_s", "p99_ms", "host_cpu_percent")}
    loads = [r["load"] for rows in results.values() for r in rows]
    print(f"\n{args.groups} groups × {args.members} members × {args.tasks} tasks, every "
          f"{args.interval_ms} ms, {args.duration_s} s a run, churn `{args.churn}`, "
          f"`serve --fuel-base {args.fuel_base}`; {args.rounds} "
          f"round(s) of {' '.join(variants)}, medians; nproc {os.cpu_count()}; load average "
          f"before `{load_before}`, after `{load_after}`, 1-min at each run's start "
          f"{min(loads):.2f}–{max(loads):.2f}\n")
    print("| shadow | heartbeats/s | p50 ms | p99 ms | p99.9 ms | host CPU % | live calls | "
          "live ms/call | shadow calls | shadow ms/call | shadow failures | skipped | "
          "hb/s ÷ none | p99 ÷ none | CPU ÷ none | errors (all rounds) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for variant, rows in results.items():
        m = {k: median(rows, k) for k in rows[0] if isinstance(rows[0][k], (int, float))
             or rows[0][k] is None}
        failures = {}
        for r in rows:
            for code, n in r["shadow_failures"].items():
                failures.setdefault(code, []).append(n)
        failures_text = ", ".join(f"{code} {statistics.median(ns):.0f}" for code, ns in failures.items()) or "0"

        def ratio(key):
            return m[key] / base[key] if m.get(key) and base[key] else None
        print(f"| {variant} | {fmt(m['heartbeats_per_s'], 0)} | {fmt(m['p50_ms'])} | "
              f"{fmt(m['p99_ms'])} | {fmt(m['p999_ms'])} | {fmt(m['host_cpu_percent'], 0)} | "
              f"{fmt(m['live_calls'], 0)} | {fmt(m['live_ms_per_call'], 3)} | "
              f"{fmt(m['shadow_calls'], 0)} | {fmt(m['shadow_ms_per_call'], 3)} | {failures_text} | "
              f"{fmt(m['skipped'], 0)} | {fmt(ratio('heartbeats_per_s'))} | {fmt(ratio('p99_ms'))} | "
              f"{fmt(ratio('host_cpu_percent'))} | {sum(r['errors'] for r in rows)} |")


def main():
    args = parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    if not args.skip_build:
        build(args)
    for path in (args.assignd, args.guest):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing; run without --skip-build")
    scratch = tempfile.mkdtemp(prefix="shadow-cost-")
    results = {v: [] for v in variants}
    try:
        load_before = open("/proc/loadavg").read().strip()
        for r in range(args.rounds):
            for variant in variants:
                row = run_once(args, variant, scratch, f"r{r + 1}-{variant}")
                results[variant].append(row)
                print(f"round {r + 1} {variant}: load {row['load']:.2f} "
                      f"{row['heartbeats_per_s']:.0f}/s p50 {row['p50_ms']:.2f} "
                      f"p99 {row['p99_ms']:.2f} p99.9 {row['p999_ms']:.2f} ms "
                      f"CPU {fmt(row['host_cpu_percent'], 0)} % live {row['live_calls']:.0f} "
                      f"({fmt(row['live_ms_per_call'], 3)} ms) shadow {row['shadow_calls']:.0f} "
                      f"({fmt(row['shadow_ms_per_call'], 3)} ms) failures {row['shadow_failures']} "
                      f"dropped {row['shadow_dropped']:.0f} skipped {row['skipped']} "
                      f"errors {row['errors']}", file=sys.stderr, flush=True)
        load_after = open("/proc/loadavg").read().strip()
        print_table(args, results, load_before, load_after)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"churn": args.churn, "load_before": load_before,
                           "load_after": load_after, "runs": results}, f, indent=2)
        return 0
    finally:
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
