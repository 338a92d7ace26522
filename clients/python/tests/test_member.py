"""The blocking and asyncio shells against a scripted host: events reach
the listener in order, a revocation is acknowledged once the hook returns,
the lease gates may_process, and leave ends the loop."""

import asyncio
import threading
import time

import pytest
from fake_host import FakeHost, answer, error

from assignd import AsyncListener, AsyncMember, ConfigError, Listener, Member, MemberConfig, Revoked, Task

O0, O1 = Task("orders", 0), Task("orders", 1)


def script():
    fast = {"heartbeat_interval_ms": 20, "lease_ms": 5000}
    return [
        answer(epoch=1, active=[["orders", 0, 1]], **fast),
        answer(epoch=1, active=[["orders", 0]], revoking=[["orders", 1]], **fast),
        answer(epoch=2, active=[["orders", 0]], **fast),
    ]


@pytest.fixture
def host():
    host = FakeHost(script())
    yield host
    host.close()


def config(url, **kw):
    return MemberConfig(urls=url, group="g", topics=["orders"], request_timeout=1.0, **kw)


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Recorder(Listener):
    def __init__(self):
        self.calls = []
        self.lags_asked = 0

    def on_joined(self, member_id):
        self.calls.append(("joined", member_id))

    def on_assigned(self, tasks, promoted):
        self.calls.append(("assigned", tasks, promoted))

    def on_revoked(self, tasks):
        self.calls.append(("revoked", tasks))

    def on_stopped(self, reason):
        self.calls.append(("stopped", reason))


def owned_in(request):
    return request[2]["owned"]


def test_the_blocking_member_acks_after_the_hook_and_leaves(host):
    recorder = Recorder()
    lags = []

    def lag_source(assignment):
        lags.append(assignment)
        return [(Task("orders", 7), 3)]

    member = Member(config(host.url), recorder, lag_source, id_prefix="c-t").start()
    wait_for(lambda: len(host.requests) >= 4)
    assert recorder.calls[:3] == [("joined", "m"), ("assigned", (O0, O1), False), ("revoked", (O1,))]
    assert member.may_process(O0) and not member.may_process(O1)
    assert member.member_epoch == 2 and member.member_id == "m"
    # The join sends the chosen id; after the ack, 1 is no longer owned.
    assert host.requests[0][2]["member_id"] == "c-t-1"
    assert owned_in(host.requests[2]) == [["orders", 0]]
    assert host.requests[1][2]["lags"] == [["orders", 7, 3]]
    assert member.leave(timeout=5) == "left"
    assert host.requests[-1][2]["member_epoch"] == -1
    assert recorder.calls[-1] == ("stopped", "left")
    assert not member.running


def test_the_lease_gates_may_process_while_the_host_is_silent():
    granted = answer(active=[["orders", 0]], heartbeat_interval_ms=5000, lease_ms=300)
    # After the first answer the host stalls past the request timeout.
    host = FakeHost([granted, ("sleep", 3.0, granted)])
    try:
        member = Member(config(host.url)).start()
        wait_for(lambda: member.may_process(O0))
        wait_for(lambda: not member.may_process(O0), timeout=1.0)
        wait_for(lambda: not member.assignment.active, timeout=1.0)
        member.close()
    finally:
        host.close()


def test_a_member_that_never_joined_leaves_at_once():
    from fake_host import closed_port_url

    member = Member(config(closed_port_url())).start()
    assert member.leave(timeout=5) == "left"


class AsyncRecorder(AsyncListener):
    def __init__(self):
        self.calls = []

    async def on_assigned(self, tasks, promoted):
        self.calls.append(("assigned", tasks))

    async def on_revoked(self, tasks):
        await asyncio.sleep(0.05)
        self.calls.append(("revoked", tasks))


def test_the_async_member_awaits_its_listener(host):
    async def scenario():
        recorder = AsyncRecorder()
        async with AsyncMember(config(host.url), recorder) as member:
            while len(host.requests) < 4:
                await asyncio.sleep(0.01)
            assert member.may_process(O0) and not member.may_process(O1)
        assert member.stopped == "left"
        return recorder.calls

    calls = asyncio.run(scenario())
    assert calls == [("assigned", (O0, O1)), ("revoked", (O1,))]
    assert owned_in(host.requests[2]) == [["orders", 0]]


def test_the_async_member_iterates_events_and_the_application_acks(host):
    async def scenario():
        seen = []
        member = await AsyncMember(config(host.url)).start()
        async for event in member.events():
            seen.append(event.type)
            if isinstance(event, Revoked):
                member.ack(event)
                break
        while len(host.requests) < 4:
            await asyncio.sleep(0.01)
        assert await member.leave() == "left"
        return seen

    assert asyncio.run(scenario()) == ["joined", "assigned", "revoked"]
    assert owned_in(host.requests[-2]) == [["orders", 0]]


