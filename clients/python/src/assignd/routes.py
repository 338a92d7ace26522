"""A routing table as ``GET /v1/groups/{group}/routes`` answers it
(docs/routing.md), read once and indexed so that a lookup costs a few
array and dict reads: per topic, the owner of each partition in an array,
and the few tasks that move, learn or stand by in dicts by partition. It
does no I/O and reads no clock: freshness is judged at the ``now_ms``
(monotonic milliseconds) the caller passes, against the time the request
that got the table was *sent*.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from . import ranges
from .keys import Key, partition_for_key
from .ranges import TASKS_PER_LIST_MAX
from .wire import WireError

_NOBODY = -1
_U64_MAX = 2**64 - 1


class RouteError(LookupError):
    """A lookup the table cannot answer."""


class UnknownTopic(RouteError):
    """The table has no such topic."""


class PartitionOutOfRange(RouteError):
    """A partition at or past the topic's partition count."""


@dataclass(frozen=True)
class RouteMember:
    """A member as the routing table shows it."""

    member_id: str
    #: A static member's name; ``None`` for a dynamic member.
    member_name: Optional[str] = None
    #: Where it serves (a URL or ``host:port``), as it published it.
    endpoint: Optional[str] = None
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """Who processes one task, as one table says."""

    topic: str
    partition: int
    #: The member processing the task now; ``None``: nobody.
    owner: Optional[RouteMember]
    #: The member the task moves to, while it moves.
    moving_to: Optional[RouteMember]
    learners: Tuple[RouteMember, ...]
    standbys: Tuple[RouteMember, ...]
    #: The epoch of the table the route was read from.
    epoch: int
    #: Whether the table was within its ownership bound at the lookup: the
    #: owner, unless moving, is the only member processing the task.
    fresh: bool


class _TopicIndex:
    """One topic's routes: owners by partition, and the sparse rest."""

    __slots__ = ("owners", "moving_to", "learners", "standbys")

    def __init__(self, partitions: int) -> None:
        self.owners = array("l", [_NOBODY]) * partitions
        self.moving_to: Dict[int, int] = {}
        self.learners: Dict[int, List[int]] = {}
        self.standbys: Dict[int, List[int]] = {}


def _count(body: Mapping[str, Any], name: str) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U64_MAX:
        raise WireError(f"{name}: a count is required, not {value!r}")
    return value


