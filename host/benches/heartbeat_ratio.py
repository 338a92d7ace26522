#!/usr/bin/env python3
"""Steady member heartbeats through the real HTTP server, against a bare
axum handler, side by side in one run (docs/benchmarks.md, "Heartbeat
throughput against a bare handler").

Starts, each on a free port with a fresh data dir:
  - `ASSIGND serve --shards 1` and `ASSIGND serve` (the default shard
    count); a binary without `--shards` gets one target, `ASSIGND serve`;
  - the bare handler (host/examples/bare_heartbeat.rs), the ceiling: what
    HTTP and JSON alone cost here.
On each assignd it creates GROUPS groups (one topic of PARTITIONS
partitions), joins MEMBERS members to each as the client library does
(`task_ranges`), heartbeats them until every group is stable, and writes a
wrk script that cycles through every member's steady heartbeat (its id,
epoch and owned tasks). The bare handler gets the first assignd's script.
Then ROUNDS rounds of `wrk -t2 -c64 -d10s --latency`, one per target each,
in an order rotated every round, and a Markdown table of the medians: the
requests/s, p50 and p99, the ratio of each assignd's requests/s to the bare
handler's, non-2xx answers, and each server's CPU during its rounds
(/proc/PID/stat) and RSS after (/proc/PID/status).

With `--assignd` given more than once (a previous commit's build and this
one's, say), every binary is measured, each with 1 shard and the default,
in the same rotation, each target named by its binary's path.

With `--json FILE`, the medians and every round's figures are also
written to FILE (host/benches/figures.py reads them).

Builds nothing:
    cargo build --release -p assignd --bin assignd --example bare_heartbeat
    python3 host/benches/heartbeat_ratio.py [--rounds 3] [--assignd target/release/assignd]
        [--bare target/release/examples/bare_heartbeat] [--json FILE]
Needs wrk on PATH (exit 2 if not). Python 3.11, standard library only.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TOKEN = "heartbeat-ratio-admin-token-0123456789"
TOPIC = "orders"
SETTLE_TIMEOUT_S = 300
STARTUP_TIMEOUT_S = 60


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignd", action="append",
                        help="an assignd binary (default target/release/assignd); give it "
                             "twice to measure two builds side by side in one run")
    parser.add_argument("--bare", default="target/release/examples/bare_heartbeat")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per target")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of a group's topic")
    parser.add_argument("--threads", type=int, default=2, help="wrk -t")
    parser.add_argument("--connections", type=int, default=64, help="wrk -c")
    parser.add_argument("--duration-s", type=int, default=10, help="wrk -d, seconds per round")
    parser.add_argument("--session-timeout-ms", type=int, default=300_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=5_000)
    parser.add_argument("--fsync", default="always", choices=["always", "never"])
    parser.add_argument("--json", metavar="FILE",
                        help="also write the medians and every round's figures here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch folder (data dirs, scripts, logs)")
    return parser.parse_args()


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """A started server process and its address."""

    def __init__(self, name, argv, scratch, env=None):
        self.name = name
        self.log_path = os.path.join(scratch, re.sub(r"[^a-z0-9]+", "-", name.lower()) + ".log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True)
        self.address = self._address()
        self.url = "http://" + self.address
        self.cpu_s = []
        self.script = None

    def _address(self):
        # The first line is `listening on http://ADDR`, printed once bound.
        line = self.process.stdout.readline()
        if not line.startswith("listening on http://"):
            self.stop()
            sys.exit(f"{self.name} did not start: {line!r}; see {self.log_path}")
        return line.strip().removeprefix("listening on http://")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class Client:
    """One kept-alive HTTP/1.1 connection, reopened if the server closes it."""

    def __init__(self, address):
        host, port = address.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.conn = None

    def call(self, method, path, body=None, admin=False):
        headers = {}
        if admin:
            headers["authorization"] = "Bearer " + TOKEN
        if body is not None:
            headers["content-type"] = "application/json"
            body = body if isinstance(body, str) else json.dumps(body)
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
            try:
                self.conn.request(method, path, body, headers)
                response = self.conn.getresponse()
                data = response.read()
                return response.status, (json.loads(data) if data else None)
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise


def expand(items):
    """An answer's task list (`[topic, p]` and `[topic, first, last]`) as sorted tasks."""
    tasks = []
    for item in items:
        topic, first = item[0], item[1]
        last = item[2] if len(item) == 3 else first
        tasks.extend((topic, p) for p in range(first, last + 1))
    return sorted(tasks)


