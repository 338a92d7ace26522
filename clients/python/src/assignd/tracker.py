"""What the application has been told about its tasks: the member's side
of incremental cooperative rebalancing, without I/O or time.

It owns three rules:

- a task the host moves to ``revoking`` is reported owned until the
  application acknowledges releasing it, and never after;
- a task the host gives (back) while the application is still releasing it
  is granted only after that release is acknowledged;
- the ``owned`` report never names a task the host's last answer does not
  hold for this member (the host refuses such a report).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, List, Set, Tuple

from .events import (
    Assigned,
    Assignment,
    Drained,
    Draining,
    Event,
    LearnerStarted,
    LearnerStopped,
    Lost,
    Promoted,
    Revoked,
    StandbyStarted,
    StandbyStopped,
)
from .task import Task
from .wire import HeartbeatResponse

#: How many answers a copy the host stopped listing is kept while the
#: member's epoch stays put (see :class:`_Copies`).
AWAIT_ANSWERS_MAX = 10


def _sorted(tasks: Iterable[Task]) -> Tuple[Task, ...]:
    return tuple(sorted(tasks))


class _Copies:
    """Warm copies of one kind (learners or standbys) as told.

    When a learner catches up, the host makes the task active here but
    grants it only once its old owner released it; meanwhile the answers
    list it nowhere. So a copy the answers stop listing is kept (still
    warming, its lag still reported, which keeps the host's learner safety
    satisfied) until it is granted (promoted), an answer at a higher epoch
    leaves it out, or ``AWAIT_ANSWERS_MAX`` answers went by (stopped).
    """

    def __init__(self) -> None:
        self.told: Set[Task] = set()
        # Told copies no answer lists: the epoch of the answer that dropped
        # each, and how many more answers it may wait.
        self._awaiting: Dict[Task, List[int]] = {}

    def update(
        self, listed: FrozenSet[Task], granted: Set[Task], epoch: int
    ) -> Tuple[Tuple[Task, ...], Tuple[Task, ...]]:
        """Applies an answer's list; returns the copies started and stopped."""
        started = _sorted(listed - self.told)
        stopped: List[Task] = []
        for task in sorted(self.told):
            if task in listed or task in granted:
                continue
            waiting = self._awaiting.get(task)
            if waiting is None:
                self._awaiting[task] = [epoch, AWAIT_ANSWERS_MAX]
                continue
            waiting[1] = max(waiting[1] - 1, 0)
            if epoch > waiting[0] or waiting[1] == 0:
                del self._awaiting[task]
                stopped.append(task)
        self._awaiting = {t: w for t, w in self._awaiting.items() if t not in listed and t not in granted}
        self.told = set(listed) | set(self._awaiting)
        return started, tuple(stopped)

    def promote(self, granted: Set[Task]) -> None:
        """``granted`` tasks became active: copies no more."""
        self.told -= granted
        for task in granted:
            self._awaiting.pop(task, None)


class Tracker:
    def __init__(self) -> None:
        # Never reused, so an ack from before a reset matches nothing.
        self._next_ack = 0
        self._clear()

    def _clear(self) -> None:
        self._active: Set[Task] = set()
        # Tasks being released, by the acknowledgement that releases them.
        self._revoking: Dict[Task, int] = {}
        self._learner = _Copies()
        self._standby = _Copies()
        self._draining = False
        # What the host's last answer holds for this member.
        self._host_held: FrozenSet[Task] = frozenset()
        self._host_active: FrozenSet[Task] = frozenset()

    def assignment(self) -> Assignment:
        return Assignment(
            active=frozenset(self._active),
            revoking=frozenset(self._revoking),
            learner=frozenset(self._learner.told),
            standby=frozenset(self._standby.told),
            draining=self._draining,
        )

    def is_active(self, task: Task) -> bool:
        """Whether ``task`` is active here (not being released)."""
        return task in self._active

    def holds(self, task: Task) -> bool:
        """Whether ``task`` is active here or being released."""
        return task in self._active or task in self._revoking

    def owned(self) -> List[Task]:
        """Active tasks and unacknowledged revocations the host still counts as ours."""
        return sorted(t for t in self._active | set(self._revoking) if t in self._host_held)

    def holds_any(self) -> bool:
        return bool(self._active or self._revoking)

    def is_releasing(self) -> bool:
        return bool(self._revoking)

    def on_response(self, response: HeartbeatResponse) -> List[Event]:
        """Applies an answer; returns what to tell, in order."""
        events: List[Event] = []
        self._host_active = response.active
        self._host_held = response.active | response.revoking

        lost = {t for t in self._active if t not in self._host_held}
        if lost:
            self._active -= lost
            events.append(Lost(_sorted(lost)))
        revoked = {t for t in self._active if t in response.revoking}
        if revoked:
            ack = self._next_ack
            self._next_ack += 1
            self._active -= revoked
            for task in revoked:
                self._revoking[task] = ack
            events.append(Revoked(ack, _sorted(revoked)))

        granted = self._grantable()
        promoted, assigned = self._split_warm(granted)
        learner_started, learner_stopped = self._learner.update(
            response.learner, granted, response.member_epoch
        )
        standby_started, standby_stopped = self._standby.update(
            response.standby, granted, response.member_epoch
        )
        self._active |= granted

        if learner_stopped:
            events.append(LearnerStopped(learner_stopped))
        if standby_stopped:
            events.append(StandbyStopped(standby_stopped))
        if promoted:
            events.append(Promoted(promoted))
        if assigned:
            events.append(Assigned(assigned))
        if learner_started:
            events.append(LearnerStarted(learner_started))
        if standby_started:
            events.append(StandbyStarted(standby_started))
        if response.draining and not self._draining:
            events.append(Draining())
        self._draining = response.draining
        if response.drained:
            events.append(Drained())
        return events

    def _grantable(self) -> Set[Task]:
        """Tasks the host gives as active that the application has not got
        and is not still releasing."""
        return {t for t in self._host_active if t not in self._active and t not in self._revoking}

    def _split_warm(self, granted: Set[Task]) -> Tuple[Tuple[Task, ...], Tuple[Task, ...]]:
        """Newly granted tasks as (promoted copies, cold assignments); the
        copies are forgotten."""
        warm = self._learner.told | self._standby.told
        promoted = _sorted(t for t in granted if t in warm)
        assigned = _sorted(t for t in granted if t not in warm)
        self._learner.promote(granted)
        self._standby.promote(granted)
        return promoted, assigned

    def on_ack(self, ack: int) -> Tuple[bool, List[Event]]:
        """The application released the tasks of ``ack``. Returns whether
        the ack was known, and the tasks the host gave back meanwhile."""
        released = [t for t, a in self._revoking.items() if a == ack]
        if not released:
            return False, []
        for task in released:
            del self._revoking[task]
        granted = self._grantable()
        promoted, assigned = self._split_warm(granted)
        self._active |= granted
        events: List[Event] = []
        if promoted:
            events.append(Promoted(promoted))
        if assigned:
            events.append(Assigned(assigned))
        return True, events

    def reset(self) -> Tuple[Task, ...]:
        """Forgets everything but the ack counter; returns every task held
        (active or still being released)."""
        held = _sorted(self._active | set(self._revoking))
        self._clear()
        return held
