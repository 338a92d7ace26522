#!/usr/bin/env python3
"""Routing tables answered per second, side by side with steady heartbeats
on the same host, in one run (docs/benchmarks.md, "Routing").

Starts `ASSIGND serve` (the default shard count) on a free port with a
fresh data dir, and settles GROUPS groups of MEMBERS members as
host/benches/heartbeat_ratio.py does (the same code: one topic of
PARTITIONS partitions, members joined as the client library joins), then
gives each group a reader token. Two wrk scripts: the members' steady
heartbeats (heartbeat_ratio.py's), and `GET /v1/groups/{group}/routes`
with the group's reader token, cycling through the groups (a non-blocking
read of the whole table, as a router's first read or a gateway's poll).
ROUNDS rounds of `wrk -t2 -c64 -d10s --latency`, one of each script per
round, the order alternated every round, on keep-alive connections; a
Markdown table of the medians: requests/s, p50, p99, non-2xx answers, the
server's CPU during the rounds (/proc/PID/stat), and the size of one
table.

With `--json FILE`, the medians and every round's figures are also
written to FILE (host/benches/figures.py reads them).

Builds nothing:
    cargo build --release -p assignd
    python3 host/benches/routes_ratio.py [--rounds 3] [--assignd target/release/assignd] [--json FILE]
Needs wrk on PATH (exit 2 if not). Python 3.11, standard library only.
"""
import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile

# No __pycache__ beside the scripts.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heartbeat_ratio as hr  # noqa: E402  (its settle, Server, Client and wrk runner)

READER_TOKEN_PREFIX = "routes-ratio-reader-"

LUA_TEMPLATE = r"""-- Written by host/benches/routes_ratio.py: each thread cycles through
-- every group's routing table (a non-blocking read with the group's reader
-- token), starting at its own offset, and counts answers other than 200.
local groups = {
%(groups)s
}
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  requests = {}
  for i, g in ipairs(groups) do
    requests[i] = wrk.format("GET", "/v1/groups/" .. g[1] .. "/routes",
                             {["Authorization"] = "Bearer " .. g[2]})
  end
  next_request = (id * 7919) %% #requests
  non_200 = 0
  statuses = ""
end

""" + hr.LUA_ROTATION


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignd", default="target/release/assignd")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each script")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of a group's topic")
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    parser.add_argument("--connections", type=int, default=64, help="wrk -c")
    parser.add_argument("--duration-s", type=int, default=10, help="wrk -d, seconds per round")
    parser.add_argument("--fsync", default="always", choices=["always", "never"])
    parser.add_argument("--json", metavar="FILE",
                        help="also write the medians and every round's figures here")
    args = parser.parse_args()
    # What heartbeat_ratio's settle reads.
    args.session_timeout_ms, args.heartbeat_interval_ms = 300_000, 5_000
    return args


def give_reader_tokens(server, args):
    """Each group's config again with a reader token (absent fields keep
    theirs); returns (group, token) pairs. Checks that a table answers."""
    client = hr.Client(server.address)
    config = {
        "topics": [{"name": hr.TOPIC, "partitions": args.partitions}],
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
    }
    groups = [f"group-{g:03}" for g in range(args.groups)]
    tokens = []
    for group in groups:
        token = READER_TOKEN_PREFIX + group
        status, answer = client.call("PUT", f"/v1/groups/{group}",
                                     dict(config, reader_token=token), admin=True)
        if status not in (200, 201):
            sys.exit(f"PUT /v1/groups/{group} with a reader token: {status} {answer}")
        tokens.append((group, token))
    return tokens


def table_bytes(server, group, token):
    """The size of one routing table's answer body."""
    host, port = server.address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", f"/v1/groups/{group}/routes", headers={"authorization": "Bearer " + token})
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    if answer.status != 200:
        sys.exit(f"GET /v1/groups/{group}/routes: {answer.status} {body[:200]!r}")
    return len(body)


def write_routes_script(path, tokens):
    rows = ",\n".join(f'  {{"{g}", "{t}"}}' for g, t in tokens)
    with open(path, "w") as f:
        f.write(LUA_TEMPLATE % {"groups": rows})


def main():
    args = parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not on PATH; install it with: apt-get install -y wrk", file=sys.stderr)
        return 2
    if not os.access(args.assignd, os.X_OK):
        print(f"{args.assignd} is not an executable; build it first:\n"
              "  cargo build --release -p assignd", file=sys.stderr)
        return 2
    scratch = tempfile.mkdtemp(prefix="routes-ratio-")
    env = dict(os.environ, ASSIGND_ADMIN_TOKEN=hr.TOKEN)
    env.pop("ASSIGND_DATA_DIR", None)
    server = hr.Server("assignd", [args.assignd, "serve", "--listen", "127.0.0.1:0",
                                   "--data-dir", os.path.join(scratch, "data"),
                                   "--fsync", args.fsync], scratch, env)
    try:
        scripts = {"heartbeats": os.path.join(scratch, "heartbeats.lua"),
                   "routes": os.path.join(scratch, "routes.lua")}
        hr.write_script(scripts["heartbeats"], hr.settle(server, args))
        tokens = give_reader_tokens(server, args)
        write_routes_script(scripts["routes"], tokens)
        size = table_bytes(server, *tokens[0])
        load_before = open("/proc/loadavg").read().strip()
        results = {name: [] for name in scripts}
        for r in range(args.rounds):
            order = list(scripts) if r % 2 == 0 else list(reversed(scripts))
            for name in order:
                server.script = scripts[name]
                result = hr.run_wrk(server, args)
                results[name].append(result)
                print(f"round {r + 1} {name}: {result['rps']:.0f}/s p50 {result['p50_ms']:.2f} ms "
                      f"p99 {result['p99_ms']:.2f} ms CPU {result['cpu_percent']:.0f} % "
                      f"non-2xx {result['non_2xx']} script: {result['script']} "
                      f"{result['socket_errors']}", file=sys.stderr)
        load_after = open("/proc/loadavg").read().strip()
        rows = {}
        for name, rounds in results.items():
            rows[name] = {key: statistics.median(x[key] for x in rounds)
                          for key in ("rps", "p50_ms", "p99_ms", "cpu_percent")}
            rows[name]["non_2xx"] = sum(x["non_2xx"] for x in rounds)
            rows[name]["rounds"] = [{k: v for k, v in x.items() if k != "argv"} for x in rounds]
        wrk = " ".join(results["routes"][0]["argv"][:5])
        print(f"\n{args.groups} groups of {args.members} settled members and {args.partitions} "
              f"tasks; one table {size:,} bytes; `{wrk}`, {args.rounds} round(s) of each, "
              f"alternating, medians; fsync {args.fsync}; load average before `{load_before}`, "
              f"after `{load_after}`\n")
        print("| requests | per second | p50 ms | p99 ms | non-2xx | server CPU % |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, label in (("routes", "GET /routes (reader token)"),
                            ("heartbeats", "steady heartbeats")):
            row = rows[name]
            print(f"| {label} | {row['rps']:,.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
                  f"{row['non_2xx']} | {row['cpu_percent']:.0f} |")
        if args.json:
            with open(args.json, "w") as f:
                json_out = {"groups": args.groups, "members": args.members * args.groups,
                            "partitions": args.partitions, "rounds": args.rounds, "wrk": wrk,
                            "fsync": args.fsync, "table_bytes": size,
                            "load_before": load_before, "load_after": load_after, **rows}
                json.dump(json_out, f, indent=2)
        return 0
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
