"""The transport against a scripted host: where a heartbeat goes, and how
each outcome is classified into the machine's failure kinds."""

import time

import pytest
from fake_host import CLOSE, FakeHost, answer, closed_port_url, error, reply

from assignd.config import MemberConfig
from assignd.failure import Failure
from assignd.transport import HeartbeatFailed, Transport, heartbeat_url
from assignd.wire import HeartbeatRequest

REQUEST = HeartbeatRequest(member_id="c-1", member_epoch=0, topics=["orders"], owned=[], lags=[])


@pytest.fixture
def hosts():
    started = []

    def start(*script):
        host = FakeHost(list(script))
        started.append(host)
        return host

    yield start
    for host in started:
        host.close()


def transport(*urls, timeout=2.0, token=None):
    return Transport(
        MemberConfig(
            urls=list(urls), group="g", topics=["orders"], member_token=token, request_timeout=timeout
        )
    )


def failure_of(t) -> Failure:
    with pytest.raises(HeartbeatFailed) as caught:
        t.heartbeat(REQUEST)
    return caught.value.failure


def test_a_heartbeat_posts_json_with_the_member_token(hosts):
    host = hosts(answer(active=[["orders", 0, 1]]))
    response = transport(host.url + "/", token="s3cret").heartbeat(REQUEST)
    assert response.member_id == "m" and len(response.active) == 2
    path, headers, body = host.requests[0]
    assert path == "/v1/groups/g/heartbeat"
    assert headers["Authorization"] == "Bearer s3cret"
    assert body["member_id"] == "c-1" and body["task_ranges"] is True


def test_the_group_name_is_one_path_segment():
    assert heartbeat_url("http://h:1/base/", "a b/c") == "http://h:1/base/v1/groups/a%20b%2Fc/heartbeat"


def test_a_redirect_is_followed_and_the_coordinator_remembered(hosts):
    coordinator = hosts(answer(member_id="c"))
    node = hosts(error(307, "not_coordinator", Location=coordinator.url + "/v1/groups/g/heartbeat"))
    t = transport(node.url)
    assert t.heartbeat(REQUEST).member_id == "c"
    assert t.heartbeat(REQUEST).member_id == "c"
    assert len(node.requests) == 1 and len(coordinator.requests) == 2


def test_a_relative_redirect_is_joined_to_the_url(hosts):
    host = hosts(reply(307, Location="/elsewhere"), answer(member_id="x"))
    assert transport(host.url).heartbeat(REQUEST).member_id == "x"
    assert host.requests[1][0] == "/elsewhere"


def test_a_refused_connection_moves_on_to_the_next_bootstrap_url(hosts):
    host = hosts(answer())
    assert transport(closed_port_url(), host.url).heartbeat(REQUEST).member_id == "m"


def test_refused_everywhere_is_unreached():
    assert failure_of(transport(closed_port_url(), closed_port_url())).kind == "unreached"


def test_redirects_to_a_dead_coordinator_are_unreached(hosts):
    node = hosts(error(307, "not_coordinator", Location=closed_port_url()))
    failure = failure_of(transport(node.url))
    assert failure.kind == "unreached"
    assert len(node.requests) == 6, "at most 5 redirects followed"


def test_a_shard_between_owners_is_waited_out(hosts):
    host = hosts(error(503, "shard_unavailable"), error(503, "shard_unavailable"), answer())
    started = time.monotonic()
    assert transport(host.url).heartbeat(REQUEST).member_id == "m"
    assert 0.07 <= time.monotonic() - started < 1.0, "25 ms, then 50 ms"


def test_a_shard_that_stays_unavailable_is_unreached(hosts):
    host = hosts(error(503, "shard_unavailable"))
    failure = failure_of(transport(host.url, timeout=0.3))
    assert failure.kind == "unreached"


def test_an_unreachable_coordinator_may_have_been_reached(hosts):
    host = hosts(error(503, "coordinator_unreachable"))
    failure = failure_of(transport(host.url, timeout=0.3))
    assert (failure.kind, failure.status) == ("server", 503)


def test_a_refusal_with_an_error_body_is_refused(hosts):
    host = hosts(error(409, "fenced", "removed"))
    failure = failure_of(transport(host.url))
    assert failure.to_json() == {"kind": "refused", "status": 409, "code": "fenced", "retry_after_ms": None}
    assert "removed" in str(failure)


def test_retry_after_is_read_in_seconds_and_capped(hosts):
    limited = hosts(error(429, "join_rate_limited", Retry_After="2"))
    assert failure_of(transport(limited.url)).retry_after_ms == 2000
    capped = hosts(error(503, "too_many_connections", Retry_After="600"))
    failure = failure_of(transport(capped.url))
    assert (failure.kind, failure.retry_after_ms) == ("server", 60_000)
    dated = hosts(error(429, "x", Retry_After="Wed, 21 Oct 2015 07:28:00 GMT"))
    assert failure_of(transport(dated.url)).retry_after_ms is None


def test_a_server_failure_without_a_body_is_server(hosts):
    host = hosts(reply(500, b"boom"))
    failure = failure_of(transport(host.url))
    assert (failure.kind, failure.status, failure.message) == ("server", 500, "boom")


def test_an_answer_that_cannot_be_read_is_unreadable(hosts):
    assert failure_of(transport(hosts(reply(200, b"{not json")).url)).kind == "unreadable"
    assert failure_of(transport(hosts(reply(404, b"nope")).url)).kind == "unreadable"


def test_a_timeout_is_no_answer_and_moves_to_the_next_bootstrap_url(hosts):
    slow = hosts(("sleep", 1.0, answer(member_id="slow")))
    fast = hosts(answer(member_id="fast"))
    t = transport(slow.url, fast.url, timeout=0.3)
    started = time.monotonic()
    assert failure_of(t).kind == "no_answer"
    assert time.monotonic() - started < 0.9
    assert t.heartbeat(REQUEST).member_id == "fast"


def test_a_connection_closed_after_sending_is_no_answer(hosts):
    host = hosts(CLOSE)
    assert failure_of(transport(host.url)).kind == "no_answer"


def test_a_closed_connection_then_a_good_node_answers(hosts):
    closing = hosts(CLOSE)
    good = hosts(answer(member_id="good"))
    assert transport(closing.url, good.url).heartbeat(REQUEST).member_id == "good"


def test_unreached_then_no_answer_is_no_answer(hosts):
    """One attempt that may have reached the coordinator makes the failure ambiguous."""
    closing = hosts(CLOSE)
    assert failure_of(transport(closed_port_url(), closing.url)).kind == "no_answer"


def test_the_connection_is_kept_alive(hosts):
    host = hosts(answer())
    t = transport(host.url)
    for _ in range(3):
        t.heartbeat(REQUEST)
    assert len(host.ports) == 3 and len(set(host.ports)) == 1


def test_a_node_killed_between_heartbeats_is_unreached_not_a_lost_answer(hosts):
    """The kept-alive connection to a dead node is not reused: the next
    heartbeat finds the port refused, which reached no coordinator."""
    node = hosts(answer())
    t = transport(node.url)
    t.heartbeat(REQUEST)
    node.kill()
    time.sleep(0.05)
    assert failure_of(t).kind == "unreached"
