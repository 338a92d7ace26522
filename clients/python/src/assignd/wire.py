"""The heartbeat's JSON bodies: the request a member sends, the answer it
reads, and the error body of every failed answer. The field names are the
member protocol; what they mean to a member is the machine's business."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

from . import ranges
from .loads import LoadReport, read_load_report
from .task import LagRow, Task

#: The member epoch a join sends.
JOIN_EPOCH = 0
#: The member epoch a leave sends.
LEAVE_EPOCH = -1

_EPOCH_MAX = 2**63 - 1
_U64_MAX = 2**64 - 1


class WireError(ValueError):
    """A body that does not read as the protocol says."""


@dataclass(frozen=True)
class HeartbeatRequest:
    """``POST /v1/groups/{group}/heartbeat``: epoch 0 joins (with the id
    the member chose), -1 leaves, anything else heartbeats."""

    member_id: str
    member_epoch: int
    member_name: Optional[str] = None
    #: Sent on a join only.
    topics: Optional[Sequence[str]] = None
    rack: Optional[str] = None
    capacity: Optional[int] = None
    owned: Optional[Sequence[Task]] = None
    lags: Optional[Sequence[LagRow]] = None
    drain: bool = False
    task_ranges: bool = True
    #: Where the member serves: on a join and after a change (``""``
    #: removes it); ``None`` leaves it as the host has it.
    endpoint: Optional[str] = None
    #: The pairs shown with the endpoint, replacing the host's; ``None``
    #: leaves them as they are.
    metadata: Optional[Mapping[str, str]] = None
    #: Load items ``[topic, partition, load]`` / ``[topic, first, last,
    #: load]``; sent only after an answer asked for loads.
    loads: Optional[Sequence[Sequence[Any]]] = None
    utilisation: Optional[float] = None
    load_capacity: Optional[float] = None

    def to_json(self) -> Dict[str, Any]:
        """The body as a JSON value; ``owned`` written as ranges."""
        body: Dict[str, Any] = {"member_id": self.member_id}
        if self.member_name is not None:
            body["member_name"] = self.member_name
        body["member_epoch"] = self.member_epoch
        if self.topics is not None:
            body["topics"] = list(self.topics)
        body["rack"] = self.rack
        body["capacity"] = self.capacity
        body["owned"] = None if self.owned is None else [list(i) for i in ranges.write(self.owned)]
        body["lags"] = None if self.lags is None else [list(row) for row in self.lags]
        body["drain"] = self.drain
        body["task_ranges"] = self.task_ranges
        if self.endpoint is not None:
            body["endpoint"] = self.endpoint
        if self.metadata is not None:
            body["metadata"] = dict(self.metadata)
        if self.loads is not None:
            body["loads"] = [list(item) for item in self.loads]
        if self.utilisation is not None:
            body["utilisation"] = self.utilisation
        if self.load_capacity is not None:
            body["load_capacity"] = self.load_capacity
        return body


@dataclass(frozen=True)
class HeartbeatResponse:
    """The 200 answer to a heartbeat, its task lists as sets."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    active: FrozenSet[Task] = field(default_factory=frozenset)
    revoking: FrozenSet[Task] = field(default_factory=frozenset)
    learner: FrozenSet[Task] = field(default_factory=frozenset)
    standby: FrozenSet[Task] = field(default_factory=frozenset)
    draining: bool = False
    drained: bool = False
    #: How long after the heartbeat was *sent* the member may process its
    #: tasks without a newer answer; ``None`` from a host before leases.
    lease_ms: Optional[int] = None
    #: The longer lease while no later heartbeat reaches a coordinator.
    unreached_lease_ms: Optional[int] = None
    #: While a heartbeat is in flight, the unreached lease counts only
    #: until its send time plus this.
    unreached_flight_ms: Optional[int] = None
    #: What the next heartbeat reports of the member's loads: "none" (also
    #: when absent or unknown), "full" or "changes".
    load_report: LoadReport = "none"

    @staticmethod
    def from_json(value: Any) -> "HeartbeatResponse":
        """Reads an answer leniently: a list, a flag or a lease the host
        leaves out reads as empty, false or unknown; unknown fields are
        ignored."""
        if not isinstance(value, dict):
            raise WireError("a heartbeat answer must be a JSON object")
        member_id = value.get("member_id")
        if not isinstance(member_id, str):
            raise WireError("member_id: a string is required")
        try:
            return HeartbeatResponse(
                member_id=member_id,
                # The next request sends the epoch back as a signed 64-bit.
                member_epoch=_unsigned(value.get("member_epoch"), "member_epoch", _EPOCH_MAX),
                heartbeat_interval_ms=_unsigned(value.get("heartbeat_interval_ms"), "heartbeat_interval_ms"),
                active=frozenset(ranges.read(value.get("active"))),
                revoking=frozenset(ranges.read(value.get("revoking"))),
                learner=frozenset(ranges.read(value.get("learner"))),
                standby=frozenset(ranges.read(value.get("standby"))),
                draining=_flag(value, "draining"),
                drained=_flag(value, "drained"),
                lease_ms=_optional_unsigned(value, "lease_ms"),
                unreached_lease_ms=_optional_unsigned(value, "unreached_lease_ms"),
                unreached_flight_ms=_optional_unsigned(value, "unreached_flight_ms"),
                load_report=read_load_report(value.get("load_report")),
            )
        except ranges.TaskListError as error:
            raise WireError(str(error)) from error


def _unsigned(value: Any, name: str, maximum: int = _U64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise WireError(f"{name}: an integer from 0 to {maximum} is required, not {value!r}")
    return value


def _optional_unsigned(body: Dict[str, Any], name: str) -> Optional[int]:
    value = body.get(name)
    return None if value is None else _unsigned(value, name)


def _flag(body: Dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise WireError(f"{name}: a boolean is required, not {value!r}")
    return value


@dataclass(frozen=True)
class ErrorBody:
    """``{"error": {"code", "message", "location"?}}``: every failed answer's body."""

    code: str
    message: str
    location: Optional[str] = None

    @staticmethod
    def from_json(value: Any) -> Optional["ErrorBody"]:
        """The error body in ``value``, or ``None`` if it is not one."""
        detail = value.get("error") if isinstance(value, dict) else None
        if not isinstance(detail, dict):
            return None
        code, message = detail.get("code"), detail.get("message")
        location = detail.get("location")
        if not isinstance(code, str) or not isinstance(message, str):
            return None
        return ErrorBody(code, message, location if isinstance(location, str) else None)

    def to_json(self) -> Dict[str, Any]:
        detail: Dict[str, Any] = {"code": self.code, "message": self.message}
        if self.location is not None:
            detail["location"] = self.location
        return {"error": detail}


def lag_rows(rows: Sequence[Sequence[Any]]) -> List[LagRow]:
    """``[topic, partition, lag]`` rows as :class:`LagRow`."""
    return [LagRow(str(r[0]), int(r[1]), int(r[2])) for r in rows]