def test_may_process_is_safe_from_other_threads(host):
    member = Member(config(host.url)).start()
    results = []

    def poll():
        for _ in range(200):
            results.append(member.may_process(O0))

    threads = [threading.Thread(target=poll) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    member.leave(timeout=5)
    assert len(results) == 800


def observed_script():
    fast = {"heartbeat_interval_ms": 20, "lease_ms": 5000, "active": [["orders", 0]]}
    return [answer(**fast), error(500, "internal"), answer(**fast)]


def check_observed(seen, host):
    # Every request, the leave included, seen once, in order.
    assert len(seen) == len(host.requests) >= 4
    assert all(latency > 0 for latency, _ in seen)
    failures = [failure for _, failure in seen]
    assert failures[0] is None and failures[2] is None
    assert failures[1].kind == "server" and failures[1].status == 500


def test_on_heartbeat_sees_every_round_trip_of_the_blocking_member():
    host = FakeHost(observed_script())
    seen = []
    try:
        member = Member(config(host.url), on_heartbeat=lambda *a: seen.append(a)).start()
        wait_for(lambda: len(host.requests) >= 3)
        assert member.leave(timeout=5) == "left"
        check_observed(seen, host)
    finally:
        host.close()


def test_on_heartbeat_sees_every_round_trip_of_the_async_member():
    host = FakeHost(observed_script())
    seen = []

    def observe(latency, failure):
        asyncio.get_running_loop()  # on the member's loop
        seen.append((latency, failure))

    async def scenario():
        async with AsyncMember(config(host.url), on_heartbeat=observe):
            while len(host.requests) < 3:
                await asyncio.sleep(0.01)

    try:
        asyncio.run(scenario())
        check_observed(seen, host)
    finally:
        host.close()


def test_a_failing_observer_does_not_stop_the_member():
    host = FakeHost(observed_script())

    def observe(latency, failure):
        raise RuntimeError("broken observer")

    try:
        member = Member(config(host.url), on_heartbeat=observe).start()
        wait_for(lambda: len(host.requests) >= 3)
        assert member.leave(timeout=5) == "left"
    finally:
        host.close()


def test_the_member_publishes_its_endpoint_on_join_and_after_a_change(host):
    member = Member(config(host.url, endpoint="http://10.0.0.5:8080", metadata={"zone": "a"})).start()
    try:
        wait_for(lambda: len(host.requests) >= 2)
        join, heartbeat = host.requests[0][2], host.requests[1][2]
        assert (join["endpoint"], join["metadata"]) == ("http://10.0.0.5:8080", {"zone": "a"})
        assert "endpoint" not in heartbeat and "metadata" not in heartbeat
        member.set_endpoint(None)
        wait_for(lambda: any(r[2].get("endpoint") == "" for r in host.requests))
        changed = next(r[2] for r in host.requests if r[2].get("endpoint") == "")
        assert changed["metadata"] == {}
    finally:
        member.leave(timeout=5)
    assert all("endpoint" not in r[2] for r in host.requests if r[2]["member_epoch"] == -1)


@pytest.mark.parametrize(
    "endpoint, metadata",
    [
        ("", {}),
        ("has space", {}),
        ("x" * 257, {}),
        (None, {"": "v"}),
        (None, {str(i): "" for i in range(17)}),
    ],
)
def test_an_endpoint_past_the_hosts_limits_is_refused_before_it_is_sent(endpoint, metadata):
    with pytest.raises(ConfigError):
        config("http://127.0.0.1:1", endpoint=endpoint, metadata=metadata).check()
    member = Member(config("http://127.0.0.1:1"))
    with pytest.raises(ConfigError):
        member.set_endpoint(endpoint, metadata)


def test_report_load_goes_once_the_host_asks_and_refuses_bad_values():
    fast = {"heartbeat_interval_ms": 20, "lease_ms": 5000, "active": [["orders", 0, 2]]}
    host = FakeHost([answer(epoch=1, **fast), answer(epoch=1, load_report="full", **fast)])
    try:
        member = Member(config(host.url, load_capacity=300.0), Listener(), id_prefix="c-t").start()
        wait_for(lambda: member.assignment.active)
        with pytest.raises(ConfigError):
            member.report_load({Task("orders", 0): float("nan")})
        with pytest.raises(ConfigError):
            member.report_load(utilisation=11)
        member.report_load({("orders", 0): 7.0, Task("orders", 1): 7, Task("orders", 2): 2.5}, utilisation=0.25)
        wait_for(lambda: any(len(r[2].get("loads", [])) == 2 for r in host.requests))
        body = next(r[2] for r in host.requests if len(r[2].get("loads", [])) == 2)
        assert body["loads"] == [["orders", 0, 1, 7.0], ["orders", 2, 2.5]]
        assert body["utilisation"] == 0.25 and body["load_capacity"] == 300.0
        member.leave(5)
    finally:
        host.close()


def test_a_load_config_the_host_would_refuse_is_refused():
    with pytest.raises(ConfigError):
        config("http://127.0.0.1:1", load_capacity=0.0).check()
    with pytest.raises(ConfigError):
        config("http://127.0.0.1:1", load_threshold=-1).check()