def compact(tasks):
    """Sorted tasks as the client library sends `owned`: runs as `[topic, first, last]`."""
    runs = []
    for topic, p in tasks:
        if runs and runs[-1][0] == topic and runs[-1][2] + 1 == p:
            runs[-1][2] = p
        else:
            runs.append([topic, p, p])
    return [[t, f] if f == l else [t, f, l] for t, f, l in runs]


def heartbeat_body(member):
    """A heartbeat as `assignd_client` writes it (field order and all)."""
    body = {"member_id": member["id"], "member_epoch": member["epoch"]}
    if member["epoch"] == 0:
        body["topics"] = [TOPIC]
    body.update({
        "rack": None,
        "capacity": 1,
        "owned": compact(member["owned"]),
        "lags": [[t, p, 0] for t, p in member["learner"]],
        "drain": False,
        "task_ranges": True,
    })
    return json.dumps(body, separators=(",", ":"))


def settle(server, args):
    """Creates the groups, joins their members and heartbeats them until
    every group is stable; returns every member's steady heartbeat as
    (path, body)."""
    client = Client(server.address)
    config = {
        "topics": [{"name": TOPIC, "partitions": args.partitions}],
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
    }
    groups = [f"group-{g:03}" for g in range(args.groups)]
    for group in groups:
        status, answer = client.call("PUT", f"/v1/groups/{group}", config, admin=True)
        if status not in (200, 201):
            sys.exit(f"{server.name}: PUT /v1/groups/{group}: {status} {answer}")
    members = [{"group": g, "id": "", "epoch": 0, "owned": [], "learner": [], "steady": False}
               for g in groups for _ in range(args.members)]
    per_member = args.partitions // args.members
    started = time.monotonic()
    sweeps = 0
    while True:
        sweeps += 1
        for member in members:
            path = f"/v1/groups/{member['group']}/heartbeat"
            sent_epoch, sent_owned = member["epoch"], member["owned"]
            status, answer = client.call("POST", path, heartbeat_body(member))
            if status == 429:  # a join past the group's join rate: retry next sweep
                continue
            if status != 200:
                sys.exit(f"{server.name}: heartbeat of {member}: {status} {answer}")
            member["id"] = answer["member_id"]
            member["epoch"] = answer["member_epoch"]
            # The member releases revoking tasks at once: it holds its active ones.
            member["owned"] = expand(answer["active"])
            member["learner"] = expand(answer["learner"])
            member["steady"] = (answer["member_epoch"] == sent_epoch
                                and member["owned"] == sent_owned
                                and len(member["owned"]) == per_member
                                and not answer["revoking"] and not answer["learner"])
        status, listing = client.call("GET", "/v1/groups", admin=True)
        if status != 200:
            sys.exit(f"{server.name}: GET /v1/groups: {status} {listing}")
        stable = all(g["state"] == "stable" and g["members"] == args.members
                     for g in listing["groups"])
        if stable and all(m["steady"] for m in members):
            break
        if time.monotonic() - started > SETTLE_TIMEOUT_S:
            unsteady = sum(not m["steady"] for m in members)
            sys.exit(f"{server.name}: not settled after {SETTLE_TIMEOUT_S} s "
                     f"({unsteady} members not steady)")
        time.sleep(0.5)
    print(f"{server.name}: {len(members)} members in {len(groups)} groups settled "
          f"in {time.monotonic() - started:.1f} s ({sweeps} sweeps)", file=sys.stderr)
    return [(f"/v1/groups/{m['group']}/heartbeat", heartbeat_body(m)) for m in members]


