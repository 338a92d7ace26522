"""What both member shells share: one machine behind a lock, fed with the
real clock, and the views the application reads from any thread.

The shells differ only in how they wait (a thread and a condition, or an
asyncio task); every decision is the machine's.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from typing import Callable, Iterable, List, Mapping, Optional, Tuple, Union

from .config import ConfigError, MemberConfig, check_endpoint
from .events import Assignment, Event
from .failure import Failure
from .loads import valid_load, valid_load_capacity, valid_utilisation
from .machine import Machine, MachineConfig, StopReason
from .task import LagRow, Task
from .wire import HeartbeatRequest, HeartbeatResponse

#: ``lags(assignment)``: ``(task, lag)`` pairs for the learner and standby
#: tasks of ``assignment`` (and any other task whose state the member
#: keeps), called before every heartbeat.
LagSource = Callable[[Assignment], Iterable[Tuple[Task, int]]]

#: ``on_heartbeat(latency_s, failure)``: told of every heartbeat's round trip
#: (joins and leaves included) once its outcome is in; ``failure`` is
#: ``None`` when the host answered 200. For load generators and metrics: it
#: runs on the member's loop (asyncio) or sender thread (blocking), so it
#: must be quick; an exception it raises is logged and dropped.
HeartbeatObserver = Callable[[float, Optional[Failure]], None]

#: Loads for ``report_load``: a mapping of task to load, or ``(task, load)``
#: pairs; a task is a :class:`Task` or a ``(topic, partition)`` tuple.
LoadsArg = Union[Mapping[Tuple[str, int], float], Iterable[Tuple[Tuple[str, int], float]]]

log = logging.getLogger("assignd")


def now_ms() -> int:
    """The shells' clock: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


def choose_id_prefix() -> str:
    """``c-`` and 32 random hex digits, as the Rust client's member ids."""
    return "c-" + secrets.token_hex(16)


def lag_rows(pairs: Iterable[Tuple[Task, int]]) -> List[LagRow]:
    return [LagRow(task.topic, task.partition, lag) for task, lag in pairs]


class Core:
    """A machine behind a lock. Every method may be called from any thread."""

    def __init__(
        self,
        config: MemberConfig,
        id_prefix: Optional[str] = None,
        on_heartbeat: Optional[HeartbeatObserver] = None,
    ) -> None:
        config.check()
        self.config = config
        self._lock = threading.Lock()
        self._on_heartbeat = on_heartbeat
        # When the request in flight was taken (monotonic s), for its latency.
        self._sent_at = 0.0
        machine_config = MachineConfig(
            topics=list(config.topics),
            id_prefix=id_prefix or choose_id_prefix(),
            member_name=config.member_name,
            rack=config.rack,
            capacity=config.capacity,
            endpoint=config.endpoint,
            metadata=dict(config.metadata),
            load_threshold=config.load_threshold,
        )
        self._machine = Machine(machine_config, now_ms())
        self._machine.set_load_capacity(config.load_capacity)

    # --- views --------------------------------------------------------------

    def may_process(self, task: Task) -> bool:
        with self._lock:
            return self._machine.may_process(Task(*task), now_ms())

    def member_id(self) -> Optional[str]:
        with self._lock:
            return self._machine.member_id

    def member_epoch(self) -> int:
        with self._lock:
            return self._machine.member_epoch

    def assignment(self) -> Assignment:
        with self._lock:
            return self._machine.assignment()

    def lease_until(self) -> Optional[float]:
        """The end of the lease in force, in ``time.monotonic()`` seconds."""
        with self._lock:
            until = self._machine.lease_until()
        return None if until is None else until / 1000

    def stopped(self) -> Optional[StopReason]:
        with self._lock:
            return self._machine.stopped

    def leave_failure(self) -> Optional[Failure]:
        with self._lock:
            return self._machine.leave_failure

    # --- inputs ---------------------------------------------------------------

    def ack(self, ack: int) -> None:
        with self._lock:
            self._machine.ack(ack, now_ms())

    def drain(self) -> None:
        with self._lock:
            self._machine.drain(now_ms())

    def set_endpoint(self, endpoint: Optional[str], metadata: Optional[Mapping[str, str]]) -> None:
        check_endpoint(endpoint, metadata or {})
        with self._lock:
            self._machine.set_endpoint(endpoint, dict(metadata or {}))

    def report_load(
        self,
        loads: LoadsArg,
        utilisation: Optional[float],
        load_capacity: Optional[float],
    ) -> None:
        pairs = [(Task(*task), load) for task, load in (loads.items() if isinstance(loads, Mapping) else loads)]
        for task, load in pairs:
            if not valid_load(load):
                raise ConfigError(f"the load {load!r} of {task} is not a finite number from 0 to 1e15")
        if not valid_utilisation(utilisation):
            raise ConfigError(f"a utilisation must be a finite number from 0 to 10, not {utilisation!r}")
        if not valid_load_capacity(load_capacity):
            raise ConfigError(f"a load capacity must be above 0 and at most 1e15, not {load_capacity!r}")
        with self._lock:
            for task, load in pairs:
                self._machine.set_load(task, load)
            if utilisation is not None:
                self._machine.set_utilisation(utilisation)
            if load_capacity is not None:
                self._machine.set_load_capacity(load_capacity)

    def leave(self) -> None:
        with self._lock:
            self._machine.leave(now_ms())

    def answer(self, result: Union[HeartbeatResponse, Failure]) -> None:
        with self._lock:
            if isinstance(result, Failure):
                self._machine.on_failure(result, now_ms())
            else:
                self._machine.on_answer(result, now_ms())
        if self._on_heartbeat is not None:
            try:
                failure = result if isinstance(result, Failure) else None
                self._on_heartbeat(time.monotonic() - self._sent_at, failure)
            except Exception:  # an observer must not stop the member
                log.exception("the heartbeat observer failed")

    # --- the loop's steps -------------------------------------------------------

    def due(self) -> Optional[Assignment]:
        """Acts on the lease; returns the assignment (for the lag source)
        if a request is due now, else ``None``."""
        with self._lock:
            now = now_ms()
            self._machine.tick(now)
            return self._machine.assignment() if self._machine.request_due(now) else None

    def request(self, lags: Optional[List[LagRow]]) -> Optional[HeartbeatRequest]:
        """Takes the request due now, with the lags reported first (the lag
        source is called outside the lock: it may take the application's)."""
        with self._lock:
            if lags is not None:
                self._machine.report_lags(lags)
            request = self._machine.poll_request(now_ms())
        if request is not None:
            self._sent_at = time.monotonic()
        return request

    def events(self) -> List[Event]:
        with self._lock:
            events: List[Event] = []
            while True:
                event = self._machine.poll_event()
                if event is None:
                    return events
                events.append(event)

    def wait_s(self) -> Optional[float]:
        """How long the loop may sleep: until the machine's timeout (``None``:
        until something happens)."""
        with self._lock:
            timeout = self._machine.poll_timeout()
        return None if timeout is None else max(0.0, (timeout - now_ms()) / 1000)
