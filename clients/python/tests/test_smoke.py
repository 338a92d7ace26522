"""One member, then two, against the real host (``ASSIGND_BIN``; skipped
without it): the tasks split 2/2 and no task is ever active on both."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from assignd import Listener, Member, MemberConfig, Task

ADMIN_TOKEN = "t0k-t0k-t0k-t0k-t0k"  # the host wants 16 characters at least
TASKS = {Task("orders", p) for p in range(4)}

pytestmark = pytest.mark.skipif(not os.environ.get("ASSIGND_BIN"), reason="ASSIGND_BIN is not set")


@pytest.fixture
def host(tmp_path):
    env = dict(os.environ, ASSIGND_ADMIN_TOKEN=ADMIN_TOKEN)
    server = subprocess.Popen(
        [os.environ["ASSIGND_BIN"], "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("listening on http://"), line
        yield line.split("listening on ", 1)[1]
    finally:
        server.kill()
        server.wait()


def create_group(base: str) -> None:
    config = {
        "topics": [{"name": "orders", "partitions": 4}],
        "heartbeat_interval_ms": 200,
        "expansion_timeout_ms": 200,
        # Stateless members: tasks move as soon as they are released.
        "learners": "off",
    }
    request = urllib.request.Request(
        f"{base}/v1/groups/g",
        data=json.dumps(config).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 201)


class Ledger:
    """Who processes what, as the listeners were told: a task enters on
    ``on_assigned`` and leaves on ``on_revoked`` / ``on_lost``, before the
    acknowledgement. A task on two members at once is a bug."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active = {}
        self.doubles = []

    def listener(self, name):
        ledger = self
        ledger.active[name] = set()

        class Tracking(Listener):
            def on_assigned(self, tasks, promoted):
                with ledger.lock:
                    for task in tasks:
                        if any(task in held for other, held in ledger.active.items() if other != name):
                            ledger.doubles.append(task)
                        ledger.active[name].add(task)

            def on_revoked(self, tasks):
                with ledger.lock:
                    ledger.active[name] -= set(tasks)

            on_lost = on_revoked

        return Tracking()


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_two_members_split_the_tasks_without_overlap(host):
    create_group(host)
    ledger = Ledger()
    config = MemberConfig(urls=host, group="g", topics=["orders"])
    a = Member(config, ledger.listener("a")).start()
    wait_for(lambda: a.assignment.active == TASKS and all(a.may_process(t) for t in TASKS))
    b = Member(config, ledger.listener("b")).start()
    wait_for(lambda: len(a.assignment.active) == 2 and len(b.assignment.active) == 2)
    assert a.assignment.active | b.assignment.active == TASKS
    assert all(b.may_process(t) for t in b.assignment.active)
    assert not any(a.may_process(t) for t in b.assignment.active)
    assert ledger.doubles == []
    assert b.leave(timeout=10) == "left"
    assert a.leave(timeout=10) == "left"


WORKER = Path(__file__).resolve().parents[1] / "worker"


def test_the_worker_prints_its_events_and_drains_on_sigterm(host, tmp_path):
    create_group(host)
    worker = subprocess.Popen(
        [
            str(WORKER),
            "--url",
            host,
            "--group",
            "g",
            "--name",
            "w",
            "--topics",
            "orders",
            "--state-dir",
            str(tmp_path / "state"),
            "--replay-rate",
            "100000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = []
        while not any(line["event"] == "assigned" for line in lines):
            line = worker.stdout.readline()
            assert line, "the worker ended early"
            lines.append(json.loads(line))
        time.sleep(1.0)  # restored, and processing
        worker.send_signal(signal.SIGTERM)
        rest = [json.loads(line) for line in worker.stdout]
        assert worker.wait(timeout=30) == 0
    finally:
        worker.kill()
    events = [line["event"] for line in lines + rest]
    assert events[0] == "joined" and "ts_ms" in lines[0]
    assert lines[-1]["tasks"] == [["orders", p] for p in range(4)]
    after = [line["event"] for line in rest]
    assert "draining" in after and "revoked" in after and after[-2:] == ["drained", "stopped"], after
    assert rest[-1]["reason"] == "drained"
    checkpoints = sorted(p.name for p in (tmp_path / "state" / "w").iterdir())
    assert checkpoints == [f"orders-{p}" for p in range(4)]
    assert all(int(p.read_text()) > 0 for p in (tmp_path / "state" / "changelog").iterdir())
