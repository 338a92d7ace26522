"""What the console costs, measured in headless Chromium against the real
binary on a host of 1,000 groups (docs/benchmarks.md, "Shadow assignors
and the console").

A fresh ``assignd serve`` (tests/console/host.py) gets ``--groups`` groups
over the API: ``--live-groups`` of them created by ``assignd loadgen``,
whose members beat every second for the whole run so that the pages have
life, the rest created empty with ``PUT /v1/groups/{g}``. Then:

- **page load**: ``--loads`` loads of the groups page (and as many of a
  live group's page), each from ``about:blank`` in one logged-in tab:
  Navigation Timing (response end, DOMContentLoaded, load) and the mark
  ``assignd:rendered``, which the console sets when a page's first read
  has been drawn (the groups table with its rows, the group's members
  and grid); medians, the first load (cold cache) included;
- **host CPU**: utime + stime of the host's ``/proc/PID/stat`` over
  ``--window-s`` seconds with no console open, then with ``--consoles``
  open (one headless Chromium, tabs half on the groups page, half on live
  groups' pages, none of them throttled in the background), ``--rounds``
  times in turn; and the host's GET requests/s in each window, from the
  ``assignd_http_request_seconds`` counts of ``/metrics``.

Prints a Markdown table. ASSIGND_BIN names the binary (default
target/release/assignd); needs Debian's chromium, chromium-driver and
python3-selenium (as tests/console/test.sh)::

    cargo build --release -p assignd
    /usr/bin/python3 tests/console/bench_console.py [--groups 1000] [--consoles 10]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from host import ROOT, Host

RENDERED_MARK = "assignd:rendered"
LOAD_TIMEOUT_S = 120
LIVE_PREFIX = "live"
#: Loadgen's members outlive the run: it is stopped at the end.
LOADGEN_DURATION_S = 3600


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=1000, help="groups on the host, all told")
    parser.add_argument("--live-groups", type=int, default=50, help="of them with members (loadgen)")
    parser.add_argument("--members", type=int, default=4, help="members of each live group")
    parser.add_argument("--loads", type=int, default=10, help="page loads timed per page")
    parser.add_argument("--consoles", type=int, default=10, help="tabs open in the busy window")
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (no console, consoles)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure here")
    return parser.parse_args()


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900",
                     # Every tab polls as a tab on its own screen would.
                     "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
                     "--disable-backgrounding-occluded-windows"):
        options.add_argument(argument)
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=options)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_requests(host):
    """GET requests the host has answered, by its request histograms."""
    request = urllib.request.Request(host.url + "/metrics")
    request.add_header("authorization", f"Bearer {host.admin_token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("assignd_http_request_seconds_count{") and 'method="GET"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_loadgen(host, args):
    binary = os.environ.get("ASSIGND_BIN", str(ROOT / "target" / "release" / "assignd"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSIGND_")}
    return subprocess.Popen(
        [binary, "loadgen", "--host", host.url, "--token", host.admin_token, "--prefix", LIVE_PREFIX,
         "--groups", str(args.live_groups), "--members", str(args.members), "--tasks", "16",
         "--interval-ms", "1000", "--duration", str(LOADGEN_DURATION_S)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def fill(host, args, loadgen):
    """The empty groups, then waits for loadgen's groups to be stable."""
    for g in range(args.groups - args.live_groups):
        host.call("PUT", f"/v1/groups/quiet-{g:04}", {
            "topics": [{"name": "orders", "partitions": 16}], "assignor": "sticky"})

    def live_stable():
        if loadgen.poll() is not None:
            raise RuntimeError(f"loadgen exited with {loadgen.returncode}")
        listing = host.call("GET", "/v1/groups")["groups"]
        live = [g for g in listing if g["name"].startswith(LIVE_PREFIX + "-")]
        return (len(listing) == args.groups and len(live) == args.live_groups
                and all(g["state"] == "stable" and g["members"] == args.members for g in live))
    host.wait_until(live_stable, "every live group stable", timeout_s=180)


def log_in(driver, host):
    driver.get(host.url + "/ui")
    driver.execute_script("sessionStorage.setItem('assignd.token', arguments[0]);"
                          "sessionStorage.setItem('assignd.access', 'admin');", host.admin_token)


def timed_load(driver, url):
    """One load of `url` from about:blank: Navigation Timing and the
    rendered mark, in ms from the navigation's start."""
    driver.get("about:blank")
    driver.get(url)
    WebDriverWait(driver, LOAD_TIMEOUT_S).until(
        lambda d: d.execute_script(f"return performance.getEntriesByName('{RENDERED_MARK}').length > 0"),
        "the rendered mark")
    return driver.execute_script(f"""
        const nav = performance.getEntriesByType('navigation')[0];
        return {{response_end_ms: nav.responseEnd, dom_content_loaded_ms: nav.domContentLoadedEventEnd,
                 load_ms: nav.loadEventEnd,
                 rendered_ms: performance.getEntriesByName('{RENDERED_MARK}')[0].startTime,
                 rows: document.querySelectorAll('#groups-table tbody tr').length,
                 grid_rows: document.querySelectorAll('#assignment-grid tbody tr').length}};""")


