"""A task (one partition of one topic) and a lag row, as the protocol writes them."""

from __future__ import annotations

from typing import Iterable, List, NamedTuple


class Task(NamedTuple):
    """One partition of one topic; in JSON ``[topic, partition]``.

    Tasks order by topic (code point order, which is UTF-8 byte order),
    then partition, as every list the member machine hands out is sorted.
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}"


class LagRow(NamedTuple):
    """How many records a member's local state of a task is behind its changelog."""

    topic: str
    partition: int
    lag: int


def sorted_tasks(tasks: Iterable[Task]) -> List[Task]:
    """The distinct tasks of ``tasks``, sorted."""
    return sorted(set(tasks))
