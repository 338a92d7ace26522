#!/usr/bin/env python3
"""What idle groups cost a host (docs/benchmarks.md, "Idle groups").

For each count in --counts (default 1000,10000,100000) it starts
`ASSIGND serve` on a free port with a fresh data dir (`--fsync never`, so
creating the groups is quick), creates that many groups (one topic of 4
partitions, a static member that joined once and then went away for
good: its slot waits out a long registration timeout, so every group
holds a member and a deadline but nothing happens), waits --settle-s,
then measures the server's CPU (utime + stime from /proc/PID/stat) over
--window-s seconds of nothing happening, and its RSS. Prints a Markdown
table: groups, CPU ms per second of wall time, RSS MiB, RSS per group.

Builds nothing:
    cargo build --release -p assignd
    python3 host/benches/idle_cost.py [--assignd target/release/assignd]
        [--counts 1000,10000,100000] [--window-s 30]
Python 3.11, standard library only.
"""
import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TOKEN = "idle-cost-admin-token-0123456789"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignd", default="target/release/assignd")
    parser.add_argument("--counts", default="1000,10000,100000")
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--settle-s", type=float, default=5.0)
    parser.add_argument("--extra", default="", help="more serve flags, space-separated")
    return parser.parse_args()


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) * 1000.0 / CLOCK_TICKS


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def start(assignd, extra):
    data_dir = tempfile.mkdtemp(prefix="assignd-idle-")
    env = dict(os.environ, ASSIGND_ADMIN_TOKEN=TOKEN)
    args = [assignd, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--fsync", "never"]
    args += [a for a in extra.split() if a]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on http://"):
        proc.kill()
        sys.exit(f"assignd serve did not start: {line!r}")
    host, port = line.removeprefix("listening on http://").rsplit(":", 1)
    return proc, data_dir, (host, int(port))


def call(conn, method, path, body=None):
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        sys.exit(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data) if data else None


def create_idle_groups(address, count):
    conn = http.client.HTTPConnection(*address, timeout=60)
    config = {
        "topics": [{"name": "orders", "partitions": 4}],
        # The member's slot outlives the measurement: a deadline per group,
        # far away.
        "registration_timeout_ms": 24 * 3600 * 1000,
        "expansion_timeout_ms": 1,
    }
    for i in range(count):
        group = f"idle-{i}"
        call(conn, "PUT", f"/v1/groups/{group}", config)
        joined = call(conn, "POST", f"/v1/groups/{group}/heartbeat", {
            "member_id": "", "member_name": "away", "member_epoch": 0, "topics": ["orders"],
        })
        # A static leave: the slot waits for its registration timeout.
        call(conn, "POST", f"/v1/groups/{group}/heartbeat", {
            "member_id": joined["member_id"], "member_name": "away", "member_epoch": -1,
        })
    conn.close()


def main():
    args = parse_args()
    rows = []
    for count in [int(c) for c in args.counts.split(",")]:
        proc, data_dir, address = start(args.assignd, args.extra)
        try:
            began = time.monotonic()
            create_idle_groups(address, count)
            created_s = time.monotonic() - began
            time.sleep(args.settle_s)
            cpu_before, wall_before = cpu_ms(proc.pid), time.monotonic()
            time.sleep(args.window_s)
            cpu_after, wall_after = cpu_ms(proc.pid), time.monotonic()
            rss = rss_mib(proc.pid)
            per_s = (cpu_after - cpu_before) / (wall_after - wall_before)
            rows.append((count, per_s, rss, created_s))
            print(f"{count} groups: {per_s:.2f} CPU ms/s, RSS {rss:.1f} MiB "
                  f"(created in {created_s:.0f} s)", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            shutil.rmtree(data_dir, ignore_errors=True)
    print("| idle groups | host CPU (ms per s) | RSS (MiB) | RSS per group (KiB) |")
    print("|---|---|---|---|")
    for count, per_s, rss, _ in rows:
        print(f"| {count:,} | {per_s:.2f} | {rss:.1f} | {rss * 1024 / count:.2f} |")
    print(f"\n(window {args.window_s:.0f} s after {args.settle_s:.0f} s settling; load average "
          f"{open('/proc/loadavg').read().split()[0]})")


if __name__ == "__main__":
    main()
