"""A routes host on loopback for the router's tests: it holds one table and
answers ``GET .../routes`` as the real host does (a blocking query waits
for a newer epoch or ``wait_ms``), unless a scripted reply is queued.

Its tables promise 60 s by default: a router's query then waits the
``wait_ms`` it was given (under half the promise), as the loop tests
expect."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

from fake_host import Reply


def table(
    epoch: int, owner: str = "m-1", endpoint: Optional[str] = "http://a:1", valid_ms: int = 60_000
) -> Dict[str, Any]:
    """A table of one topic ``orders`` of 4 partitions, all owned by ``owner``."""
    return {
        "group": "g",
        "epoch": epoch,
        "group_epoch": epoch,
        "valid_ms": valid_ms,
        "topics": {"orders": 4},
        "members": {owner: {"member_name": None, "endpoint": endpoint, "metadata": {}}},
        "active": {owner: [["orders", 0, 3]]},
        "learner": {},
        "standby": {},
        "moving": [],
        "unowned": [],
    }


class Query:
    """One request the host got."""

    def __init__(self, path: str, headers: Dict[str, str]) -> None:
        self.at = time.monotonic()
        self.path = path
        self.headers = headers
        query = parse_qs(urlsplit(path).query)
        self.after_epoch = int(query["after_epoch"][0]) if "after_epoch" in query else None
        self.wait_ms = int(query["wait_ms"][0]) if "wait_ms" in query else None


class FakeRoutesHost:
    def __init__(self, first: Dict[str, Any]) -> None:
        self.table = first
        self.queries: List[Query] = []
        #: Replies given instead of the table, first first.
        self.script: List[Reply] = []
        #: The ``Assignd-Routes-Waited-Ms`` every table answer carries, if any.
        self.waited_ms: Optional[int] = None
        self.changed = threading.Condition()
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = Query(self.path, dict(self.headers))
                with host.changed:
                    host.queries.append(query)
                    host.changed.notify_all()
                    scripted = host.script.pop(0) if host.script else None
                if scripted is None:
                    waited = {} if host.waited_ms is None else {"Assignd-Routes-Waited-Ms": str(host.waited_ms)}
                    scripted = (200, waited, json.dumps(host.wait(query)).encode())
                status, headers, data = scripted
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def wait(self, query: Query) -> Dict[str, Any]:
        """The table, once its epoch differs from the one asked after or the
        wait ran out."""
        deadline = time.monotonic() + (query.wait_ms or 0) / 1000
        with self.changed:
            while query.after_epoch is not None and self.table["epoch"] == query.after_epoch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            return self.table

    def publish(self, new: Dict[str, Any]) -> None:
        with self.changed:
            self.table = new
            self.changed.notify_all()

    def wait_for_queries(self, count: int, timeout: float = 10.0) -> List[Query]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.queries) >= count, timeout), self.queries
            return list(self.queries)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scripted(status: int, body: Any, **headers: str) -> Tuple[int, Dict[str, str], bytes]:
    return status, {k.replace("_", "-"): v for k, v in headers.items()}, json.dumps(body).encode()
