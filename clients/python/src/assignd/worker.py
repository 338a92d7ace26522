"""The example worker: a member with simulated stateful tasks.

    python -m assignd.worker --url http://127.0.0.1:7070 --group billing \\
        --name worker-a --topics orders

It prints one JSON object per line on stdout for each event (the contract
of ``clients/README.md``, the same in every language) and logs to stderr.
SIGTERM or SIGINT drains: it asks to drain, waits for ``drained``, leaves
and exits 0; a second signal leaves at once. The exit code is 0 when the
member stopped ``left`` or ``drained``, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, List, Optional, Sequence

from .config import ConfigError, MemberConfig
from .failure import Failure
from .listener import Listener
from .machine import StopReason
from .member import Member
from .simulated import DirStore, Rates, Role, TaskStates
from .task import Task

#: How often the simulation advances.
TICK_S = 0.1


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An assignd member simulating stateful tasks")
    parser.add_argument(
        "--url",
        default="http://127.0.0.1:7070",
        help="the host, or a cluster's bootstrap URLs (comma-separated)",
    )
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", help="a static member name; without it the worker is dynamic")
    parser.add_argument("--topics", required=True, help="comma-separated topics to subscribe to")
    parser.add_argument(
        "--replay-rate", type=int, default=1000, help="records/s a learner, standby or restoring task replays"
    )
    parser.add_argument(
        "--changelog-len", type=int, default=10000, help="a changelog's length when no worker wrote it yet"
    )
    parser.add_argument("--process-rate", type=int, default=5, help="records/s an active task appends")
    parser.add_argument("--state-dir", type=Path, default=Path("worker-state"))
    parser.add_argument("--drain-after", type=float, help="drain after this many seconds")
    parser.add_argument(
        "--token",
        default=os.environ.get("ASSIGND_MEMBER_TOKEN"),
        help="the group's member token (default $ASSIGND_MEMBER_TOKEN)",
    )
    parser.add_argument("--endpoint", help="where this worker serves, published in the routing table")
    parser.add_argument(
        "--metadata",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a pair published with the endpoint (repeatable)",
    )
    parser.add_argument(
        "--load-per-task",
        type=float,
        help="report this load for every active task (a synthetic load, in the group's load unit)",
    )
    args = parser.parse_args(argv)
    for pair in args.metadata:
        if "=" not in pair:
            parser.error(f"--metadata {pair!r}: KEY=VALUE expected")
    return args


class Output:
    """JSON lines on stdout, flushed at once, one writer at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, event: str, **fields: Any) -> None:
        body = {"ts_ms": int(time.time() * 1000), "event": event, **fields}
        with self._lock:
            sys.stdout.write(json.dumps(body) + "\n")
            sys.stdout.flush()


def _tasks(tasks: Sequence[Task]) -> List[List[Any]]:
    return [[t.topic, t.partition] for t in tasks]


class WorkerListener(Listener):
    """Prints every event and keeps the simulation's roles in step."""

    def __init__(self, sim: TaskStates, lock: threading.Lock, out: Output) -> None:
        self._sim, self._lock, self._out = sim, lock, out

    def on_joined(self, member_id: str) -> None:
        self._out.line("joined", member_id=member_id)

    def on_assigned(self, tasks: Sequence[Task], promoted: bool) -> None:
        with self._lock:
            self._sim.set(tasks, Role.ACTIVE)
        self._out.line("promoted" if promoted else "assigned", tasks=_tasks(tasks))

    def on_revoked(self, tasks: Sequence[Task]) -> None:
        # Printed before the tasks stop; the shell acks once this returns.
        self._out.line("revoked", tasks=_tasks(tasks))
        with self._lock:
            self._sim.set(tasks, None)

    def on_lost(self, tasks: Sequence[Task]) -> None:
        with self._lock:
            self._sim.set(tasks, None)
        self._out.line("lost", tasks=_tasks(tasks))

    def on_learner_started(self, tasks: Sequence[Task]) -> None:
        self._warm(tasks, "learner_started")

    def on_standby_started(self, tasks: Sequence[Task]) -> None:
        self._warm(tasks, "standby_started")

    def on_learner_stopped(self, tasks: Sequence[Task]) -> None:
        self._cool(tasks, "learner_stopped")

    def on_standby_stopped(self, tasks: Sequence[Task]) -> None:
        self._cool(tasks, "standby_stopped")

    def on_draining(self) -> None:
        self._out.line("draining")

    def on_drained(self) -> None:
        self._out.line("drained")

    def on_fenced(self, rejoining: bool) -> None:
        self._out.line("fenced", rejoining=rejoining)

    def on_replaced(self, member_name: str) -> None:
        self._out.line("replaced", member_name=member_name)

    def on_error(self, failure: Failure) -> None:
        self._out.line("error", message=str(failure))

    def _warm(self, tasks: Sequence[Task], event: str) -> None:
        with self._lock:
            self._sim.set(tasks, Role.WARMING)
        self._out.line(event, tasks=_tasks(tasks))

    def _cool(self, tasks: Sequence[Task], event: str) -> None:
        # A copy that is active here stays active.
        with self._lock:
            self._sim.set(self._sim.with_role(tasks, Role.WARMING), None)
        self._out.line(event, tasks=_tasks(tasks))


class Signals:
    """Counts SIGTERM and SIGINT; the main loop acts on them."""

    def __init__(self) -> None:
        self.count = 0
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1


def run(args: argparse.Namespace) -> int:
    signals = Signals()
    out = Output()
    local = args.name or f"dynamic-{os.getpid()}"
    sim = TaskStates(
        DirStore(args.state_dir, local, args.changelog_len), Rates(args.replay_rate, args.process_rate)
    )
    lock = threading.Lock()
    config = MemberConfig(
        urls=args.url,
        group=args.group,
        topics=[t.strip() for t in args.topics.split(",") if t.strip()],
        member_name=args.name,
        member_token=args.token,
        endpoint=args.endpoint,
        metadata=dict(pair.split("=", 1) for pair in args.metadata),
    )

    def lags(assignment: Any) -> Any:
        with lock:
            return sim.lags(assignment)

    member = Member(config, WorkerListener(sim, lock, out), lags).start()
    started = last = time.monotonic()
    drain_asked, handled = False, 0
    while member.running:
        member.wait(TICK_S)
        now = time.monotonic()
        with lock:
            # Process only what the lease allows: a stalled worker whose
            # tasks went elsewhere must not write after them.
            sim.tick(now - last, member.may_process)
        last = now
        if args.load_per_task is not None:
            # Sent only once the host asks, and only what moved.
            member.report_load({task: args.load_per_task for task in member.assignment.active})
        if signals.count > handled:
            handled = signals.count
            if handled == 1:
                logging.getLogger("assignd.worker").info("signal: draining, then leaving")
                member.drain()
            else:
                logging.getLogger("assignd.worker").info("second signal: leaving at once")
                member.leave(timeout=0)
        if not drain_asked and args.drain_after is not None and now - started >= args.drain_after:
            drain_asked = True
            member.drain()
    reason: Optional[StopReason] = member.stopped
    out.line("stopped", reason=reason)
    return 0 if reason in ("left", "drained") else 1


def main(argv: Optional[Sequence[str]] = None) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("ASSIGND_LOG", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code = run(parse_args(argv))
    except ConfigError as error:
        sys.exit(f"worker: {error}")
    sys.exit(code)


if __name__ == "__main__":
    main()
