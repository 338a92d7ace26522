"""Keys to partitions and the routing table against the shared vectors
(clients/conformance/routes), then the router's loop against a fake host:
the blocking query, a change, Retry-After, failover, redirects, refusals
and misroutes."""

import json
import queue
import threading
import time
from pathlib import Path

import pytest
from fake_host import closed_port_url
from fake_routes_host import FakeRoutesHost, scripted, table

from assignd import (
    ConfigError,
    PartitionOutOfRange,
    RouteError,
    Router,
    RouterConfig,
    RouterNotReady,
    RoutesRefused,
    RouteTable,
    UnknownTopic,
    murmur2,
    partition_for_key,
)
from assignd.wire import WireError

ROUTES = Path(__file__).resolve().parents[2] / "conformance" / "routes"
TOKEN = "reader-token-1"


def vectors(name):
    return json.loads((ROUTES / name).read_text())


# --- the vectors -----------------------------------------------------------


def test_murmur2_and_partitions_match_kafkas():
    cases = vectors("murmur2.json")["cases"]
    assert len(cases) > 10
    for case in cases:
        key = bytes.fromhex(case["key_hex"])
        assert murmur2(key) == case["murmur2"], case
        if case["key"] is not None:
            assert murmur2(case["key"]) == case["murmur2"]
        for partitions, partition in case["partitions"].items():
            assert partition_for_key(key, int(partitions)) == partition, case


def ids(members):
    return [m.member_id for m in members]


def test_the_table_answers_every_lookup_of_the_vector():
    vector = vectors("table.json")
    routes = RouteTable(vector["table"], sent_at_ms=0)
    assert routes.epoch == vector["table"]["epoch"]
    for lookup in vector["lookups"]:
        if "key" in lookup:
            route = routes.route_for_key(lookup["topic"], lookup["key"], now_ms=0)
        else:
            route = routes.route(lookup["topic"], lookup["partition"], now_ms=0)
        got = {
            "partition": route.partition,
            "owner": route.owner and route.owner.member_id,
            "moving_to": route.moving_to and route.moving_to.member_id,
            "learners": ids(route.learners),
            "standbys": ids(route.standbys),
        }
        assert got == {k: lookup[k] for k in got}, lookup
        assert route.epoch == routes.epoch and route.topic == lookup["topic"]


def test_an_owner_carries_its_name_endpoint_and_metadata():
    routes = RouteTable(vectors("table.json")["table"], sent_at_ms=0)
    owner = routes.route("orders", 0, now_ms=0).owner
    assert (owner.member_id, owner.member_name, owner.endpoint) == ("m-1", "worker-a", "http://10.0.0.5:8080")
    assert owner.metadata == {"zone": "a"}


def test_freshness_counts_from_the_send_time():
    vector = vectors("table.json")
    for case in vector["freshness"]:
        routes = RouteTable(vector["table"], sent_at_ms=case["sent_at_ms"])
        assert routes.is_fresh(case["now_ms"]) == case["fresh"], case
        assert routes.route("orders", 0, case["now_ms"]).fresh == case["fresh"]


def test_the_bound_counts_from_the_send_time_plus_the_hosts_wait():
    routes = RouteTable(table(1, valid_ms=2000), sent_at_ms=10_000, waited_ms=1500)
    assert routes.fresh_until_ms - routes.sent_at_ms == 3500
    assert routes.is_fresh(13_499) and not routes.is_fresh(13_500)
    assert routes.route("orders", 0, 13_499).fresh
    # A later confirmation keeps its own send time and wait.
    again = routes.resent(10_100, 0)
    assert again.fresh_until_ms == 12_100 and again.waited_ms == 0


