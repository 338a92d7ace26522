"""Task lists in their two JSON forms.

A list is a JSON array whose items are tasks ``[topic, partition]`` or, in
the compact form, ranges ``[topic, first, last]`` (both ends included): a
member of a million tasks sends its ``owned`` list in a few hundred bytes
instead of 17 MB. The writer writes each run of consecutive partitions of a
topic as one range (a lone task as a pair); the reader takes either form.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple, Union

from .task import Task

#: The most tasks one list may hold once its ranges are expanded (the
#: host's limit on a group's tasks): a longer list is refused while read.
TASKS_PER_LIST_MAX = 1_000_000

_PARTITION_MAX = 2**32 - 1

Item = Union[Tuple[str, int], Tuple[str, int, int]]


def write(tasks: Iterable[Task], ranges: bool = True) -> List[Item]:
    """``tasks`` as JSON items: pairs only, or with ``ranges`` each run of
    consecutive partitions of a topic as ``[topic, first, last]``. Runs are
    found in the order given, so sorted tasks give the fewest items."""
    if not ranges:
        return [(t.topic, t.partition) for t in tasks]
    runs: List[List[Any]] = []
    for task in tasks:
        if runs and runs[-1][0] == task.topic and runs[-1][2] + 1 == task.partition:
            runs[-1][2] = task.partition
        else:
            runs.append([task.topic, task.partition, task.partition])
    return [(topic, first) if first == last else (topic, first, last) for topic, first, last in runs]


class TaskListError(ValueError):
    """A task list that is not one."""


def _partition(value: Any, where: str) -> int:
    # bool is an int in Python, never a partition in JSON.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _PARTITION_MAX:
        raise TaskListError(f"{where}: {value!r} is not a partition (0 to 2^32-1)")
    return value


def read_runs(value: Any) -> List[Tuple[str, int, int]]:
    """Reads a list in either form as ``(topic, first, last)`` runs, without
    expanding them; an absent (``None``) list is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise TaskListError(f"a task list must be an array, not {type(value).__name__}")
    runs: List[Tuple[str, int, int]] = []
    for item in value:
        if not isinstance(item, list) or len(item) not in (2, 3):
            raise TaskListError(f"{item!r} is neither [topic, partition] nor [topic, first, last]")
        topic = item[0]
        if not isinstance(topic, str):
            raise TaskListError(f"{item!r}: the topic must be a string")
        first = _partition(item[1], repr(item))
        last = _partition(item[2], repr(item)) if len(item) == 3 else first
        if first > last:
            raise TaskListError(f"the range {item!r} ends before it starts")
        runs.append((topic, first, last))
    return runs


def read_optional(value: Any) -> Optional[List[Task]]:
    """Reads a list in either form, ranges expanded; ``None`` stays ``None``."""
    if value is None:
        return None
    tasks: List[Task] = []
    for topic, first, last in read_runs(value):
        # Checked before expanding: a range is cheap to send, not to expand.
        if len(tasks) + (last - first) + 1 > TASKS_PER_LIST_MAX:
            raise TaskListError(f"more than {TASKS_PER_LIST_MAX} tasks in one list")
        tasks.extend(Task(topic, p) for p in range(first, last + 1))
    return tasks


def read(value: Any) -> List[Task]:
    """Reads a list in either form; an absent (``None``) list is empty."""
    return read_optional(value) or []
