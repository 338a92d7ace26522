"""The asyncio member: one machine driven by a task on the running loop.

Use it with ``async with`` (it starts on entry and leaves on exit), and
either an :class:`~assignd.AsyncListener`, whose hooks are awaited in
order (a revocation is acknowledged when ``on_revoked`` returns), or no
listener and ``async for event in member.events()``, where the application
acknowledges each :class:`~assignd.events.Revoked` itself with
:meth:`AsyncMember.ack` once it stopped those tasks. HTTP goes through the
blocking transport in a worker thread (``asyncio.to_thread``), one request
at a time, so the loop still acts on the lease while a request is out.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, List, Mapping, Optional, Tuple, Union

from .config import MemberConfig
from .core import Core, HeartbeatObserver, LoadsArg, lag_rows
from .events import Assignment, Event, Revoked
from .failure import Failure
from .listener import AsyncListener, dispatch
from .machine import StopReason
from .task import Task
from .transport import HeartbeatFailed, Transport
from .wire import HeartbeatRequest, HeartbeatResponse

log = logging.getLogger("assignd")

#: ``lags(assignment)``, plain or ``async``: ``(task, lag)`` pairs.
AsyncLagSource = Callable[
    [Assignment],
    Union[Iterable[Tuple[Task, int]], Awaitable[Iterable[Tuple[Task, int]]]],
]


class AsyncMember:
    """A member of a group, heartbeating on an asyncio task.

    ``async with AsyncMember(config, listener) as member: ...`` starts it
    and leaves on exit. :meth:`may_process` and the views are plain
    methods, safe from any thread. ``on_heartbeat(latency_s, failure)``, if
    given, is called on the loop after every heartbeat (see
    :data:`assignd.HeartbeatObserver`).
    """

    def __init__(
        self,
        config: MemberConfig,
        listener: Optional[AsyncListener] = None,
        lag_source: Optional[AsyncLagSource] = None,
        *,
        id_prefix: Optional[str] = None,
        on_heartbeat: Optional[HeartbeatObserver] = None,
    ) -> None:
        self._core = Core(config, id_prefix, on_heartbeat)
        self._transport = Transport(config)
        self._listener = listener
        self._lag_source = lag_source
        self._wake: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        # Events for ``events()`` when there is no listener; ``None`` ends it.
        self._queue: "Optional[asyncio.Queue[Optional[Event]]]" = None
        self._sending: Optional["asyncio.Task[Union[HeartbeatResponse, Failure]]"] = None

    async def start(self) -> "AsyncMember":
        """Starts heartbeating on the running loop; the member joins at once."""
        self._wake = asyncio.Event()
        self._queue = asyncio.Queue()
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aenter__(self) -> "AsyncMember":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.leave()

    # --- what the application reads -------------------------------------

    def may_process(self, task: Task) -> bool:
        """Whether ``task`` may be processed (and its output committed) now:
        held here and within the lease (see :meth:`assignd.Member.may_process`)."""
        return self._core.may_process(task)

    @property
    def member_id(self) -> Optional[str]:
        return self._core.member_id()

    @property
    def member_epoch(self) -> int:
        """The member epoch, a fencing token for the application's writes."""
        return self._core.member_epoch()

    @property
    def assignment(self) -> Assignment:
        return self._core.assignment()

    @property
    def lease_until(self) -> Optional[float]:
        """The end of the lease in force, in ``time.monotonic()`` seconds."""
        return self._core.lease_until()

    @property
    def stopped(self) -> Optional[StopReason]:
        return self._core.stopped()

    @property
    def leave_failure(self) -> Optional[Failure]:
        return self._core.leave_failure()

    async def events(self) -> AsyncIterator[Event]:
        """Every event, in order, until the member stops (only without a
        listener). Acknowledge each ``Revoked`` with :meth:`ack`."""
        if self._listener is not None:
            raise RuntimeError("this member hands its events to its listener")
        if self._queue is None:
            raise RuntimeError("start the member first")
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event

    # --- what the application asks ---------------------------------------------

    def ack(self, revoked: Revoked) -> None:
        """The tasks of ``revoked`` are stopped: release them (a heartbeat
        goes at once). Call it on the member's event loop."""
        self._core.ack(revoked.ack)
        self._notify()

    def drain(self) -> None:
        """Asks the host to drain this member; then ``drained``, and it leaves."""
        self._core.drain()
        self._notify()

    def set_endpoint(self, endpoint: Optional[str], metadata: Optional[Mapping[str, str]] = None) -> None:
        """Publishes ``endpoint`` (``None``: none) and ``metadata`` in place
        of the config's: the next heartbeat carries them, and every later
        one until the host has answered one that did. Raises
        :class:`~assignd.ConfigError` past the host's limits, changing
        nothing."""
        self._core.set_endpoint(endpoint, metadata)

    def report_load(
        self,
        loads: LoadsArg = (),
        *,
        utilisation: Optional[float] = None,
        load_capacity: Optional[float] = None,
    ) -> None:
        """Sets the current load of active tasks, in the group's load unit
        (``{task: load}`` or ``(task, load)`` pairs), and, when given, the
        member's measured ``utilisation`` (1.0: fully used) and the
        ``load_capacity`` it can carry. They go with a later heartbeat once
        the host asks for loads: all of them after a join or a coordinator
        change, else those that moved by more than the config's
        ``load_threshold``. A task not active here is ignored, and a task's
        load is forgotten once it stops being active. Raises
        :class:`~assignd.ConfigError` for a value the host would refuse,
        changing nothing. No heartbeat is sent for it."""
        self._core.report_load(loads, utilisation, load_capacity)

    async def leave(self) -> Optional[StopReason]:
        """Leaves the group and waits for the loop to end; returns why the
        member stopped. (From inside a hook, it does not wait.)"""
        self._core.leave()
        self._notify()
        if self._task is not None and asyncio.current_task() is not self._task:
            await asyncio.shield(self._task)
        return self._core.stopped()

    async def wait(self) -> Optional[StopReason]:
        """Waits for the loop to end; returns why the member stopped."""
        if self._task is not None:
            await asyncio.shield(self._task)
        return self._core.stopped()

    async def close(self) -> None:
        """Stops without leaving, as a crash would."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    # --- the loop -----------------------------------------------------------------

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        assert self._wake is not None
        try:
            while True:
                # Events first: an ack they lead to goes in the next request.
                await self._deliver()
                await self._send_if_due()
                if self._core.stopped() is not None and self._sending is None:
                    break
                await self._sleep()
        except Exception:  # the loop must say why it died
            log.exception("the member loop failed")
        finally:
            if self._sending is not None:
                self._sending.cancel()
            self._transport.close()
            await self._end()

    async def _end(self) -> None:
        if self._listener is not None:
            await self._safely(self._listener.on_stopped(self._core.stopped()))
        elif self._queue is not None:
            self._queue.put_nowait(None)

    async def _sleep(self) -> None:
        assert self._wake is not None
        waits: List["asyncio.Future[Any]"] = [asyncio.ensure_future(self._wake.wait())]
        if self._sending is not None:
            waits.append(self._sending)
        try:
            await asyncio.wait(waits, timeout=self._core.wait_s(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            waits[0].cancel()
        self._wake.clear()
        if self._sending is not None and self._sending.done():
            self._core.answer(self._sending.result())
            self._sending = None

    async def _send_if_due(self) -> None:
        if self._sending is not None:
            return
        assignment = self._core.due()
        if assignment is None:
            return
        lags = None
        if self._lag_source is not None:
            try:
                pairs = self._lag_source(assignment)
                if inspect.isawaitable(pairs):
                    pairs = await pairs
                lags = lag_rows(pairs)
            except Exception:  # a broken lag source must not stop heartbeats
                log.exception("the lag source failed: sending the last lags")
        request = self._core.request(lags)
        if request is not None:
            self._sending = asyncio.ensure_future(asyncio.to_thread(self._send, request))

    def _send(self, request: HeartbeatRequest) -> Union[HeartbeatResponse, Failure]:
        try:
            return self._transport.heartbeat(request)
        except HeartbeatFailed as failed:
            log.debug("heartbeat failed: %s", failed.failure)
            return failed.failure
        except Exception as error:  # keep the machine's request settled
            log.exception("heartbeat failed unexpectedly")
            return Failure("no_answer", message=repr(error))

    async def _deliver(self) -> None:
        # Until none is left: an ack may give back tasks at once.
        while True:
            events = self._core.events()
            if not events:
                return
            for event in events:
                await self._deliver_one(event)

    async def _deliver_one(self, event: Event) -> None:
        if self._listener is None:
            assert self._queue is not None
            self._queue.put_nowait(event)
            return
        ok = await self._safely(dispatch(self._listener, event))
        if isinstance(event, Revoked):
            if ok:
                self._core.ack(event.ack)
            else:
                log.error("on_revoked failed: tasks %s stay unacknowledged", list(event.tasks))

    async def _safely(self, hook: Optional[Awaitable[None]]) -> bool:
        try:
            if hook is not None:
                await hook
            return True
        except Exception:  # a failing hook must not stop the member
            log.exception("listener hook failed")
            return False
