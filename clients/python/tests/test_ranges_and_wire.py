"""Task lists both ways, and the heartbeat bodies."""

import json

import pytest

from assignd import ranges
from assignd.task import LagRow, Task
from assignd.wire import ErrorBody, HeartbeatRequest, HeartbeatResponse, WireError


def t(p, topic="orders"):
    return Task(topic, p)


def test_runs_are_written_as_ranges_and_lone_tasks_as_pairs():
    tasks = [t(0), t(1), t(2), t(4), t(1, "payments"), t(2, "payments")]
    assert ranges.write(tasks) == [("orders", 0, 2), ("orders", 4), ("payments", 1, 2)]
    assert ranges.write(tasks, ranges=False)[:2] == [("orders", 0), ("orders", 1)]
    assert ranges.write([]) == []


def test_a_run_is_found_in_the_order_given():
    assert ranges.write([t(1), t(0)]) == [("orders", 1), ("orders", 0)]


def test_a_million_tasks_fit_in_a_few_hundred_bytes():
    tasks = [Task(f"topic-{i}", p) for i in range(10) for p in range(100_000)]
    body = HeartbeatRequest(member_id="m", member_epoch=3, owned=tasks, lags=[]).to_json()
    assert len(json.dumps(body)) < 1000


def test_either_form_reads_the_same():
    ranged = ranges.read([["orders", 0, 2], ["orders", 7]])
    pairs = ranges.read([["orders", 0], ["orders", 1], ["orders", 2], ["orders", 7]])
    assert ranged == pairs == [t(0), t(1), t(2), t(7)]
    assert ranges.read(None) == []
    assert ranges.read_optional(None) is None


@pytest.mark.parametrize(
    "bad",
    [
        [["orders", 3, 1]],
        [["orders"]],
        [["orders", 1, 2, 3]],
        [[1, 2]],
        [["orders", -1]],
        [["orders", True]],
        [["orders", 2**32]],
        "orders",
        [["orders", 0, 1_000_000]],
    ],
)
def test_what_is_not_a_task_list_is_refused(bad):
    with pytest.raises(ranges.TaskListError):
        ranges.read(bad)


def test_a_request_writes_the_protocols_fields():
    request = HeartbeatRequest(member_id="m", member_epoch=3, capacity=1, owned=[], lags=[])
    assert request.to_json() == {
        "member_id": "m",
        "member_epoch": 3,
        "rack": None,
        "capacity": 1,
        "owned": [],
        "lags": [],
        "drain": False,
        "task_ranges": True,
    }
    join = HeartbeatRequest(
        member_id="c-1",
        member_epoch=0,
        member_name="a",
        topics=["orders"],
        owned=[t(0), t(1)],
        lags=[LagRow("orders", 5, 12)],
    ).to_json()
    assert join["member_name"] == "a" and join["topics"] == ["orders"]
    assert join["owned"] == [["orders", 0, 1]]
    assert join["lags"] == [["orders", 5, 12]]


def test_an_answer_reads_with_and_without_its_optional_fields():
    full = HeartbeatResponse.from_json(
        {
            "member_id": "m",
            "member_epoch": 4,
            "heartbeat_interval_ms": 3000,
            "active": [["orders", 0, 2]],
            "revoking": [],
            "learner": None,
            "standby": [["orders", 9]],
            "draining": False,
            "drained": False,
            "lease_ms": 6000,
            "unreached_lease_ms": 11000,
            "unreached_flight_ms": 6000,
            "something_new": 1,
        }
    )
    assert full.active == {t(0), t(1), t(2)} and full.standby == {t(9)}
    assert (full.lease_ms, full.unreached_lease_ms, full.unreached_flight_ms) == (6000, 11000, 6000)
    older = HeartbeatResponse.from_json({"member_id": "m", "member_epoch": 1, "heartbeat_interval_ms": 3000})
    assert older.lease_ms is None and older.active == frozenset() and not older.draining


@pytest.mark.parametrize(
    "body",
    [
        {"member_epoch": 1, "heartbeat_interval_ms": 1},
        {"member_id": "m", "member_epoch": 2**63, "heartbeat_interval_ms": 1},
        {"member_id": "m", "member_epoch": 1},
        {"member_id": "m", "member_epoch": 1, "heartbeat_interval_ms": 1, "draining": "yes"},
        {"member_id": "m", "member_epoch": 1, "heartbeat_interval_ms": 1, "active": [["x", 2, 1]]},
        [],
    ],
)
def test_an_unreadable_answer_is_refused(body):
    with pytest.raises(WireError):
        HeartbeatResponse.from_json(body)


def test_the_error_body_reads_and_writes():
    body = {"error": {"code": "fenced", "message": "gone"}}
    assert ErrorBody.from_json(body) == ErrorBody("fenced", "gone")
    assert ErrorBody.from_json(body).to_json() == body
    assert ErrorBody.from_json({"error": "x"}) is None
    assert ErrorBody.from_json({"error": {"code": 1, "message": "m"}}) is None
    with_location = {"error": {"code": "not_coordinator", "message": "m", "location": "http://n2"}}
    assert ErrorBody.from_json(with_location).location == "http://n2"
