"""The member's lease: until when it may process its tasks without a newer
answer, counted from when the answered heartbeat was *sent*.

An answer carries a plain lease (``lease_ms``) and, from a cluster, a longer
*unreached lease*: while every heartbeat since that answer certainly reached
no coordinator of the group, the host cannot have taken the member's tasks
early (it does so only through a heartbeat it got), so the member keeps
them that long. A failure that may have reached a coordinator brings the
plain lease back until the next answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .failure import Failure
from .wire import HeartbeatResponse


def _min_or_none(a: Optional[int], b: Optional[int]) -> Optional[int]:
    # No bound known means no unreached lease.
    return None if a is None or b is None else min(a, b)


def _max(a: Optional[int], b: Optional[int]) -> Optional[int]:
    if a is None:
        return b
    return a if b is None else max(a, b)


@dataclass
class Lease:
    """Send time plus the last answer's figures, in the machine's ms."""

    until: Optional[int] = None
    unreached_until: Optional[int] = None
    #: While a request is in flight the unreached lease counts only until
    #: its send time plus this (the host, should that request reach it,
    #: keeps the tasks that long after handling it); ``None`` from an older
    #: host: no unreached lease while a request is in flight.
    flight_ms: Optional[int] = None
    #: A request since the last answer may have reached the coordinator.
    reached_since_answer: bool = False
    #: Every request since the last answer certainly reached none.
    on_unreached: bool = False

    @staticmethod
    def of_answer(response: HeartbeatResponse, sent: int) -> "Lease":
        def plus(ms: Optional[int]) -> Optional[int]:
            return None if ms is None else sent + ms

        return Lease(
            until=plus(response.lease_ms),
            unreached_until=plus(response.unreached_lease_ms),
            flight_ms=response.unreached_flight_ms,
        )

    def judge(self, failure: Failure, releasing: bool) -> bool:
        """Which lease holds after a failed heartbeat; returns whether that
        changed. Never the unreached one while tasks are being released
        (their fence may come first), nor without a flight bound (an older
        host: the next heartbeat may reach a coordinator)."""
        unreached = failure.kind == "unreached" and not self.reached_since_answer
        self.reached_since_answer |= not unreached
        extends = (
            unreached
            and not releasing
            and self.flight_ms is not None
            and self.until is not None
            and self.unreached_until is not None
            and self.unreached_until > self.until
        )
        changed = extends != self.on_unreached
        self.on_unreached = extends
        return changed

    def end(self, in_flight_sent: Optional[int]) -> Optional[int]:
        """The end of the lease in force, given the send time of the request
        in flight, if one is."""
        if not self.on_unreached:
            return self.until
        if in_flight_sent is None:
            bound = self.unreached_until
        elif self.flight_ms is not None:
            bound = in_flight_sent + self.flight_ms
        else:
            bound = self.until
        return _max(self.until, _min_or_none(self.unreached_until, bound))