def _object(value: Any, name: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WireError(f"{name}: a JSON object is required")
    return value


def _optional_text(value: Any, name: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise WireError(f"{name}: a string or null is required")
    return value


def _member(member_id: str, value: Any) -> RouteMember:
    detail = _object(value, f"members.{member_id}")
    metadata = _object(detail.get("metadata"), f"members.{member_id}.metadata")
    if not all(isinstance(v, str) for v in metadata.values()):
        raise WireError(f"members.{member_id}.metadata: string values are required")
    return RouteMember(
        member_id,
        _optional_text(detail.get("member_name"), "member_name"),
        _optional_text(detail.get("endpoint"), "endpoint"),
        dict(metadata),
    )


def _topics(body: Mapping[str, Any]) -> Dict[str, int]:
    topics: Dict[str, int] = {}
    for name, count in _object(body.get("topics"), "topics").items():
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < 2**32:
            raise WireError(f"topics.{name}: a partition count is required, not {count!r}")
        topics[name] = count
    # An index entry per task: bounded as the host bounds a group's tasks.
    if sum(topics.values()) > TASKS_PER_LIST_MAX:
        raise WireError(f"more than {TASKS_PER_LIST_MAX} tasks in one table")
    return topics


class RouteTable:
    """One routing table, indexed. Immutable once built: share it freely."""

    def __init__(self, body: Mapping[str, Any], sent_at_ms: int, waited_ms: int = 0) -> None:
        """Reads ``body`` (the JSON answer) got by a request sent at
        ``sent_at_ms`` that waited ``waited_ms`` at the host before the
        table was read (its ``Assignd-Routes-Waited-Ms``); raises :class:`~assignd.wire.WireError` if it does
        not read as a table. Tasks of a topic the table does not list, or
        past its count, cannot be looked up and are left out."""
        if not isinstance(body, dict):
            raise WireError("a routing table must be a JSON object")
        group = body.get("group")
        if not isinstance(group, str):
            raise WireError("group: a string is required")
        self.group = group
        self.epoch = _count(body, "epoch")
        self.group_epoch = _count(body, "group_epoch")
        self.valid_ms = _count(body, "valid_ms")
        self.topics = _topics(body)
        self.sent_at_ms = sent_at_ms
        self.waited_ms = waited_ms
        #: The answer as it came, for what the index does not keep.
        self.body = body
        try:
            self._build(body)
        except ranges.TaskListError as error:
            raise WireError(str(error)) from error

    def _build(self, body: Mapping[str, Any]) -> None:
        members = {mid: _member(mid, v) for mid, v in _object(body.get("members"), "members").items()}
        active = _object(body.get("active"), "active")
        learner = _object(body.get("learner"), "learner")
        standby = _object(body.get("standby"), "standby")
        moving = body.get("moving") or []
        if not isinstance(moving, list) or not all(isinstance(m, dict) for m in moving):
            raise WireError("moving: a list of objects is required")
        # Every member a list names, listed in `members` or not, sorted by
        # id: indices then order learners and standbys by member id.
        named: Set[str] = set(members) | set(active) | set(learner) | set(standby)
        named.update(m[end] for m in moving for end in ("from", "to") if isinstance(m.get(end), str))
        self._members = [members.get(mid) or RouteMember(mid) for mid in sorted(named)]
        self.members: Dict[str, RouteMember] = {m.member_id: m for m in self._members}
        index = {m.member_id: i for i, m in enumerate(self._members)}
        self._topics = {name: _TopicIndex(count) for name, count in self.topics.items()}
        for mid, tasks in active.items():
            for topic, first, last in self._runs(tasks):
                topic.owners[first : last + 1] = array("l", [index[mid]]) * (last + 1 - first)
        for lists, attribute in ((learner, "learners"), (standby, "standbys")):
            for mid in sorted(lists):
                for topic, first, last in self._runs(lists[mid]):
                    by_partition: Dict[int, List[int]] = getattr(topic, attribute)
                    for partition in range(first, last + 1):
                        by_partition.setdefault(partition, []).append(index[mid])
        for move in moving:
            to = move.get("to")
            for topic, first, last in self._runs(move.get("tasks")):
                for partition in range(first, last + 1):
                    topic.moving_to[partition] = index[to] if isinstance(to, str) else _NOBODY

    def _runs(self, tasks: Any) -> Iterable[Tuple[_TopicIndex, int, int]]:
        """The runs of ``tasks`` that fall in known topics, clipped to them."""
        for name, first, last in ranges.read_runs(tasks):
            topic = self._topics.get(name)
            if topic is not None and first < len(topic.owners):
                yield topic, first, min(last, len(topic.owners) - 1)

    # --- reading it ---------------------------------------------------------

    @property
    def read_at_ms(self) -> int:
        """No sooner than when the host read the table (the send time plus
        the wait it reported): the promise counts from here."""
        return self.sent_at_ms + self.waited_ms

    @property
    def fresh_until_ms(self) -> int:
        """The end of the ownership bound, in the clock of ``sent_at_ms``:
        the send time, plus how long the request waited at the host, plus
        ``valid_ms``."""
        return self.read_at_ms + self.valid_ms

    def is_fresh(self, now_ms: int) -> bool:
        """Whether the table is within its ownership bound at ``now_ms``."""
        return now_ms < self.fresh_until_ms

    def resent(self, sent_at_ms: int, waited_ms: int = 0) -> "RouteTable":
        """The same table, confirmed by a request sent at ``sent_at_ms``
        that waited ``waited_ms`` (its index shared, not rebuilt)."""
        copy = object.__new__(RouteTable)
        copy.__dict__.update(self.__dict__)
        copy.sent_at_ms, copy.waited_ms = sent_at_ms, waited_ms
        return copy

    def route(self, topic: str, partition: int, now_ms: int) -> Route:
        """Who processes ``partition`` of ``topic``; raises
        :class:`UnknownTopic` or :class:`PartitionOutOfRange`."""
        index = self._topics.get(topic)
        if index is None:
            raise UnknownTopic(f"the routing table of group {self.group!r} has no topic {topic!r}")
        if not 0 <= partition < len(index.owners):
            raise PartitionOutOfRange(
                f"topic {topic!r} has {len(index.owners)} partitions: there is no partition {partition}"
            )
        owner = index.owners[partition]
        moving_to = index.moving_to.get(partition, _NOBODY)
        return Route(
            topic=topic,
            partition=partition,
            owner=None if owner == _NOBODY else self._members[owner],
            moving_to=None if moving_to == _NOBODY else self._members[moving_to],
            learners=tuple(self._members[i] for i in index.learners.get(partition, ())),
            standbys=tuple(self._members[i] for i in index.standbys.get(partition, ())),
            epoch=self.epoch,
            fresh=self.is_fresh(now_ms),
        )

    def route_for_key(self, topic: str, key: Key, now_ms: int) -> Route:
        """Who processes the partition ``key`` maps to (Kafka's partitioner)."""
        index = self._topics.get(topic)
        if index is None:
            raise UnknownTopic(f"the routing table of group {self.group!r} has no topic {topic!r}")
        if not index.owners:
            raise PartitionOutOfRange(f"topic {topic!r} has no partitions")
        return self.route(topic, partition_for_key(key, len(index.owners)), now_ms)

    def __repr__(self) -> str:
        return f"RouteTable(group={self.group!r}, epoch={self.epoch}, members={len(self._members)})"
