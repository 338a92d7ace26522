"""What the member machine tells the application, in order.

Every event has a ``type`` (its name in the conformance vectors) and
``to_json()``. Task lists are sorted by topic, then partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, FrozenSet, Tuple, Union

from .failure import Failure
from .task import Task

Tasks = Tuple[Task, ...]


class _Event:
    type: ClassVar[str]

    def to_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"type": self.type}
        for name, value in vars(self).items():
            if name == "tasks":
                body[name] = [list(t) for t in value]
            elif isinstance(value, Failure):
                body[name] = value.to_json()
            else:
                body[name] = value
        return body


@dataclass(frozen=True)
class Joined(_Event):
    """The member joined (or rejoined) under this member id."""

    type: ClassVar[str] = "joined"
    member_id: str


@dataclass(frozen=True)
class Assigned(_Event):
    """Newly active tasks without a warm copy here: start processing them."""

    type: ClassVar[str] = "assigned"
    tasks: Tasks


@dataclass(frozen=True)
class Revoked(_Event):
    """Stop processing these, then acknowledge ``ack``. Until then the
    member keeps reporting them as owned and nobody else gets them."""

    type: ClassVar[str] = "revoked"
    ack: int
    tasks: Tasks


@dataclass(frozen=True)
class LearnerStarted(_Event):
    """Start warming these up (replay their state) and report their lag."""

    type: ClassVar[str] = "learner_started"
    tasks: Tasks


@dataclass(frozen=True)
class LearnerStopped(_Event):
    """Stop warming these up: they went elsewhere."""

    type: ClassVar[str] = "learner_stopped"
    tasks: Tasks


@dataclass(frozen=True)
class Promoted(_Event):
    """Learner or standby copies that became active: their warm state is
    the active one now (no ``learner_stopped`` comes for them)."""

    type: ClassVar[str] = "promoted"
    tasks: Tasks


@dataclass(frozen=True)
class StandbyStarted(_Event):
    type: ClassVar[str] = "standby_started"
    tasks: Tasks


@dataclass(frozen=True)
class StandbyStopped(_Event):
    type: ClassVar[str] = "standby_stopped"
    tasks: Tasks


@dataclass(frozen=True)
class Draining(_Event):
    """The member is draining: its tasks are revoked as new owners warm up."""

    type: ClassVar[str] = "draining"


@dataclass(frozen=True)
class Drained(_Event):
    """The drain finished: the member holds nothing, and leaves."""

    type: ClassVar[str] = "drained"


@dataclass(frozen=True)
class Lost(_Event):
    """These may be active elsewhere already: stop them at once (no ack).
    Also sent when the lease ran out without a newer answer, and as a leave
    is sent (the host hands a dynamic member's tasks on at once)."""

    type: ClassVar[str] = "lost"
    tasks: Tasks


@dataclass(frozen=True)
class Fenced(_Event):
    """The host removed this member; it rejoins unless it was leaving or
    draining. A ``lost`` event with every held task comes first."""

    type: ClassVar[str] = "fenced"
    rejoining: bool


@dataclass(frozen=True)
class Replaced(_Event):
    """Another process joined with this member's name: this one stops for
    good. A ``lost`` event with every held task comes first."""

    type: ClassVar[str] = "replaced"
    member_name: str


@dataclass(frozen=True)
class Error(_Event):
    """A failed heartbeat; the machine retries as its policy says."""

    type: ClassVar[str] = "error"
    failure: Failure


Event = Union[
    Joined,
    Assigned,
    Revoked,
    LearnerStarted,
    LearnerStopped,
    Promoted,
    StandbyStarted,
    StandbyStopped,
    Draining,
    Drained,
    Lost,
    Fenced,
    Replaced,
    Error,
]


@dataclass(frozen=True)
class Assignment:
    """A member's tasks as the application has been told them."""

    #: Tasks the application may process.
    active: FrozenSet[Task] = field(default_factory=frozenset)
    #: Tasks being released (revoked, not yet acknowledged): still owned.
    revoking: FrozenSet[Task] = field(default_factory=frozenset)
    #: Tasks to warm up and report lag on.
    learner: FrozenSet[Task] = field(default_factory=frozenset)
    #: Hot copies to keep.
    standby: FrozenSet[Task] = field(default_factory=frozenset)
    draining: bool = False

    def to_json(self) -> Dict[str, Any]:
        def tasks(s: FrozenSet[Task]) -> Any:
            return [list(t) for t in sorted(s)]

        return {
            "active": tasks(self.active),
            "revoking": tasks(self.revoking),
            "learner": tasks(self.learner),
            "standby": tasks(self.standby),
            "draining": self.draining,
        }
