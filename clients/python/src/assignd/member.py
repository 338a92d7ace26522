"""The blocking member: one machine driven by a background thread.

The loop thread acts on the lease, asks the lag source, hands requests to
a sender thread (so the lease still runs out on time while a request is in
flight), feeds the machine the outcomes and calls the listener's hooks,
one at a time, in order. The application's threads read the member's
state and ask for drains and leaves at any time.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, Mapping, Optional, Union

from .config import MemberConfig
from .core import Core, HeartbeatObserver, LagSource, LoadsArg, lag_rows
from .events import Assignment, Revoked
from .failure import Failure
from .listener import Listener, dispatch
from .machine import StopReason
from .task import Task
from .transport import HeartbeatFailed, Transport
from .wire import HeartbeatRequest, HeartbeatResponse

log = logging.getLogger("assignd")


class Member:
    """A member of a group, heartbeating on a background thread from
    :meth:`start` (or ``with Member(...) as member:``, which leaves on exit).

    Listener hooks run on that thread. :meth:`may_process`, the views,
    :meth:`drain` and :meth:`leave` may be called from any thread.
    ``on_heartbeat(latency_s, failure)``, if given, is called on the sender
    thread after every heartbeat (see :data:`assignd.HeartbeatObserver`).
    """

    def __init__(
        self,
        config: MemberConfig,
        listener: Optional[Listener] = None,
        lag_source: Optional[LagSource] = None,
        *,
        id_prefix: Optional[str] = None,
        on_heartbeat: Optional[HeartbeatObserver] = None,
    ) -> None:
        self._core = Core(config, id_prefix, on_heartbeat)
        self._transport = Transport(config)
        self._listener = listener or Listener()
        self._lag_source = lag_source
        self._wake = threading.Condition()
        self._woken = False
        self._closed = False
        self._outbox: "queue.Queue[Optional[HeartbeatRequest]]" = queue.Queue()
        self._sending = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="assignd-member", daemon=True)
        self._sender = threading.Thread(target=self._send_loop, name="assignd-sender", daemon=True)

    def start(self) -> "Member":
        """Starts heartbeating; the member joins at once."""
        self._sender.start()
        self._thread.start()
        return self

    def __enter__(self) -> "Member":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.leave()

    # --- what the application reads -------------------------------------

    def may_process(self, task: Task) -> bool:
        """Whether the application may process (and commit the output of)
        ``task`` now: it is active here, or being released and not yet
        acknowledged, and the lease has not run out. Check it before each
        commit: a stalled process then never writes after its task went
        elsewhere, even before it can hear it was fenced."""
        return self._core.may_process(task)

    @property
    def member_id(self) -> Optional[str]:
        return self._core.member_id()

    @property
    def member_epoch(self) -> int:
        """The member epoch, a fencing token for the application's writes
        (see the README)."""
        return self._core.member_epoch()

    @property
    def assignment(self) -> Assignment:
        """The assignment as the application has been told it."""
        return self._core.assignment()

    @property
    def lease_until(self) -> Optional[float]:
        """The end of the lease in force, in ``time.monotonic()`` seconds."""
        return self._core.lease_until()

    @property
    def stopped(self) -> Optional[StopReason]:
        """Why the member stopped (``left``, ``drained``, ``replaced``,
        ``fenced``, ``removed``), or ``None`` while it runs."""
        return self._core.stopped()

    @property
    def running(self) -> bool:
        """Whether the loop was started and has not ended."""
        return self._thread.ident is not None and not self._done.is_set()

    @property
    def leave_failure(self) -> Optional[Failure]:
        """The failure that ended the last leave, if one did."""
        return self._core.leave_failure()

    # --- what the application asks ---------------------------------------------

    def drain(self) -> None:
        """Asks the host to drain this member: its tasks move to others as
        they warm up; then ``on_drained``, the member leaves and stops."""
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

    def leave(self, timeout: Optional[float] = None) -> Optional[StopReason]:
        """Leaves the group and waits (up to ``timeout`` seconds) for the
        loop to end; returns why it stopped. Stop processing first: a
        dynamic member's tasks go to others at once. Called from a hook, it
        does not wait (the loop ends once the hook returns)."""
        self._core.leave()
        self._notify()
        if threading.current_thread() is not self._thread:
            self.wait(timeout)
        return self._core.stopped()

    def wait(self, timeout: Optional[float] = None) -> Optional[StopReason]:
        """Waits for the loop to end; returns why the member stopped."""
        if self._thread.ident is not None:
            self._done.wait(timeout)
        return self._core.stopped()

    def close(self) -> None:
        """Stops the loop without leaving, as a crash would (the member's
        slot waits for its session or registration timeout)."""
        self._closed = True
        self._notify()

    # --- the loop -----------------------------------------------------------------

    def _notify(self) -> None:
        with self._wake:
            self._woken = True
            self._wake.notify()

    def _run(self) -> None:
        try:
            while not self._closed:
                # Events first: an ack they lead to goes in the next request.
                self._deliver()
                self._send_if_due()
                if self._core.stopped() is not None and not self._sending:
                    break
                with self._wake:
                    if not self._woken:
                        self._wake.wait(self._core.wait_s())
                    self._woken = False
        except Exception:  # the loop must say why it died
            log.exception("the member loop failed")
        finally:
            self._outbox.put(None)
            self._safely(self._listener.on_stopped, self._core.stopped())
            self._done.set()

    def _send_if_due(self) -> None:
        if self._sending:
            return
        assignment = self._core.due()
        if assignment is None:
            return
        lags = None
        if self._lag_source is not None:
            try:
                lags = lag_rows(self._lag_source(assignment))
            except Exception:  # a broken lag source must not stop heartbeats
                log.exception("the lag source failed: sending the last lags")
        request = self._core.request(lags)
        if request is not None:
            self._sending = True
            self._outbox.put(request)

    def _deliver(self) -> None:
        # Until none is left: an ack may give back tasks at once.
        while not self._closed:
            events = self._core.events()
            if not events:
                return
            for event in events:
                ok = self._safely(dispatch, self._listener, event)
                if isinstance(event, Revoked):
                    if ok:
                        self._core.ack(event.ack)
                    else:
                        log.error("on_revoked failed: tasks %s stay unacknowledged", list(event.tasks))

    def _safely(self, hook: Callable[..., object], *args: object) -> bool:
        try:
            hook(*args)
            return True
        except Exception:  # a failing hook must not stop the member
            log.exception("listener hook failed")
            return False

    def _send_loop(self) -> None:
        while True:
            request = self._outbox.get()
            if request is None:
                break
            result: Union[HeartbeatResponse, Failure]
            try:
                result = self._transport.heartbeat(request)
            except HeartbeatFailed as failed:
                log.debug("heartbeat failed: %s", failed.failure)
                result = failed.failure
            except Exception as error:  # keep the machine's request settled
                log.exception("heartbeat failed unexpectedly")
                result = Failure("no_answer", message=repr(error))
            self._core.answer(result)
            self._sending = False
            self._notify()
        self._transport.close()
