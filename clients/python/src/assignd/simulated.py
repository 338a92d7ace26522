"""Simulated stateful tasks, for the example worker and demos.

Every task has a changelog (its end offset) and, on each member that keeps
its state, a checkpoint. An active task first *restores* (replays its
changelog from the checkpoint at the replay rate), then *processes*: it
appends to its changelog at the process rate, only while ``may_process``
allows it, and keeps its checkpoint at the end. A learner or standby
replays at the replay rate and reports ``end - checkpoint`` as its lag, so
the host's learner safety sees it warm up. A port of the Rust client's
``simulated`` module.
"""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .events import Assignment
from .task import Task


class Role(enum.Enum):
    #: Restoring, then processing.
    ACTIVE = "active"
    #: A learner or standby: replaying.
    WARMING = "warming"


@dataclass(frozen=True)
class Rates:
    #: Records per second a learner, standby or restoring task replays.
    replay_per_s: float
    #: Records per second an active task appends to its changelog.
    process_per_s: float


def _file_name(task: Task) -> str:
    return f"{task.topic}-{task.partition}"


def _read_int(path: Path) -> Optional[int]:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _write_int(path: Path, value: int) -> None:
    """Writes through a temporary file, so a reader never sees half a number."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(str(value))
        os.replace(tmp, path)
    except OSError:
        pass


class DirStore:
    """Changelogs and checkpoints as decimal text in files: changelogs
    shared by every worker under ``state_dir/changelog/<topic>-<partition>``,
    this member's checkpoints under ``state_dir/<name>/<topic>-<partition>``
    (so a static worker restarted under its name starts warm)."""

    def __init__(self, state_dir: Path, local: str, changelog_len: int) -> None:
        self._changelogs = state_dir / "changelog"
        self._checkpoints = state_dir / local
        self._changelog_len = changelog_len
        self._changelogs.mkdir(parents=True, exist_ok=True)
        self._checkpoints.mkdir(parents=True, exist_ok=True)

    def end(self, task: Task) -> int:
        end = _read_int(self._changelogs / _file_name(task))
        return self._changelog_len if end is None else end

    def set_end(self, task: Task, end: int) -> None:
        _write_int(self._changelogs / _file_name(task), end)

    def checkpoint(self, task: Task) -> int:
        return _read_int(self._checkpoints / _file_name(task)) or 0

    def set_checkpoint(self, task: Task, offset: int) -> None:
        _write_int(self._checkpoints / _file_name(task), offset)


class TaskStates:
    """The tasks of one member and their state. Not thread-safe."""

    def __init__(self, store: DirStore, rates: Rates) -> None:
        self.store = store
        self._rates = rates
        self._roles: Dict[Task, Role] = {}
        # Fractions of records carried between ticks.
        self._credit: Dict[Task, float] = {}

    def lag(self, task: Task) -> int:
        """Records behind the changelog's end."""
        return max(self.store.end(task) - self.store.checkpoint(task), 0)

    def role(self, task: Task) -> Optional[Role]:
        return self._roles.get(task)

    def set(self, tasks: Iterable[Task], role: Optional[Role]) -> None:
        """Gives ``tasks`` a role, or none (the state stays, as on disk)."""
        for task in tasks:
            if role is None:
                self._roles.pop(task, None)
                self._credit.pop(task, None)
            else:
                self._roles[task] = role

    def with_role(self, tasks: Iterable[Task], role: Role) -> List[Task]:
        """Those of ``tasks`` that have ``role`` here."""
        return [t for t in tasks if self._roles.get(t) == role]

    def lags(self, assignment: Assignment) -> List[Tuple[Task, int]]:
        """The lag rows to report: the learners and standbys."""
        return [(t, self.lag(t)) for t in sorted(assignment.learner | assignment.standby)]

    def tick(self, elapsed_s: float, may_process: Callable[[Task], bool]) -> None:
        """Advances every task by ``elapsed_s``: a task behind its changelog
        replays; an active task at the end processes if ``may_process``."""
        for task, role in list(self._roles.items()):
            end, checkpoint = self.store.end(task), self.store.checkpoint(task)
            if checkpoint < end:
                n = self._take_credit(task, self._rates.replay_per_s * elapsed_s)
                self.store.set_checkpoint(task, min(checkpoint + n, end))
            elif role is Role.ACTIVE and may_process(task):
                n = self._take_credit(task, self._rates.process_per_s * elapsed_s)
                if n > 0:
                    self.store.set_end(task, end + n)
                    self.store.set_checkpoint(task, end + n)

    def _take_credit(self, task: Task, budget: float) -> int:
        credit = self._credit.get(task, 0.0) + budget
        whole = math.floor(credit)
        self._credit[task] = credit - whole
        return int(whole)