def test_an_unknown_topic_and_a_partition_out_of_range_are_refused():
    vector = vectors("table.json")
    routes = RouteTable(vector["table"], sent_at_ms=0)
    with pytest.raises(UnknownTopic):
        routes.route_for_key(vector["unknown_topic"], "k", now_ms=0)
    with pytest.raises(UnknownTopic):
        routes.route(vector["unknown_topic"], 0, now_ms=0)
    topic, partition = vector["partition_out_of_range"]
    with pytest.raises(PartitionOutOfRange):
        routes.route(topic, partition, now_ms=0)
    assert issubclass(PartitionOutOfRange, RouteError) and issubclass(UnknownTopic, RouteError)


def test_a_body_that_is_not_a_table_is_refused():
    with pytest.raises(WireError):
        RouteTable({"group": "g", "epoch": -1}, sent_at_ms=0)
    with pytest.raises(WireError):
        RouteTable({**table(1), "active": {"m-1": [["orders", 3, 1]]}}, sent_at_ms=0)


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# --- the loop ----------------------------------------------------------------


@pytest.fixture
def hosts():
    started = []

    def start(first=None):
        host = FakeRoutesHost(first or table(1))
        started.append(host)
        return host

    yield start
    for host in started:
        host.close()


@pytest.fixture
def routers():
    started = []

    def start(*urls, on_change=None, wait_ms=5000, token=TOKEN):
        router = Router(RouterConfig(list(urls), "g", token=token, wait_ms=wait_ms), on_change=on_change)
        started.append(router.start())
        return router

    yield start
    for router in started:
        router.close()


def test_ready_then_a_blocking_query_tells_of_a_change(hosts, routers):
    host = hosts()
    changes = queue.Queue()
    router = routers(host.url, on_change=changes.put)
    assert router.ready(5).epoch == 1
    assert router.owner_of("orders", "k").owner.endpoint == "http://a:1"
    assert changes.get(timeout=5).epoch == 1
    first, second = host.wait_for_queries(2)
    assert first.after_epoch is None and first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert (second.after_epoch, second.wait_ms) == (1, 5000)
    host.publish(table(2, owner="m-2", endpoint="http://b:2"))
    assert changes.get(timeout=5).epoch == 2
    assert router.epoch == 2 and router.owner_of_partition("orders", 3).owner.member_id == "m-2"
    assert host.wait_for_queries(3)[2].after_epoch == 2


def test_an_unchanged_answer_renews_the_table_without_a_change(hosts, routers):
    host = hosts(table(1, valid_ms=60_000))
    changes = []
    router = routers(host.url, on_change=changes.append, wait_ms=50)
    router.ready(5)
    host.wait_for_queries(4)
    assert [t.epoch for t in changes] == [1]
    assert router.fresh and router.age < 60


def test_a_503_is_waited_out_as_retry_after_says(hosts, routers):
    host = hosts()
    busy = {"error": {"code": "too_many_watchers", "message": "busy"}}
    host.script.append(scripted(503, busy, Retry_After="1"))
    router = routers(host.url)
    assert router.ready(10).epoch == 1
    first, second = host.wait_for_queries(2)[:2]
    assert second.at - first.at >= 0.9


def test_a_node_that_does_not_answer_is_passed_over(hosts, routers):
    host = hosts()
    router = routers(closed_port_url(), host.url)
    assert router.ready(10).epoch == 1


def test_a_redirect_is_followed_with_the_token(hosts, routers):
    coordinator = hosts()
    node = hosts()
    node.script.append(scripted(307, {}, Location=coordinator.url + "/v1/groups/g/routes"))
    router = routers(node.url)
    assert router.ready(5).epoch == 1
    assert coordinator.wait_for_queries(1)[0].headers["Authorization"] == f"Bearer {TOKEN}"


def test_a_refusal_fails_ready_with_the_hosts_error(hosts, routers):
    host = hosts()
    host.script.append(scripted(403, {"error": {"code": "forbidden", "message": "not a reader token"}}))
    router = routers(host.url)
    with pytest.raises(RoutesRefused) as refused:
        router.ready(5)
    assert (refused.value.status, refused.value.code) == (403, "forbidden")
    assert "not a reader token" in str(refused.value)


