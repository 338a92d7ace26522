"""A scripted HTTP host on loopback, for the transport's tests."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple

Reply = Tuple[int, Dict[str, str], bytes]


def reply(status: int, body: Any = None, **headers: str) -> Reply:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return status, {k.replace("_", "-"): v for k, v in headers.items()}, data


def error(status: int, code: str, message: str = "no", **headers: str) -> Reply:
    return reply(status, {"error": {"code": code, "message": message}}, **headers)


def answer(member_id: str = "m", epoch: int = 1, **fields: Any) -> Reply:
    body = {
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval_ms": 1000,
        "active": [],
        **fields,
    }
    return reply(200, body)


#: Close the connection without answering.
CLOSE = "close"


class FakeHost:
    """Answers each request with the next of ``script`` (a :func:`reply`,
    :data:`CLOSE`, or ``("sleep", seconds, reply)``), the last one again
    once the script runs out. Records every request."""

    def __init__(self, script: List[Any]) -> None:
        self.script = list(script)
        self.requests: List[Tuple[str, Dict[str, str], Any]] = []
        #: The client port of each request (one per connection).
        self.ports: List[int] = []
        self.connections: List[socket.socket] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                host.connections.append(self.connection)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                host.requests.append((self.path, dict(self.headers), body))
                host.ports.append(self.client_address[1])
                step = host.script.pop(0) if len(host.script) > 1 else host.script[0]
                if step == CLOSE:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(step, tuple) and step[0] == "sleep":
                    time.sleep(step[1])
                    step = step[2]
                if callable(step):
                    step = step()
                status, headers, data = step
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def kill(self) -> None:
        """Stops as kill -9 would: the port closed, every connection too."""
        self.close()
        for connection in self.connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
