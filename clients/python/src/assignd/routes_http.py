"""One routes query over HTTP/1.1 for the router: ``GET`` on a kept-alive
connection within a timeout, ``307``/``308`` followed with the token kept,
and the outcome sorted into what the router acts on: a table body, a
refusal (the host's ``{"error": {"code", "message"}}``), or a node that
cannot answer now (no connection, a 5xx, a 503 with ``Retry-After``).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union
from urllib.parse import quote, urlencode, urljoin, urlsplit

from .config import ConfigError
from .transport import CONNECTION_IDLE_MAX, ERROR_BODY_LEN_MAX, REDIRECTS_MAX, RETRY_AFTER_S_MAX, _peer_closed
from .wire import ErrorBody


def routes_url(base: str, group: str, query: Dict[str, int]) -> str:
    """The routes URL of ``group`` at the host whose base URL is ``base``."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"url {base!r} is not an http:// base URL")
    path = parts.path.rstrip("/") + "/v1/groups/" + quote(group, safe="") + "/routes"
    return f"{parts.scheme}://{parts.netloc}{path}" + (f"?{urlencode(query)}" if query else "")


@dataclass(frozen=True)
class TableBody:
    """A 200 answer: the table's JSON, and how long the query waited at the
    host before the table was read (``Assignd-Routes-Waited-Ms``; 0 when
    the answer does not say)."""

    body: Any
    waited_ms: int = 0


@dataclass(frozen=True)
class Refused:
    """The host refused the query (401, 403, 404, another 4xx)."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Unavailable:
    """The node did not answer usefully now: ask the next one."""

    message: str
    retry_after_s: Optional[float] = None


Outcome = Union[TableBody, Refused, Unavailable]

#: An answer as it came: status, ``Location``, ``Retry-After``,
#: ``Assignd-Routes-Waited-Ms``, body.
_Answer = Tuple[int, Optional[str], Optional[str], Optional[str], bytes]

#: The longest wait taken from ``Assignd-Routes-Waited-Ms``: the host never
#: holds a query longer than its longest wait.
WAITED_MS_MAX = 20_000


def _retry_after_s(value: Optional[str]) -> Optional[float]:
    if value is None or not value.strip().isdigit():
        return None
    return float(min(int(value.strip()), RETRY_AFTER_S_MAX))


def _waited_ms(value: Optional[str]) -> int:
    if value is None or not value.strip().isdigit():
        return 0
    return min(int(value.strip()), WAITED_MS_MAX)


def classify(status: int, retry_after: Optional[str], data: bytes, waited: Optional[str] = None) -> Outcome:
    """What an answer that is not a redirect means to the router."""
    if status == 200:
        try:
            return TableBody(json.loads(data), _waited_ms(waited))
        except ValueError as error:
            return Unavailable(f"an unreadable routing table: {error}")
    try:
        error_body = ErrorBody.from_json(json.loads(data))
    except ValueError:
        error_body = None
    message = error_body.message if error_body else data[:ERROR_BODY_LEN_MAX].decode("utf-8", "replace")
    if 400 <= status < 500:
        return Refused(status, error_body.code if error_body else f"http_{status}", message)
    return Unavailable(f"HTTP {status}: {message}", _retry_after_s(retry_after))


class RoutesClient:
    """Sends routes queries on one kept-alive connection, one at a time.
    :meth:`abort` may be called from another thread to end the query under
    way at once."""

    def __init__(self, token: Optional[str]) -> None:
        self._headers = {"Accept": "application/json", "User-Agent": "assignd-python-router"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._lock = threading.Lock()
        self._connection: Optional[http.client.HTTPConnection] = None
        self._origin: Optional[Tuple[str, str]] = None
        self._last_used = 0.0
        self._aborted = False

    def get(self, url: str, timeout: float) -> Outcome:
        """``GET url``, following redirects, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        for _ in range(REDIRECTS_MAX + 1):
            left = deadline - time.monotonic()
            if left <= 0:
                return Unavailable(f"no answer within {timeout:.1f} s")
            answer = self._send(url, left)
            if not isinstance(answer, tuple):
                return answer
            status, location, retry_after, waited, data = answer
            if status in (307, 308) and location:
                url = urljoin(url, location.strip())
                continue
            return classify(status, retry_after, data, waited)
        return Unavailable(f"more than {REDIRECTS_MAX} redirects, the last to {url}")

    def abort(self) -> None:
        """Ends the query under way and every later one (they return
        :class:`Unavailable`)."""
        # Set before the socket is read: a connect that ends after this
        # read sees the flag before it sends.
        self._aborted = True
        with self._lock:
            sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
            self._connection = None
            self._origin = None

    def _connection_for(self, url: str, timeout: float) -> Tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        stale = time.monotonic() - self._last_used > CONNECTION_IDLE_MAX
        if self._connection is not None and (
            origin != self._origin or stale or _peer_closed(self._connection.sock)
        ):
            self.close()
        with self._lock:
            if self._connection is None:
                kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
                self._connection = kind(parts.netloc, timeout=timeout)
                self._origin = origin
            connection = self._connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection, parts.path + (f"?{parts.query}" if parts.query else "")

    def _send(self, url: str, timeout: float) -> Union[Outcome, _Answer]:
        connection, path = self._connection_for(url, timeout)
        try:
            if connection.sock is None:
                connection.connect()
            if self._aborted:
                return Unavailable("the router is closing")
            connection.request("GET", path, headers=self._headers)
            answer = connection.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            return Unavailable(f"{url}: {type(error).__name__}: {error}")
        self._last_used = time.monotonic()
        if answer.will_close:
            self.close()
        location, retry_after = answer.getheader("Location"), answer.getheader("Retry-After")
        return answer.status, location, retry_after, answer.getheader("Assignd-Routes-Waited-Ms"), data
