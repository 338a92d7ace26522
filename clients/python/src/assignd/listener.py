"""Listeners: how the member shells hand events to the application.

Subclass :class:`Listener` (blocking :class:`~assignd.Member`) or
:class:`AsyncListener` (:class:`~assignd.AsyncMember`) and override the
hooks you need; the others do nothing. Hooks are called one at a time, in
the order the machine queued the events:

- ``on_assigned(tasks, promoted)``: start processing ``tasks``.
  ``promoted`` is true when they were learner or standby copies here (their
  state is warm); such tasks get no ``on_learner_stopped``.
- ``on_revoked(tasks)``: stop processing ``tasks``, then return. The shell
  acknowledges the revocation when the hook *returns*, and only then does
  the host grant the tasks elsewhere; if the hook raises, the revocation is
  not acknowledged (the host eventually fences the member, which then
  loses and rejoins).
- ``on_lost(tasks)``: stop at once; they may be active elsewhere already.

A hook must not block for long: the heartbeat loop waits for it (the lease
still protects the application, see ``may_process``).
"""

from __future__ import annotations

from typing import Any, Awaitable, Optional, Tuple

from .events import Assigned, Drained, Draining, Error, Event, Fenced, Joined, Promoted, Replaced
from .failure import Failure
from .machine import StopReason
from .task import Task

Tasks = Tuple[Task, ...]


class Listener:
    """Blocking hooks, called on the member's loop thread."""

    def on_joined(self, member_id: str) -> None: ...
    def on_assigned(self, tasks: Tasks, promoted: bool) -> None: ...
    def on_revoked(self, tasks: Tasks) -> None: ...
    def on_lost(self, tasks: Tasks) -> None: ...
    def on_learner_started(self, tasks: Tasks) -> None: ...
    def on_learner_stopped(self, tasks: Tasks) -> None: ...
    def on_standby_started(self, tasks: Tasks) -> None: ...
    def on_standby_stopped(self, tasks: Tasks) -> None: ...
    def on_draining(self) -> None: ...
    def on_drained(self) -> None: ...
    def on_fenced(self, rejoining: bool) -> None: ...
    def on_replaced(self, member_name: str) -> None: ...
    def on_error(self, failure: Failure) -> None: ...
    def on_stopped(self, reason: Optional[StopReason]) -> None:
        """The loop ended: why the machine stopped, or ``None`` when the
        member was closed without leaving."""


class AsyncListener:
    """Awaitable hooks, awaited on the member's task."""

    async def on_joined(self, member_id: str) -> None: ...
    async def on_assigned(self, tasks: Tasks, promoted: bool) -> None: ...
    async def on_revoked(self, tasks: Tasks) -> None: ...
    async def on_lost(self, tasks: Tasks) -> None: ...
    async def on_learner_started(self, tasks: Tasks) -> None: ...
    async def on_learner_stopped(self, tasks: Tasks) -> None: ...
    async def on_standby_started(self, tasks: Tasks) -> None: ...
    async def on_standby_stopped(self, tasks: Tasks) -> None: ...
    async def on_draining(self) -> None: ...
    async def on_drained(self) -> None: ...
    async def on_fenced(self, rejoining: bool) -> None: ...
    async def on_replaced(self, member_name: str) -> None: ...
    async def on_error(self, failure: Failure) -> None: ...
    async def on_stopped(self, reason: Optional[StopReason]) -> None: ...


def _hook(event: Event) -> Tuple[str, Tuple[Any, ...]]:
    """The listener hook for ``event``, and its arguments."""
    if isinstance(event, Joined):
        return "on_joined", (event.member_id,)
    if isinstance(event, (Assigned, Promoted)):
        return "on_assigned", (event.tasks, isinstance(event, Promoted))
    if isinstance(event, Fenced):
        return "on_fenced", (event.rejoining,)
    if isinstance(event, Replaced):
        return "on_replaced", (event.member_name,)
    if isinstance(event, Error):
        return "on_error", (event.failure,)
    if isinstance(event, (Draining, Drained)):
        return f"on_{event.type}", ()
    # revoked, lost, learner_started/stopped, standby_started/stopped
    return f"on_{event.type}", (event.tasks,)


def dispatch(listener: Any, event: Event) -> Optional[Awaitable[None]]:
    """Calls the hook of ``listener`` for ``event``; returns what it
    returns (an awaitable for an :class:`AsyncListener`)."""
    name, args = _hook(event)
    result: Optional[Awaitable[None]] = getattr(listener, name)(*args)
    return result
