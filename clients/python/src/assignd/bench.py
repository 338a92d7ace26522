"""The bench driver: many dynamic :class:`~assignd.AsyncMember` s in one
event loop against a running host, measuring the heartbeats the host
answers and the CPU time the members cost. Its flags and its one JSON line
of output are the same for every client's bench driver::

    python -m assignd.bench --url URL --group G --members N --topics orders --duration S [--warmup S]

The group must exist; its heartbeat interval sets the load. Every
member's HTTP goes through the loop's default executor, as shipped
(``asyncio.to_thread``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import List, Optional

from . import AsyncListener, AsyncMember, Failure, MemberConfig

JOIN_TIMEOUT_S = 60.0
LEAVE_TIMEOUT_S = 10.0
#: Leaves in flight at once at the end.
LEAVES_AT_ONCE = 64


class Counter:
    """The heartbeat observer every member shares (called on the loop)."""

    def __init__(self) -> None:
        self.measuring = False
        self.ok = 0
        self.errors = 0

    def __call__(self, latency_s: float, failure: Optional[Failure]) -> None:
        if not self.measuring:
            return
        if failure is None:
            self.ok += 1
        else:
            self.errors += 1


class JoinWatch(AsyncListener):
    def __init__(self) -> None:
        self.joined = asyncio.Event()

    async def on_joined(self, member_id: str) -> None:
        self.joined.set()


async def leave_all(members: List[AsyncMember]) -> None:
    slots = asyncio.Semaphore(LEAVES_AT_ONCE)

    async def leave(member: AsyncMember) -> None:
        async with slots:
            try:
                await asyncio.wait_for(member.leave(), LEAVE_TIMEOUT_S)
            except asyncio.TimeoutError:
                await member.close()

    await asyncio.gather(*(leave(m) for m in members))


async def bench(args: argparse.Namespace) -> int:
    config = MemberConfig(
        urls=args.url,
        group=args.group,
        topics=args.topics.split(","),
        member_token=os.environ.get("ASSIGND_MEMBER_TOKEN") or None,
    )
    counter = Counter()
    watches = [JoinWatch() for _ in range(args.members)]
    members = [AsyncMember(config, watch, on_heartbeat=counter) for watch in watches]
    for member in members:
        await member.start()

    try:
        joins = asyncio.gather(*(watch.joined.wait() for watch in watches))
        await asyncio.wait_for(joins, JOIN_TIMEOUT_S)
    except asyncio.TimeoutError:
        await leave_all(members)
        joined = sum(watch.joined.is_set() for watch in watches)
        print(f"error: {joined} of {args.members} members joined within {JOIN_TIMEOUT_S:.0f} s",
              file=sys.stderr)
        return 1
    await asyncio.sleep(args.warmup)

    start, cpu_start = time.monotonic(), time.process_time()
    counter.measuring = True
    await asyncio.sleep(args.duration)
    counter.measuring = False
    seconds, cpu = time.monotonic() - start, time.process_time() - cpu_start

    await leave_all(members)
    result = {
        "client": "python",
        "members": args.members,
        "seconds": seconds,
        "heartbeats": counter.ok,
        "errors": counter.errors,
        "heartbeats_per_s": counter.ok / seconds,
        "cpu_s": cpu,
        "cpu_ms_per_member_per_min": cpu * 1000 / args.members / (seconds / 60),
    }
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m assignd.bench",
        description="Many AsyncMembers in one event loop: the heartbeats answered and the CPU time used.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:7070", help="the host or a cluster's URLs")
    parser.add_argument("--group", required=True, help="the group (it must exist)")
    parser.add_argument("--members", type=int, default=1, help="dynamic members to start")
    parser.add_argument("--topics", required=True, help="comma-separated topics")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds to measure")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds to wait after every member joined")
    args = parser.parse_args(argv)
    if args.members < 1 or args.duration <= 0 or args.warmup < 0:
        parser.error("--members must be 1 or more, --duration above 0, --warmup 0 or more")
    return asyncio.run(bench(args))


if __name__ == "__main__":
    sys.exit(main())