def page_loads(driver, host, args):
    pages = {"groups": host.url + "/ui#/groups",
             "group": host.url + f"/ui#/groups/{LIVE_PREFIX}-0"}
    loads = {}
    for page, url in pages.items():
        loads[page] = [timed_load(driver, url) for _ in range(args.loads)]
        for load in loads[page]:
            shown = load["rows"] if page == "groups" else load["grid_rows"]
            want = args.groups if page == "groups" else args.members
            if shown != want:
                raise RuntimeError(f"{page} page rendered {shown} rows, not {want}: {load}")
    return loads


def window(host, args):
    """The host's CPU (% of one core) and GET requests/s over a window."""
    pid = host.process.pid
    requests_before, cpu_before, started = get_requests(host), cpu_seconds(pid), time.monotonic()
    time.sleep(args.window_s)
    cpu_after, elapsed = cpu_seconds(pid), time.monotonic() - started
    requests = get_requests(host) - requests_before
    return {"cpu_percent": (cpu_after - cpu_before) / elapsed * 100, "get_per_s": requests / elapsed,
            "load": float(open("/proc/loadavg").read().split()[0])}


def open_consoles(driver, host, args):
    """`args.consoles` tabs, half on the groups page, half on live groups,
    each waited for until its page rendered; returns the tabs' handles."""
    first = driver.current_window_handle
    handles = []
    for i in range(args.consoles):
        driver.switch_to.new_window("tab")
        log_in(driver, host)
        url = (host.url + "/ui#/groups" if i % 2 == 0
               else host.url + f"/ui#/groups/{LIVE_PREFIX}-{i // 2}")
        timed_load(driver, url)
        handles.append(driver.current_window_handle)
    driver.switch_to.window(first)
    return handles


def close_consoles(driver, handles):
    first = driver.current_window_handle
    for handle in handles:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(first)


def windows(driver, host, args):
    results = {"none": [], "consoles": []}
    driver.get("about:blank")
    for _ in range(args.rounds):
        results["none"].append(window(host, args))
        handles = open_consoles(driver, host, args)
        results["consoles"].append(window(host, args))
        close_consoles(driver, handles)
        driver.get("about:blank")
    return results


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def print_table(args, loads, cpu, load_before, load_after):
    print(f"\n{args.groups} groups ({args.live_groups} with {args.members} members beating every "
          f"second, through `assignd loadgen`); headless Chromium; nproc {os.cpu_count()}; "
          f"load average before `{load_before}`, after `{load_after}`\n")
    print(f"Page loads, medians of {args.loads} (ms from the navigation's start):\n")
    print("| page | response end | DOMContentLoaded | load | first data rendered | min–max rendered |")
    print("|---|---:|---:|---:|---:|---:|")
    for page, rows in loads.items():
        rendered = [r["rendered_ms"] for r in rows]
        print(f"| {page} | {median(rows, 'response_end_ms'):.0f} | "
              f"{median(rows, 'dom_content_loaded_ms'):.0f} | {median(rows, 'load_ms'):.0f} | "
              f"**{median(rows, 'rendered_ms'):.0f}** | {min(rendered):.0f}–{max(rendered):.0f} |")
    print(f"\nThe host's CPU over {args.window_s:.0f} s windows, {args.rounds} round(s) in turn, "
          "medians:\n")
    print("| consoles open | host CPU, % of one core | GET requests/s | 1-min load at the end |")
    print("|---|---:|---:|---:|")
    for name, rows in cpu.items():
        label = "0" if name == "none" else str(args.consoles)
        print(f"| {label} | {median(rows, 'cpu_percent'):.1f} | {median(rows, 'get_per_s'):.0f} | "
              f"{median(rows, 'load'):.2f} |")


def main():
    args = parse_args()
    binary = os.environ.get("ASSIGND_BIN", str(ROOT / "target" / "release" / "assignd"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"no binary at {binary} (cargo build --release -p assignd)")
    host = Host(binary)
    loadgen = driver = None
    try:
        loadgen = start_loadgen(host, args)
        fill(host, args, loadgen)
        driver = browser()
        log_in(driver, host)
        load_before = open("/proc/loadavg").read().strip()
        loads = page_loads(driver, host, args)
        cpu = windows(driver, host, args)
        load_after = open("/proc/loadavg").read().strip()
        print_table(args, loads, cpu, load_before, load_after)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"loads": loads, "cpu": cpu, "load_before": load_before,
                           "load_after": load_after}, f, indent=2)
        return 0
    finally:
        if driver is not None:
            driver.quit()
        if loadgen is not None and loadgen.poll() is None:
            loadgen.terminate()
            loadgen.wait(timeout=30)
        host.stop()


if __name__ == "__main__":
    sys.exit(main())
