"""The member machine: every decision of a member, without I/O.

It owns the member id and epoch, when the next request is due and what it
carries, the lease, the policy for every failure, drains and leaves, and
the order of the events the application is told. It never reads a clock,
opens a socket or starts a thread: the shell passes ``now`` (integer
milliseconds from any origin) with each input, sends what
:meth:`Machine.poll_request` builds, sleeps until
:meth:`Machine.poll_timeout` and hands out what :meth:`Machine.poll_event`
yields. It is a port, rule for rule, of the Rust client's
``client/src/machine.rs``; ``clients/conformance/vectors`` prove it.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Deque, Dict, List, Literal, Mapping, Optional, Sequence, Tuple

from .events import Assignment, Error, Event, Fenced, Joined, Lost, Replaced
from .failure import Failure
from .lease import Lease
from .loads import LOAD_THRESHOLD_DEFAULT, LoadBook, LoadFields, valid_load
from .task import LagRow, Task
from .tracker import Tracker
from .wire import JOIN_EPOCH, LEAVE_EPOCH, HeartbeatRequest, HeartbeatResponse

log = logging.getLogger("assignd")

StopReason = Literal["left", "drained", "replaced", "fenced", "removed"]

#: The heartbeat interval used until the host names one.
INTERVAL_BEFORE_JOIN_MS = 1_000
#: The shortest interval followed, whatever the host says.
INTERVAL_MIN_MS = 10
#: The first retry delay after a failure; it doubles up to the max, and
#: never past the heartbeat interval.
RETRY_BACKOFF_MIN_MS = 50
#: Kafka's ``retry.backoff.max.ms`` default: a member whose coordinator
#: died reaches the node that takes its shard over within a second.
RETRY_BACKOFF_MAX_MS = 1_000
#: How many times a leave is sent when the host does not answer.
LEAVE_ATTEMPTS_MAX = 3

_OUT_OF_GROUP = ("fenced", "replaced", "unknown_member", "unknown_group")


def retry_backoff_ms(failures: int, interval_ms: int) -> int:
    """The wait before the attempt after ``failures`` failed requests in a
    row (from 1): 50 ms doubling, at most 1 s and never past the interval."""
    doubling = 1 << min(max(failures - 1, 0), 16)
    return min(RETRY_BACKOFF_MIN_MS * doubling, RETRY_BACKOFF_MAX_MS, interval_ms)


@dataclass(frozen=True)
class MachineConfig:
    """Who the member is and what it subscribes to."""

    topics: Sequence[str]
    #: The ids the machine chooses are ``{id_prefix}-{n}``, n = 1, 2, ...: a
    #: fresh one per new join, the same for every retry of a join.
    id_prefix: str
    #: A static member's name; ``None`` joins as a dynamic member.
    member_name: Optional[str] = None
    rack: Optional[str] = None
    capacity: int = 1
    #: Where the member serves (a URL or ``host:port``), for the group's
    #: routing table; ``None`` publishes none. Sent on every join.
    endpoint: Optional[str] = None
    #: Small string pairs shown with the member in the routing table; sent
    #: on every join unless empty.
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: How far (relative) a task's load moves from the value the host
    #: acknowledged before it is sent again.
    load_threshold: float = LOAD_THRESHOLD_DEFAULT


@dataclass(frozen=True)
class _InFlight:
    sent: int
    leave: bool
    #: It carries an endpoint changed by :meth:`Machine.set_endpoint`:
    #: should it fail, the next request carries it again.
    carries_endpoint_change: bool = False


@dataclass
class _Leaving:
    #: ``None``: rejoin as a new member afterwards (a dynamic member whose
    #: epoch went stale frees its old slot first).
    then: Optional[StopReason]
    attempts: int = 0


class Machine:
    """One member's decisions (see the module doc); it wants to join at ``now``."""

    def __init__(self, config: MachineConfig, now: int) -> None:
        self.config = config
        self._tracker = Tracker()
        # Empty until joined (and again before a rejoin).
        self._member_id = ""
        # The id the next join sends, the same for every retry of it.
        self._join_id = ""
        self._ids_chosen = 0
        self._epoch = JOIN_EPOCH
        self._interval_ms = INTERVAL_BEFORE_JOIN_MS
        # Failed requests in a row.
        self._failures = 0
        self._drain = False
        self._leave_asked = False
        self._lags: List[LagRow] = []
        # The loads the application set, and what the host has of them.
        self._loads = LoadBook(config.load_threshold)
        # The endpoint and metadata changed since the last request that
        # carried them was sent: the next one carries them.
        self._endpoint_changed = False
        # When the next request is due.
        self._due = now
        # Something the host must hear of at once happened (an ack, a drain
        # asked, tasks lost to the lease) after the request in flight, if
        # any, was built: the next request goes as soon as nothing is in
        # flight.
        self._send_now = False
        self._in_flight: Optional[_InFlight] = None
        self._lease = Lease()
        self._leaving: Optional[_Leaving] = None
        self._leave_failure: Optional[Failure] = None
        self._stopped: Optional[StopReason] = None
        self._events: Deque[Event] = deque()
        self._choose_join_id()

    # --- what the shell reads -------------------------------------------

    @property
    def member_id(self) -> Optional[str]:
        """The member id, once joined."""
        return self._member_id or None

    @property
    def member_epoch(self) -> int:
        """The member epoch: a fencing token for the application's writes."""
        return self._epoch

    def assignment(self) -> Assignment:
        return self._tracker.assignment()

    @property
    def stopped(self) -> Optional[StopReason]:
        return self._stopped

    @property
    def leave_failure(self) -> Optional[Failure]:
        """The failure that ended the last leave, if one did."""
        return self._leave_failure

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def request_due(self, now: int) -> bool:
        """Whether :meth:`poll_request` would build a request at ``now``."""
        return self._stopped is None and self._in_flight is None and now >= self._due

    def poll_event(self) -> Optional[Event]:
        return self._events.popleft() if self._events else None

    def poll_timeout(self) -> Optional[int]:
        """When the machine next wants an input if nothing else happens: the
        next request (unless one is in flight), or the end of the lease in
        force while it holds tasks. ``None`` once stopped."""
        if self._stopped is not None:
            return None
        due = self._due if self._in_flight is None else None
        lease = self.lease_until() if self._tracker.holds_any() else None
        if due is None or lease is None:
            return due if lease is None else lease
        return min(due, lease)

    def lease_until(self) -> Optional[int]:
        """The end of the lease in force: the unreached lease while on it,
        else the last answer's; ``None`` before any answer with a lease."""
        return self._lease.end(None if self._in_flight is None else self._in_flight.sent)

    def may_process(self, task: Task, now: int) -> bool:
        """Whether the application may process (and commit the output of)
        ``task`` at ``now``: active here or being released, within the lease."""
        until = self.lease_until()
        return self._tracker.holds(task) and (until is None or now < until)

    # --- inputs -----------------------------------------------------------

    def report_lags(self, lags: Sequence[LagRow]) -> None:
        """The application's lag figures; they go in every later heartbeat."""
        self._lags = list(lags)

    def set_load(self, task: Task, load: float) -> bool:
        """The application's current load of ``task``; a task not active
        here is ignored. Returns whether the load is one the host accepts
        (an invalid one changes nothing)."""
        if not valid_load(load):
            return False
        if self._tracker.is_active(task):
            self._loads.set_load(task, load)
        return True

    def set_utilisation(self, utilisation: Optional[float]) -> bool:
        """The member's measured utilisation (``None``: unknown)."""
        return self._loads.set_utilisation(utilisation)

    def set_load_capacity(self, capacity: Optional[float]) -> bool:
        """The load the member can carry (``None``: unknown)."""
        return self._loads.set_load_capacity(capacity)

    def poll_request(self, now: int) -> Optional[HeartbeatRequest]:
        """The request to send now, if one is due; it is in flight from now
        until :meth:`on_answer` or :meth:`on_failure`."""
        if not self.request_due(now):
            return None
        leave = self._leaving is not None
        self._in_flight = _InFlight(now, leave, carries_endpoint_change=not leave and self._endpoint_changed)
        self._send_now = False
        if self._leaving is not None:
            self._leaving.attempts += 1
            # Once the host has the leave, a dynamic member's tasks go to
            # others at once: nothing is processed from its sending on.
            self._lose_everything_but_id()
            return self._leave_request()
        request = self._heartbeat_request(self._loads.build())
        self._endpoint_changed = False
        return request

    def on_answer(self, response: HeartbeatResponse, now: int) -> None:
        """The 200 answer to the request in flight."""
        flight = self._take_flight()
        if flight.leave:
            self._finish_leave(None, now)
            return
        self._failures = 0
        self._take_lease(response, flight.sent)
        joined = not self._member_id
        self._member_id = response.member_id
        self._epoch = response.member_epoch
        self._interval_ms = max(response.heartbeat_interval_ms, INTERVAL_MIN_MS)
        changes = self._tracker.on_response(response)
        self._loads.answered(response.load_report)
        self._forget_inactive_loads()
        if joined:
            self._events.append(Joined(response.member_id))
        self._events.extend(changes)
        self._due = flight.sent + self._interval_ms
        if any(e.type == "drained" for e in changes) and self._leaving is None:
            self._begin_leave("drained", now)
        self._after_heartbeat(now)

    def on_failure(self, failure: Failure, now: int) -> None:
        """The request in flight failed, as ``failure`` says."""
        flight = self._take_flight()
        # The host may not have it: the next request carries it again.
        self._endpoint_changed |= flight.carries_endpoint_change
        if flight.leave:
            self._leave_failed(failure, now)
        else:
            self._loads.failed()
            self._judge_lease(failure)
            self._heartbeat_failed(failure, flight.sent, now)
            self._after_heartbeat(now)
        self._settle_leave(now)

    def _after_heartbeat(self, now: int) -> None:
        """After a heartbeat's outcome: a leave, an ack, a drain or a loss
        that came while it was in flight goes at once."""
        if self._leaving is not None or self._send_now:
            self._due = min(self._due, now)
        self._settle_leave(now)

    def _hurry(self, now: int) -> None:
        """The host must hear of a change at once (after the request in
        flight, if any)."""
        self._due = min(self._due, now)
        self._send_now = True

    def ack(self, ack: int, now: int) -> None:
        """The application stopped the tasks of the ``revoked`` event
        ``ack``: they are released by a heartbeat sent at once. An unknown
        ack (from before a reset, or acknowledged twice) changes nothing."""
        known, changes = self._tracker.on_ack(ack)
        if known:
            self._events.extend(changes)
            self._hurry(now)

    def drain(self, now: int) -> None:
        """Ask the host to drain this member."""
        if not self._drain and self._stopped is None:
            self._drain = True
            self._hurry(now)

    def set_endpoint(self, endpoint: Optional[str], metadata: Mapping[str, str]) -> None:
        """The application serves elsewhere now (``None``: nowhere), with
        these metadata: both replace the config's, and the next request
        (join or heartbeat) carries them, as does every later one until an
        answer to one that did. No request is made due by it."""
        self.config = replace(self.config, endpoint=endpoint, metadata=dict(metadata))
        self._endpoint_changed = True

    def leave(self, now: int) -> None:
        """Leave the group: a leave is sent next (once the request in flight
        is done), then the machine stops."""
        if self._stopped is not None:
            return
        self._leave_asked = True
        if self._leaving is not None:
            self._leaving.then = "left"
        else:
            self._begin_leave("left", now)
        self._settle_leave(now)

    def tick(self, now: int) -> None:
        """Time passed: when the lease in force ran out with no newer answer,
        every held task is lost (the id is kept: the host may still count
        the member, and then the next answer, sent at once, gives them back)."""
        if self._stopped is not None or not self._tracker.holds_any():
            return
        end = self.lease_until()
        if end is None or now < end:
            return
        held = self._tracker.assignment()
        which = "unreached lease" if self._lease.on_unreached else "lease of the last answer"
        log.warning(
            "the %s ran out %d ms ago without a newer answer: stopping every task "
            "(member %s, %d active, %d revoking)",
            which,
            now - end,
            self._member_id,
            len(held.active),
            len(held.revoking),
        )
        self._lose_everything_but_id()
        self._hurry(now)

    # --- requests ---------------------------------------------------------

    def _heartbeat_request(self, loads: LoadFields) -> HeartbeatRequest:
        joining = not self._member_id
        endpoint, metadata = self._endpoint_fields(joining)
        return HeartbeatRequest(
            member_id=self._join_id if joining else self._member_id,
            member_name=self.config.member_name,
            member_epoch=self._epoch,
            topics=list(self.config.topics) if joining else None,
            rack=self.config.rack,
            capacity=self.config.capacity,
            owned=self._tracker.owned(),
            lags=list(self._lags),
            drain=self._drain,
            endpoint=endpoint,
            metadata=metadata,
            loads=loads.loads,
            utilisation=loads.utilisation,
            load_capacity=loads.load_capacity,
        )

    def _endpoint_fields(self, joining: bool) -> Tuple[Optional[str], Optional[Dict[str, str]]]:
        """The ``endpoint`` and ``metadata`` a heartbeat carries: both,
        explicit (``""`` for none, ``{}`` for empty), after a change until
        an answer to a request that carried them; else on a join, those
        set; else neither (the host keeps what it has)."""
        config = self.config
        if self._endpoint_changed:
            return config.endpoint or "", dict(config.metadata)
        if joining:
            return config.endpoint, dict(config.metadata) or None
        return None, None

    def _leave_request(self) -> HeartbeatRequest:
        return HeartbeatRequest(
            member_id=self._member_id,
            member_name=self.config.member_name,
            member_epoch=LEAVE_EPOCH,
            rack=self.config.rack,
            capacity=self.config.capacity,
            owned=[],
            lags=[],
            drain=self._drain,
        )

    def _take_flight(self) -> _InFlight:
        flight = self._in_flight
        if flight is None:
            raise RuntimeError("an outcome with no request in flight")
        self._in_flight = None
        return flight

    # --- the lease ----------------------------------------------------------

    def _take_lease(self, response: HeartbeatResponse, sent: int) -> None:
        if self._lease.on_unreached:
            log.info(
                "a coordinator of the group answers again: off the unreached lease (member %s)",
                self._member_id,
            )
        self._lease = Lease.of_answer(response, sent)

    def _judge_lease(self, failure: Failure) -> None:
        if not self._lease.judge(failure, releasing=self._tracker.is_releasing()):
            return
        if self._lease.on_unreached:
            log.info(
                "no heartbeat reaches a coordinator of the group: keeping the tasks on the "
                "unreached lease (member %s, lease until %s, unreached until %s)",
                self._member_id,
                self._lease.until,
                self._lease.unreached_until,
            )
        else:
            log.info(
                "a heartbeat may have reached the coordinator: back on the last answer's lease (member %s)",
                self._member_id,
            )

    # --- failures -------------------------------------------------------------

    def _heartbeat_failed(self, failure: Failure, sent: int, now: int) -> None:
        joined = bool(self._member_id)
        leaving = self._drain or self._leave_asked or self._tracker.assignment().draining
        code = failure.code if failure.kind == "refused" else None
        if code == "replaced":
            # Refused to a join too: a retried join whose first attempt
            # the host handled, after which another process took the name.
            member_name = self.config.member_name or ""
            log.error(
                "another process joined with member name %r and took its tasks: stopping member %s "
                "(two processes must not share a member name)",
                member_name,
                self._member_id,
            )
            self._lose_everything()
            self._events.append(Replaced(member_name))
            self._stop("replaced")
        elif code == "fenced" and joined:
            self._lose_everything()
            self._events.append(Fenced(rejoining=not leaving))
            if leaving:
                self._stop("fenced")
            self._due = sent
        elif code == "fenced":
            # A join whose id the host removed already (a retry that came
            # after the member expired): join anew.
            self._events.append(Error(failure))
            self._choose_join_id()
            self._retry_later(sent)
        elif code in ("unknown_member", "unknown_group") and joined:
            # The slot is gone: every task may be elsewhere already.
            self._events.append(Error(failure))
            self._lose_everything()
            if leaving:
                self._stop("removed")
            elif code == "unknown_group":
                self._retry_later(sent)
            else:
                self._due = sent
        elif code == "stale_epoch" and joined:
            self._events.append(Error(failure))
            if self.config.member_name is not None:
                # A new incarnation of the name takes the slot with its
                # tasks as they are: nothing is lost.
                self._forget_member_id()
            else:
                self._lose_everything_but_id()
                # Free the old slot's tasks now, not at its session timeout.
                self._begin_leave(None, now)
            self._due = sent
        else:
            self._events.append(Error(failure))
            self._retry_later(sent)
            hint = failure.retry_after_ms if failure.kind in ("refused", "server") else None
            if hint is not None:
                # The host asked for a pause, counted from its answer; a
                # joined member waits no longer than its interval, so its
                # session holds.
                if joined:
                    hint = min(hint, self._interval_ms)
                backoff = self._due - sent
                self._due = now + max(backoff, hint)

    def _retry_later(self, sent: int) -> None:
        self._failures += 1
        self._due = sent + retry_backoff_ms(self._failures, self._interval_ms)

    # --- leaves -----------------------------------------------------------------

    def _begin_leave(self, then: Optional[StopReason], now: int) -> None:
        self._leaving = _Leaving(then)
        self._leave_failure = None
        self._due = now

    def _settle_leave(self, now: int) -> None:
        """Ends a leave that cannot be sent: nothing to leave, nothing in flight."""
        if self._leaving is not None and self._in_flight is None and not self._member_id:
            self._finish_leave(None, now)

    def _leave_failed(self, failure: Failure, now: int) -> None:
        attempts = self._leaving.attempts if self._leaving is not None else LEAVE_ATTEMPTS_MAX
        if failure.kind == "refused" and failure.code in _OUT_OF_GROUP:
            self._finish_leave(None, now)
        elif not failure.is_transient or attempts >= LEAVE_ATTEMPTS_MAX:
            self._finish_leave(failure, now)
        else:
            self._due = now + (RETRY_BACKOFF_MIN_MS << attempts)

    def _finish_leave(self, failure: Optional[Failure], now: int) -> None:
        then = self._leaving.then if self._leaving is not None else None
        self._leaving = None
        if failure is not None:
            log.warning("the leave of member %s failed: %s", self._member_id, failure)
        self._leave_failure = failure
        self._forget_member_id()
        if then is not None:
            self._stop(then)
        else:
            self._due = now

    def _stop(self, reason: StopReason) -> None:
        self._leaving = None
        if self._stopped is None:
            self._stopped = "left" if self._leave_asked else reason

    # --- membership -------------------------------------------------------------

    def _lose_everything(self) -> None:
        """Every held task is lost, and the member id forgotten."""
        self._lose_everything_but_id()
        self._forget_member_id()

    def _lose_everything_but_id(self) -> None:
        lost = self._tracker.reset()
        self._forget_inactive_loads()
        if lost:
            self._events.append(Lost(lost))

    def _forget_member_id(self) -> None:
        """Out of the group: the next join is a new member, with a new id."""
        self._member_id = ""
        self._choose_join_id()
        self._epoch = JOIN_EPOCH
        # A new member's host has none of its loads, and asks for them.
        self._loads.reset()

    def _forget_inactive_loads(self) -> None:
        self._loads.retain_active(self._tracker.is_active)

    def _choose_join_id(self) -> None:
        self._ids_chosen += 1
        self._join_id = f"{self.config.id_prefix}-{self._ids_chosen}"
