"""The router against the real host (``ASSIGND_BIN``; skipped without it):
a group with a reader token, a member publishing its endpoint, a router
reading the owner of a key; a second member joins, the router is told, and
once the group is stable every partition's owner is one of the two
endpoints. The admin token reads routes too; a wrong token is refused 403."""

import json
import os
import urllib.request

import pytest
from test_smoke import ADMIN_TOKEN, host, wait_for  # noqa: F401 (host is a fixture)

from assignd import Member, MemberConfig, Router, RouterConfig, RoutesRefused

READER_TOKEN = "reader-reader-reader-1"
ENDPOINTS = {"a": "http://10.0.0.1:8080", "b": "http://10.0.0.2:8080"}

pytestmark = pytest.mark.skipif(not os.environ.get("ASSIGND_BIN"), reason="ASSIGND_BIN is not set")


def create_group(base: str) -> None:
    config = {
        "topics": [{"name": "orders", "partitions": 4}],
        "heartbeat_interval_ms": 200,
        "expansion_timeout_ms": 200,
        "learners": "off",
        "reader_token": READER_TOKEN,
    }
    request = urllib.request.Request(
        f"{base}/v1/groups/g",
        data=json.dumps(config).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status in (200, 201)


def member(base: str, name: str) -> Member:
    config = MemberConfig(
        urls=base,
        group="g",
        topics=["orders"],
        member_name=name,
        endpoint=ENDPOINTS[name],
        metadata={"zone": name},
    )
    return Member(config).start()


def router(base: str, token: str, on_change=None) -> Router:
    return Router(RouterConfig(base, "g", token=token, wait_ms=2000), on_change=on_change).start()


def test_a_router_resolves_keys_to_the_members_endpoints_and_follows_a_join(host):  # noqa: F811
    create_group(host)
    changes = []
    a = member(host, "a")
    r = router(host, READER_TOKEN, on_change=changes.append)
    started = [a, r]
    try:
        r.ready(10)
        wait_for(lambda: r.owner_of("orders", "customer-42").owner is not None)
        owner = r.owner_of("orders", "customer-42").owner
        assert (owner.endpoint, owner.member_name, owner.metadata) == (ENDPOINTS["a"], "a", {"zone": "a"})

        seen = len(changes)
        b = member(host, "b")
        started.append(b)
        wait_for(lambda: len(changes) > seen)

        def split() -> bool:
            owners = [r.owner_of_partition("orders", p).owner for p in range(4)]
            endpoints = {o.endpoint if o else None for o in owners}
            return endpoints == set(ENDPOINTS.values())

        wait_for(split)

        admin = router(host, ADMIN_TOKEN)
        started.append(admin)
        assert admin.ready(10).epoch >= 1
        wrong = router(host, "not-the-reader-token")
        started.append(wrong)
        with pytest.raises(RoutesRefused) as refused:
            wrong.ready(10)
        assert refused.value.status == 403

        # A quiet watch runs out after half the host's default promise, and
        # its answer says how long it waited: the bound counts from there.
        wait_for(lambda: r.table is not None and r.table.waited_ms > 0)
        renewed = r.table
        assert renewed.valid_ms == 2000
        assert renewed.fresh_until_ms - renewed.sent_at_ms == renewed.waited_ms + 2000
        assert b.leave(timeout=10) == "left" and a.leave(timeout=10) == "left"
    finally:
        for thing in started:
            thing.close()