def test_a_config_that_cannot_work_is_refused_at_once():
    for config in (
        RouterConfig("", "g"),
        RouterConfig("ftp://h", "g"),
        RouterConfig("http://h", ""),
        RouterConfig("http://h", "g", wait_ms=20_001),
        RouterConfig("http://h", "g", token="a b"),
    ):
        with pytest.raises(ConfigError):
            Router(config)


def test_ready_times_out_with_the_last_failure():
    router = Router(RouterConfig(closed_port_url(), "g")).start()
    try:
        with pytest.raises(RouterNotReady, match="Connection"):
            router.ready(0.3)
        with pytest.raises(RouteError):
            router.owner_of("orders", "k")
    finally:
        router.close()


def test_a_lower_epoch_replaces_the_table_only_when_asked_after_a_higher(hosts, routers):
    host = hosts(table(5))
    changes = queue.Queue()
    router = routers(host.url, on_change=changes.put)
    router.ready(5)
    host.wait_for_queries(2)
    host.publish(table(3))  # a new coordinator whose table the router never saw
    assert changes.get(timeout=5).epoch == 5
    assert changes.get(timeout=5).epoch == 3
    assert router.epoch == 3


def test_a_misroute_is_counted_and_asks_for_a_newer_table_at_once(hosts, routers):
    host = hosts()
    router = routers(host.url)
    router.ready(5)
    route = router.owner_of("orders", "k")
    host.wait_for_queries(2)
    router.misrouted(route)
    queries = host.wait_for_queries(3)
    assert queries[2].after_epoch is None and router.misroutes == 1
    host.publish(table(2))
    host.wait_for_queries(4)
    wait_until(lambda: router.epoch == 2)
    router.misrouted(route)  # from an older table: counted, nothing asked
    assert router.misroutes == 2


def test_close_ends_a_blocking_query_at_once(hosts):
    host = hosts()
    router = Router(RouterConfig(host.url, "g", wait_ms=20_000)).start()
    router.ready(5)
    host.wait_for_queries(2)
    closer = threading.Thread(target=router.close)
    closer.start()
    closer.join(5)
    assert not closer.is_alive()


def test_an_answer_counts_its_bound_from_the_send_plus_the_wait_the_host_reports(hosts, routers):
    host = hosts(table(1, valid_ms=2000))
    host.waited_ms = 1500  # answered at once, but read 1.5 s after it came, says the host
    router = routers(host.url, wait_ms=20_000)
    held = router.ready(5)
    assert held.waited_ms == 1500
    assert held.fresh_until_ms - held.sent_at_ms == 3500
    assert router.fresh


def test_an_answer_without_the_waited_header_counts_from_the_send(hosts, routers):
    host = hosts(table(1, valid_ms=2000))
    held = routers(host.url).ready(5)
    assert held.waited_ms == 0 and held.fresh_until_ms - held.sent_at_ms == 2000


def test_a_query_past_a_promising_table_waits_half_its_bound_at_most(hosts, routers):
    host = hosts(table(1, valid_ms=2000))
    changes = queue.Queue()
    router = routers(host.url, on_change=changes.put, wait_ms=20_000)
    router.ready(5)
    assert (host.wait_for_queries(2)[1].after_epoch, host.queries[1].wait_ms) == (1, 1000)
    host.publish(table(2, valid_ms=0))  # no promise: the configured wait
    assert changes.get(timeout=5).epoch == 1 and changes.get(timeout=5).epoch == 2
    wait_until(lambda: any(q.after_epoch == 2 for q in host.queries))
    assert [q.wait_ms for q in host.queries if q.after_epoch == 2][0] == 20_000


def test_a_configured_wait_under_half_the_bound_is_kept(hosts, routers):
    host = hosts(table(1, valid_ms=2000))
    routers(host.url, wait_ms=300).ready(5)
    assert host.wait_for_queries(2)[1].wait_ms == 300
