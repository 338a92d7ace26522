"""assignd: the Python member client.

A member joins a group over HTTP, heartbeats, and is told which tasks
(topic, partition) to process, with incremental cooperative rebalancing:
a task that moves is first *revoked*, and the host grants it to its next
owner only after this member acknowledged it stopped. Every decision is
the member machine's (:mod:`assignd.machine`, a port of the Rust client's,
checked by the shared conformance vectors); :class:`Member` drives it on a
background thread, :class:`AsyncMember` on an asyncio task.

Outside the group, a :class:`Router` keeps the group's routing table and
answers which member owns a key (:func:`partition_for_key`, Kafka's
default partitioner) and where it serves.
"""

from .aio import AsyncMember
from .config import REQUEST_TIMEOUT_DEFAULT, ConfigError, MemberConfig
from .core import HeartbeatObserver
from .events import (
    Assigned,
    Assignment,
    Drained,
    Draining,
    Error,
    Event,
    Fenced,
    Joined,
    LearnerStarted,
    LearnerStopped,
    Lost,
    Promoted,
    Replaced,
    Revoked,
    StandbyStarted,
    StandbyStopped,
)
from .failure import Failure
from .keys import murmur2, partition_for_key
from .listener import AsyncListener, Listener
from .machine import Machine, MachineConfig, StopReason
from .member import Member
from .router import ChangeObserver, Router, RouterConfig, RouterError, RouterNotReady, RoutesRefused
from .routes import PartitionOutOfRange, Route, RouteError, RouteMember, RouteTable, UnknownTopic
from .task import LagRow, Task

__version__ = "0.1.0"

__all__ = [
    "REQUEST_TIMEOUT_DEFAULT",
    "Assigned",
    "Assignment",
    "ChangeObserver",
    "AsyncListener",
    "AsyncMember",
    "ConfigError",
    "Drained",
    "Draining",
    "Error",
    "Event",
    "Failure",
    "Fenced",
    "HeartbeatObserver",
    "Joined",
    "LagRow",
    "LearnerStarted",
    "LearnerStopped",
    "Listener",
    "Lost",
    "Machine",
    "MachineConfig",
    "Member",
    "MemberConfig",
    "PartitionOutOfRange",
    "Promoted",
    "Replaced",
    "Revoked",
    "Route",
    "RouteError",
    "RouteMember",
    "RouteTable",
    "Router",
    "RouterConfig",
    "RouterError",
    "RouterNotReady",
    "RoutesRefused",
    "StandbyStarted",
    "StandbyStopped",
    "StopReason",
    "Task",
    "UnknownTopic",
    "murmur2",
    "partition_for_key",
]
