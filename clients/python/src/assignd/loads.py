"""A member's load reports, without I/O: the load the application set for
each of its active tasks, its utilisation and load capacity, what the host
has acknowledged of them, and so which of them the next heartbeat carries.
A port of the Rust client's ``client/src/loads.rs``.

Nothing is sent until an answer's ``load_report`` says ``changes`` or
``full`` (an older host refuses unknown fields). After ``full`` the next
heartbeat carries every known load of an active task (an unknown one is
left out: unknown is not zero) and the utilisation and load capacity when
set; after ``changes``, the loads that moved by more than the threshold
(relative to the acknowledged value) or were never acknowledged, the
utilisation when it moved by more than :data:`UTILISATION_STEP`, and the
load capacity when it changed. A value counts as acknowledged once the
heartbeat that carried it got an answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .task import Task

#: How far a task's load may move, relative to the value the host
#: acknowledged, before it is sent again (10 %).
LOAD_THRESHOLD_DEFAULT = 0.1
#: How far the utilisation may move (absolute) before it is sent again.
UTILISATION_STEP = 0.05
#: The largest load (and load capacity) the host accepts.
LOAD_MAX = 1e15
#: The largest utilisation the host accepts (1.0 is fully used).
UTILISATION_MAX = 10.0

#: What an answer asks of the next heartbeat: "none", "changes" or "full".
LoadReport = str


def read_load_report(value: object) -> LoadReport:
    """An answer's ``load_report``: absent or unknown reads as ``"none"``."""
    return value if value in ("changes", "full") else "none"  # type: ignore[return-value]


def valid_load(load: float) -> bool:
    return _number(load) and 0.0 <= load <= LOAD_MAX


def valid_utilisation(utilisation: Optional[float]) -> bool:
    return utilisation is None or (_number(utilisation) and 0.0 <= utilisation <= UTILISATION_MAX)


def valid_load_capacity(capacity: Optional[float]) -> bool:
    return capacity is None or (_number(capacity) and 0.0 < capacity <= LOAD_MAX)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class LoadFields:
    """The load fields of one heartbeat; all ``None``: it carries none.
    ``loads`` are JSON items ``[topic, partition, load]`` or ``[topic,
    first, last, load]``."""

    loads: Optional[List[list]] = None
    utilisation: Optional[float] = None
    load_capacity: Optional[float] = None


@dataclass
class _Sent:
    full: bool
    loads: List[Tuple[Task, float]]
    utilisation: Optional[float]
    load_capacity: Optional[float]


class LoadBook:
    """Known values and acknowledged values (see the module doc)."""

    def __init__(self, threshold: float = LOAD_THRESHOLD_DEFAULT) -> None:
        self.threshold = threshold
        self.report: LoadReport = "none"
        self._loads: Dict[Task, float] = {}
        self._acked: Dict[Task, float] = {}
        self._utilisation: Optional[float] = None
        self._acked_utilisation: Optional[float] = None
        self._load_capacity: Optional[float] = None
        self._acked_load_capacity: Optional[float] = None
        self._in_flight: Optional[_Sent] = None

    def set_load(self, task: Task, load: float) -> bool:
        """The application's current load of an active task; returns
        whether it is valid (an invalid one changes nothing)."""
        if not valid_load(load):
            return False
        self._loads[task] = float(load)
        return True

    def set_utilisation(self, utilisation: Optional[float]) -> bool:
        if not valid_utilisation(utilisation):
            return False
        self._utilisation = None if utilisation is None else float(utilisation)
        return True

    def set_load_capacity(self, capacity: Optional[float]) -> bool:
        if not valid_load_capacity(capacity):
            return False
        self._load_capacity = None if capacity is None else float(capacity)
        return True

    def retain_active(self, active: Callable[[Task], bool]) -> None:
        """Forgets the loads (and acknowledged loads) of tasks no longer active."""
        self._loads = {t: v for t, v in self._loads.items() if active(t)}
        self._acked = {t: v for t, v in self._acked.items() if active(t)}

    def build(self) -> LoadFields:
        """The fields of the heartbeat built now, in flight until
        :meth:`answered` or :meth:`failed`."""
        if self.report == "full":
            sent: Optional[_Sent] = _Sent(
                True, sorted(self._loads.items()), self._utilisation, self._load_capacity
            )
        elif self.report == "changes":
            sent = self._changes()
        else:
            sent = None
        self._in_flight = sent
        if sent is None:
            return LoadFields()
        return LoadFields(
            loads=items(sent.loads) if sent.full or sent.loads else None,
            utilisation=sent.utilisation,
            load_capacity=sent.load_capacity,
        )

    def _changes(self) -> _Sent:
        def moved(task: Task, load: float) -> bool:
            acked = self._acked.get(task)
            return acked is None or abs(load - acked) > self.threshold * acked

        utilisation = self._utilisation
        if utilisation is not None and self._acked_utilisation is not None:
            if not abs(utilisation - self._acked_utilisation) > UTILISATION_STEP:
                utilisation = None
        capacity = self._load_capacity
        if capacity is not None and capacity == self._acked_load_capacity:
            capacity = None
        loads = [(t, v) for t, v in sorted(self._loads.items()) if moved(t, v)]
        return _Sent(False, loads, utilisation, capacity)

    def answered(self, report: LoadReport) -> None:
        """The heartbeat in flight got an answer asking ``report`` next."""
        sent, self._in_flight = self._in_flight, None
        if sent is not None:
            if sent.full:
                self._acked = dict(sent.loads)
                self._acked_utilisation = sent.utilisation
                self._acked_load_capacity = sent.load_capacity
            else:
                self._acked.update(sent.loads)
                if sent.utilisation is not None:
                    self._acked_utilisation = sent.utilisation
                if sent.load_capacity is not None:
                    self._acked_load_capacity = sent.load_capacity
        self.report = report
        if report != "changes":
            self._forget_acked()

    def failed(self) -> None:
        """The heartbeat in flight failed: the next carries its values again."""
        self._in_flight = None

    def reset(self) -> None:
        """A new member (or a leave): nothing is sent until an answer asks."""
        self._in_flight = None
        self.report = "none"
        self._forget_acked()

    def _forget_acked(self) -> None:
        self._acked = {}
        self._acked_utilisation = None
        self._acked_load_capacity = None


def items(loads: Sequence[Tuple[Task, float]]) -> List[list]:
    """``loads`` (sorted by task) as JSON items: each run of consecutive
    partitions of a topic with the same load as one range."""
    out: List[list] = []
    for task, load in loads:
        last = out[-1] if out else None
        if last is not None and last[0] == task.topic and last[-1] == load and last[-2] + 1 == task.partition:
            if len(last) == 3:
                last.insert(2, task.partition)
            else:
                last[2] = task.partition
        else:
            out.append([task.topic, task.partition, load])
    return out