# What every wrk script of these benches ends with: each thread sends its
# requests in turn, and the answers other than 200 are counted and the
# first few shown (a %-template: `%%` is one `%`).
LUA_ROTATION = r"""function request()
  next_request = next_request %% #requests + 1
  return requests[next_request]
end

function response(status, headers, body)
  if status ~= 200 then
    non_200 = non_200 + 1
    if non_200 <= 5 then
      statuses = statuses .. " " .. status
    end
  end
end

function done(summary, latency, requests)
  local total, seen = 0, ""
  for _, thread in ipairs(threads) do
    total = total + thread:get("non_200")
    seen = seen .. thread:get("statuses")
  end
  io.write(string.format("non-200 answers (script): %%d%%s\n", total,
                         total > 0 and (" (first:" .. seen .. ")") or ""))
end
"""

LUA_TEMPLATE = r"""-- Written by host/benches/heartbeat_ratio.py: each thread cycles through
-- every member's steady heartbeat, starting at its own offset, and counts
-- answers other than 200.
local heartbeats = {
%(heartbeats)s
}
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function init(args)
  requests = {}
  for i, hb in ipairs(heartbeats) do
    requests[i] = wrk.format("POST", hb[1], {["Content-Type"] = "application/json"}, hb[2])
  end
  next_request = (id * 7919) %% #requests
  non_200 = 0
  statuses = ""
end

""" + LUA_ROTATION


def write_script(path, heartbeats):
    def quoted(text):
        assert "]==]" not in text
        return "[==[" + text + "]==]"
    rows = ",\n".join(f"  {{{quoted(p)}, {quoted(b)}}}" for p, b in heartbeats)
    with open(path, "w") as f:
        f.write(LUA_TEMPLATE % {"heartbeats": rows})


def duration_ms(text):
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]


def run_wrk(server, args):
    argv = ["wrk", f"-t{args.threads}", f"-c{args.connections}", f"-d{args.duration_s}s",
            "--latency", "-s", server.script, server.url]
    pid = server.process.pid
    before = cpu_seconds(pid)
    started = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    wall_s = time.monotonic() - started
    cpu_percent = (cpu_seconds(pid) - before) / wall_s * 100
    if server.process.poll() is not None:
        sys.exit(f"{server.name} exited during its round; see {server.log_path}")
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    script = re.search(r"non-200 answers \(script\): (.*)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": duration_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1)),
        "p99_ms": duration_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1)),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "",
        "script": script.group(1) if script else "?",
        "cpu_percent": cpu_percent,
        "argv": argv,
    }


def start_targets(binaries, args, scratch):
    """Starts every assignd (1 shard and the default per binary) on a fresh
    data dir; returns them in order, each with its `shards` (None: the
    binary's only configuration)."""
    env = dict(os.environ, ASSIGND_ADMIN_TOKEN=TOKEN)
    env.pop("ASSIGND_DATA_DIR", None)
    servers = []

    def assignd(binary, name, shards, extra):
        data_dir = os.path.join(scratch, re.sub(r"[^a-z0-9]+", "-", name.lower()))
        argv = [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", data_dir,
                "--fsync", args.fsync] + extra
        server = Server(name, argv, scratch, env)
        server.binary, server.shards = binary, shards
        servers.append(server)

    try:
        for binary in binaries:
            prefix = f"{binary}, " if len(binaries) > 1 else "assignd, "
            help_text = subprocess.run([binary, "serve", "--help"], capture_output=True,
                                       text=True).stdout
            if "--shards" not in help_text:
                print(f"note: {binary} has no `serve --shards`; one target", file=sys.stderr)
                assignd(binary, prefix + "one core", None, [])
                continue
            assignd(binary, prefix + "1 shard", 1, ["--shards", "1"])
            # The default's label: the `[default: N]` of `--shards`' help.
            option = re.split(r"\n\s+-", help_text[help_text.index("--shards"):], maxsplit=1)[0]
            default = re.search(r"\[default: (\d+)\]", option)
            shards = int(default.group(1)) if default else None
            assignd(binary, prefix + (f"{shards} shards" if shards else "default shards"),
                    shards, [])
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def measure(targets, args):
    """ROUNDS rounds of wrk, one per target each, the order rotated every
    round; every round's figures by target name."""
    results = {t.name: [] for t in targets}
    for r in range(args.rounds):
        order = targets[r % len(targets):] + targets[:r % len(targets)]
        for target in order:
            result = run_wrk(target, args)
            results[target.name].append(result)
            print(f"round {r + 1} {target.name}: {result['rps']:.0f}/s "
                  f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms "
                  f"CPU {result['cpu_percent']:.0f} % non-2xx {result['non_2xx']} "
                  f"script: {result['script']} {result['socket_errors']}",
                  file=sys.stderr)
    return results


