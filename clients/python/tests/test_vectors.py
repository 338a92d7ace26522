"""Replays every conformance vector of clients/conformance/vectors on the
Python machine and compares every output the vector lists."""

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from assignd.failure import Failure
from assignd.machine import Machine, MachineConfig
from assignd.task import Task
from assignd.wire import HeartbeatResponse, lag_rows

VECTORS = Path(__file__).resolve().parents[2] / "conformance" / "vectors"


def vector_files() -> List[Path]:
    return sorted(VECTORS.glob("*.json"))


def without_nulls(value: Any) -> Any:
    """Request bodies and failures compare as JSON with null members dropped."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def apply(machine: Machine, at: int, step_input: Dict[str, Any]) -> Dict[str, Any]:
    """Feeds one input; returns the outputs only that input gives."""
    kind = step_input["type"]
    if kind == "poll_request":
        request = machine.poll_request(at)
        return {"request": None if request is None else request.to_json()}
    if kind == "answer":
        machine.on_answer(HeartbeatResponse.from_json(step_input["body"]), at)
    elif kind == "failure":
        machine.on_failure(Failure.from_json(step_input["failure"]), at)
    elif kind == "ack":
        machine.ack(step_input["ack"], at)
    elif kind == "report_lags":
        machine.report_lags(lag_rows(step_input["lags"]))
    elif kind == "drain":
        machine.drain(at)
    elif kind == "leave":
        machine.leave(at)
    elif kind == "tick":
        machine.tick(at)
    elif kind == "set_endpoint":
        machine.set_endpoint(step_input["endpoint"], step_input["metadata"])
    elif kind == "set_loads":
        for topic, partition, load in step_input["loads"]:
            assert machine.set_load(Task(topic, partition), load)
    elif kind == "set_utilisation":
        assert machine.set_utilisation(step_input["utilisation"])
    elif kind == "set_load_capacity":
        assert machine.set_load_capacity(step_input["load_capacity"])
    elif kind == "check":
        return {"may_process": [machine.may_process(Task(*t), at) for t in step_input["may_process"]]}
    else:
        raise AssertionError(f"unknown input {kind!r}")
    return {}


def outputs(machine: Machine, given: Dict[str, Any]) -> Dict[str, Any]:
    events = []
    while (event := machine.poll_event()) is not None:
        events.append(event.to_json())
    return {
        **given,
        "events": events,
        "timeout": machine.poll_timeout(),
        "lease_until": machine.lease_until(),
        "member_id": machine.member_id,
        "member_epoch": machine.member_epoch,
        "assignment": machine.assignment().to_json(),
        "stopped": machine.stopped,
    }


def normalized(key: str, value: Any) -> Any:
    if key in ("request", "events"):
        return without_nulls(value)
    return value


def test_the_vectors_are_there():
    assert vector_files(), f"no conformance vectors in {VECTORS}"
    index = VECTORS / "INDEX"
    if index.exists():
        for name in index.read_text().split():
            assert (VECTORS / name).exists() or (VECTORS / f"{name}.json").exists(), name


@pytest.mark.parametrize("path", vector_files(), ids=lambda p: p.stem)
def test_vector(path: Path):
    vector = json.loads(path.read_text())
    config = vector["config"]
    machine = Machine(
        MachineConfig(
            topics=config["topics"],
            id_prefix=config["id_prefix"],
            member_name=config.get("member_name"),
            rack=config.get("rack"),
            capacity=config.get("capacity", 1),
            endpoint=config.get("endpoint"),
            metadata=config.get("metadata", {}),
            load_threshold=config.get("load_threshold", 0.1),
        ),
        vector.get("start", 0),
    )
    for number, step in enumerate(vector["steps"]):
        got = outputs(machine, apply(machine, step["at"], step["input"]))
        for key, expected in step["expect"].items():
            assert key in got, f"step {number}: unknown output {key!r}"
            assert normalized(key, got[key]) == normalized(key, expected), (
                f"{path.name} step {number} at {step['at']} ({step['input']['type']}): {key}"
            )
