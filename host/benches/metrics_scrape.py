#!/usr/bin/env python3
"""The cost of a `/metrics` scrape as groups grow.

Starts `ASSIGND serve --fsync never` on a scratch data dir, creates GROUPS
groups (4 tasks, `range`) each with one member that joins and is assigned
(so every group has had an assignor call), waits for the gauges' scan, then
scrapes `/metrics` (and `/metrics?groups=true`) SCRAPES times and prints
the body's size and the server's CPU time per scrape (utime + stime from
/proc/PID/stat, around the scrapes).

    python3 host/benches/metrics_scrape.py ASSIGND [GROUPS] [SCRAPES]
"""
import http.client, json, os, shutil, subprocess, sys, tempfile, time

TOKEN = "metrics-scrape-token-0123"


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    binary = sys.argv[1]
    groups = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    scrapes = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    data_dir = tempfile.mkdtemp(prefix="metrics-scrape-")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--fsync", "never", "--data-dir", data_dir],
        env=dict(os.environ, ASSIGND_ADMIN_TOKEN=TOKEN),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = server.stdout.readline().strip().removeprefix("listening on http://")
        host, port = address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=120)

        def call(method, path, body=None):
            headers = {"authorization": "Bearer " + TOKEN}
            if body is not None:
                headers["content-type"] = "application/json"
                body = json.dumps(body)
            conn.request(method, path, body, headers)
            response = conn.getresponse()
            return response.status, response.read()

        config = {"topics": [{"name": "orders", "partitions": 4}], "assignor": "range",
                  "learners": "off", "expansion_timeout_ms": 1}
        for g in range(groups):
            status, answer = call("PUT", f"/v1/groups/group-{g:05}", config)
            assert status == 201, (status, answer)
            status, answer = call("POST", f"/v1/groups/group-{g:05}/heartbeat",
                                  {"member_id": "", "member_epoch": 0, "topics": ["orders"]})
            assert status == 200, (status, answer)
        # Every group assigned and scanned.
        deadline = time.time() + 600
        while True:
            status, text = call("GET", "/metrics")
            calls = sum(float(line.rsplit(" ", 1)[1]) for line in text.decode().splitlines()
                        if line.startswith("assignd_assignor_calls_total{"))
            if calls >= groups:
                break
            assert time.time() < deadline, "not every group was assigned in time"
            time.sleep(1)
        time.sleep(2)
        for path in ["/metrics", "/metrics?groups=true"]:
            call("GET", path)  # warm
            before = cpu_seconds(server.pid)
            for _ in range(scrapes):
                status, text = call("GET", path)
                assert status in (200, 400), status
            per_scrape = (cpu_seconds(server.pid) - before) / scrapes
            print(f"{groups} groups  GET {path:<22} status {status}  {len(text):>10} bytes  "
                  f"{len(text.splitlines()):>8} lines  {per_scrape:.3f} CPU-s/scrape")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