def summarize(targets, results, rss):
    """Per target: the medians of its rounds, its ratio to the bare handler
    (the first target), its errors and RSS."""
    def median(name, key):
        return statistics.median(x[key] for x in results[name])

    bare_rps, bare_p99 = median(targets[0].name, "rps"), median(targets[0].name, "p99_ms")
    rows = []
    for t in targets:
        rps, p99 = median(t.name, "rps"), median(t.name, "p99_ms")
        rows.append({
            "name": t.name,
            "binary": getattr(t, "binary", None),
            "shards": getattr(t, "shards", None),
            "rps": rps,
            "p50_ms": median(t.name, "p50_ms"),
            "p99_ms": p99,
            "ratio_to_bare": rps / bare_rps,
            "p99_to_bare": p99 / bare_p99,
            "non_2xx": sum(x["non_2xx"] for x in results[t.name]),
            "socket_errors": "; ".join(sorted({x["socket_errors"] for x in results[t.name]
                                               if x["socket_errors"]})) or "none",
            "cpu_percent": median(t.name, "cpu_percent"),
            "rss_mib": rss[t.name],
            "rounds": [{k: v for k, v in x.items() if k != "argv"} for x in results[t.name]],
        })
    return rows


def print_table(rows, args, wrk_argv, load_before, load_after):
    print(f"\n{args.groups * args.members} settled members in {args.groups} groups "
          f"({args.partitions} tasks, {args.members} members each); "
          f"`{' '.join(wrk_argv[:5])}`, {args.rounds} round(s) per "
          f"target, medians; fsync {args.fsync}; nproc {os.cpu_count()}; "
          f"load average before `{load_before}`, after `{load_after}`\n")
    print("| target | requests/s | p50 ms | p99 ms | ratio to bare | non-2xx | "
          "socket errors | server CPU % | RSS MiB after |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for row in rows:
        print(f"| {row['name']} | {row['rps']:,.0f} | {row['p50_ms']:.2f} | "
              f"{row['p99_ms']:.2f} | {row['ratio_to_bare']:.2f} | {row['non_2xx']} | "
              f"{row['socket_errors']} | {row['cpu_percent']:.0f} | {row['rss_mib']:.0f} |")


def main():
    args = parse_args()
    binaries = args.assignd or ["target/release/assignd"]
    if shutil.which("wrk") is None:
        print("wrk is not on PATH; install it with: apt-get install -y wrk", file=sys.stderr)
        return 2
    for binary in binaries + [args.bare]:
        if not os.access(binary, os.X_OK):
            print(f"{binary} is not an executable; build it first:\n"
                  "  cargo build --release -p assignd --bin assignd --example bare_heartbeat",
                  file=sys.stderr)
            return 2
    scratch = tempfile.mkdtemp(prefix="heartbeat-ratio-")
    targets = []
    try:
        servers = start_targets(binaries, args, scratch)
        targets.extend(servers)
        bare = Server("bare handler", [args.bare, "--listen", "127.0.0.1:0"], scratch)
        targets.insert(0, bare)
        for server in servers:
            server.script = os.path.join(scratch, re.sub(r"[^a-z0-9]+", "-", server.name) + ".lua")
            write_script(server.script, settle(server, args))
        bare.script = servers[0].script
        load_before = open("/proc/loadavg").read().strip()
        results = measure(targets, args)
        load_after = open("/proc/loadavg").read().strip()
        rss = {t.name: rss_mib(t.process.pid) for t in targets}
        rows = summarize(targets, results, rss)
        wrk_argv = results[bare.name][0]["argv"]
        print_table(rows, args, wrk_argv, load_before, load_after)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({
                    "members": args.groups * args.members, "groups": args.groups,
                    "partitions": args.partitions, "rounds": args.rounds,
                    "wrk": " ".join(wrk_argv[:5]), "fsync": args.fsync,
                    "nproc": os.cpu_count(), "load_before": load_before,
                    "load_after": load_after, "targets": rows,
                }, f, indent=2)
        return 0
    finally:
        for target in targets:
            target.stop()
        if args.keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
