"""One heartbeat over HTTP/1.1: encode, send within the request timeout,
follow a cluster to the group's coordinator, and classify the outcome into
the member machine's failure kinds.

In a cluster any node answers: a node that does not coordinate the group
answers ``307`` with the coordinator's URL, which is followed at once (up
to :data:`REDIRECTS_MAX` hops) and remembered. When the remembered node
stops answering, the transport asks the bootstrap URLs again, in turn, each
at most once per heartbeat. A shard between owners (503
``shard_unavailable`` or ``coordinator_unreachable``) is retried within the
same request timeout after a short pause.

A failed heartbeat is ``unreached`` only when no attempt can have reached a
coordinator of the group: every one was refused a connection, redirected,
or answered 503 ``shard_unavailable``. The member then keeps its tasks on
the answer's unreached lease, so this must never be said of an attempt
that may have been handled: a timeout, a connection lost after sending,
and every other answer may have been.
"""

from __future__ import annotations

import http.client
import json
import logging
import select
import socket
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union
from urllib.parse import quote, urljoin, urlsplit

from .config import ConfigError, MemberConfig
from .failure import Failure
from .wire import ErrorBody, HeartbeatRequest, HeartbeatResponse, WireError

log = logging.getLogger("assignd")

#: The most redirects one heartbeat follows.
REDIRECTS_MAX = 5
#: The longest ``Retry-After`` taken from the host, in seconds.
RETRY_AFTER_S_MAX = 60
#: The pause before a heartbeat to a shard between owners is sent again,
#: doubling up to the max, within the request timeout (seconds).
IN_TRANSIT_PAUSE_MIN = 0.025
IN_TRANSIT_PAUSE_MAX = 0.4
#: A kept-alive connection idle this long is closed before the next
#: request: under the host's 10 s idle timeout, so that no request goes
#: out on a connection the host is closing.
CONNECTION_IDLE_MAX = 5.0
#: The longest error body kept in a message.
ERROR_BODY_LEN_MAX = 512

_IN_TRANSIT_CODES = ("shard_unavailable", "coordinator_unreachable")


class HeartbeatFailed(Exception):
    """A heartbeat that got no usable 200 answer."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


def heartbeat_url(base: str, group: str) -> str:
    """The heartbeat URL of ``group`` at the host whose base URL is ``base``."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"url {base!r} is not an http:// base URL")
    path = parts.path.rstrip("/") + "/v1/groups/" + quote(group, safe="") + "/heartbeat"
    return f"{parts.scheme}://{parts.netloc}{path}"


# --- what one attempt came back with -------------------------------------


@dataclass(frozen=True)
class _Done:
    """The heartbeat's result; no other node is tried. May have reached."""

    result: Union[HeartbeatResponse, Failure]


@dataclass(frozen=True)
class _NotReached:
    """A failure that ends the heartbeat and reached no coordinator (a
    redirect without a usable location)."""

    failure: Failure


@dataclass(frozen=True)
class _Redirected:
    to: str


@dataclass(frozen=True)
class _InTransit:
    """The group's shard is between owners: try again shortly. A 503
    ``shard_unavailable`` comes from a node that processed nothing."""

    failure: Failure
    may_have_reached: bool


@dataclass(frozen=True)
class _Refused:
    """The node refused the connection: the request never went out."""

    failure: Failure


@dataclass(frozen=True)
class _Unanswered:
    """The connection failed after the request may have gone out."""

    failure: Failure


_Outcome = Union[_Done, _NotReached, _Redirected, _InTransit, _Refused, _Unanswered]


def _may_have_reached(outcome: _Outcome) -> bool:
    if isinstance(outcome, _InTransit):
        return outcome.may_have_reached
    return isinstance(outcome, (_Done, _Unanswered))


def _failed(failure: Failure, may_have_reached: bool) -> Failure:
    """The last failure of a heartbeat: as it is if an attempt may have
    reached the coordinator, else ``unreached``."""
    if may_have_reached:
        return failure
    return Failure("unreached", message=failure.message)


def _no_answer(message: str) -> Failure:
    return Failure("no_answer", message=message)


def _retry_after_ms(value: Optional[str]) -> Optional[int]:
    """Seconds only (the host sends no HTTP dates), capped: a host's hint
    must not park a member past its own lease."""
    if value is None or not value.strip().isdigit():
        return None
    return min(int(value.strip()), RETRY_AFTER_S_MAX) * 1000


def _peer_closed(sock: Optional[socket.socket]) -> bool:
    """Whether an idle kept-alive connection can no longer carry a request:
    anything to read on it (end of file, a reset, stray bytes) means the
    peer closed it, or died. A request sent on it would fail as possibly
    delivered, and a node killed between heartbeats must show as refused
    (``unreached``), not as a lost answer."""
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


# --- where heartbeats go ----------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """A bootstrap URL (by index), or the coordinator a redirect named and
    the bootstrap URL that led there (asked again when it stops answering)."""

    bootstrap: int
    coordinator: Optional[str] = None

    def next(self, bootstraps: int) -> "_Target":
        if self.coordinator is not None:
            return _Target(self.bootstrap)
        return _Target((self.bootstrap + 1) % bootstraps)


class Transport:
    """Sends heartbeats over one kept-alive connection. Not thread-safe:
    one heartbeat at a time (the member shells send one at a time)."""

    def __init__(self, config: MemberConfig) -> None:
        self._bootstrap = [heartbeat_url(url, config.group) for url in config.bootstrap_urls()]
        if not self._bootstrap:
            raise ConfigError("no host URL")
        self._timeout = config.request_timeout
        self._headers: Dict[str, str] = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "assignd-python",
        }
        if config.member_token is not None:
            self._headers["Authorization"] = f"Bearer {config.member_token}"
        self._target = _Target(0)
        self._connection: Optional[http.client.HTTPConnection] = None
        self._origin: Optional[Tuple[str, str]] = None
        self._last_used = 0.0

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._origin = None

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        """Sends ``request`` to the group's coordinator, following
        redirects, trying the bootstrap URLs when it does not answer and
        waiting out a shard between owners, all within the request timeout.
        Raises :class:`HeartbeatFailed` with the classified failure."""
        body = json.dumps(request.to_json(), separators=(",", ":")).encode()
        deadline = time.monotonic() + self._timeout
        redirects = 0
        unreachable_bootstraps = 0
        pause = IN_TRANSIT_PAUSE_MIN
        # Over every attempt: one that may have reached the coordinator
        # makes a failure ambiguous.
        may_have_reached = False
        while True:
            target = self._target
            url = target.coordinator or self._bootstrap[target.bootstrap]
            left = deadline - time.monotonic()
            if left <= 0:
                failure = _no_answer(f"no answer within {self._timeout} s")
                raise HeartbeatFailed(_failed(failure, may_have_reached))
            outcome = self._send(url, body, left)
            may_have_reached |= _may_have_reached(outcome)
            if isinstance(outcome, _Done):
                if isinstance(outcome.result, Failure):
                    raise HeartbeatFailed(outcome.result)
                return outcome.result
            if isinstance(outcome, _NotReached):
                raise HeartbeatFailed(_failed(outcome.failure, may_have_reached))
            if isinstance(outcome, _Redirected):
                if redirects >= REDIRECTS_MAX:
                    failure = _no_answer(f"more than {REDIRECTS_MAX} redirects, the last to {outcome.to}")
                    raise HeartbeatFailed(_failed(failure, may_have_reached))
                redirects += 1
                log.debug("heartbeat redirected to %s", outcome.to)
                self._target = _Target(target.bootstrap, outcome.to)
            elif isinstance(outcome, _InTransit):
                if deadline - time.monotonic() <= pause:
                    raise HeartbeatFailed(_failed(outcome.failure, may_have_reached))
                time.sleep(pause)
                pause = min(pause * 2, IN_TRANSIT_PAUSE_MAX)
            else:
                # A coordinator that died or left: ask the bootstrap URL
                # that led to it again; each bootstrap URL once.
                if target.coordinator is None:
                    unreachable_bootstraps += 1
                self._target = target.next(len(self._bootstrap))
                log.debug("no connection to %s: %s", url, outcome.failure.message)
                if unreachable_bootstraps >= len(self._bootstrap):
                    raise HeartbeatFailed(_failed(outcome.failure, may_have_reached))

    # --- one attempt --------------------------------------------------------

    def _connection_for(self, url: str, timeout: float) -> Tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        idle = time.monotonic() - self._last_used
        if self._connection is not None and (
            origin != self._origin or idle > CONNECTION_IDLE_MAX or _peer_closed(self._connection.sock)
        ):
            self.close()
        if self._connection is None:
            kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            self._connection = kind(parts.netloc, timeout=timeout)
            self._origin = origin
        connection = self._connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        return connection, path

    def _send(self, url: str, body: bytes, timeout: float) -> _Outcome:
        connection, path = self._connection_for(url, timeout)
        if connection.sock is None:
            try:
                connection.connect()
            except OSError as error:
                # Checked apart: a connect timeout is a timeout too, but the
                # request never went out.
                self.close()
                return _Refused(_no_answer(f"connecting to {url}: {error}"))
        try:
            connection.request("POST", path, body=body, headers=self._headers)
            answer = connection.getresponse()
        except socket.timeout:
            # A node that stopped answering (paused, cut off): the next
            # heartbeat asks the (next) bootstrap URL.
            self.close()
            self._target = self._target.next(len(self._bootstrap))
            return _Done(_no_answer(f"no answer from {url} within {timeout:.3f} s"))
        except (OSError, http.client.HTTPException) as error:
            self.close()
            return _Unanswered(_no_answer(f"{url}: {type(error).__name__}: {error}"))
        try:
            data = answer.read()
        except (OSError, http.client.HTTPException) as error:
            self.close()
            return _Done(_no_answer(f"reading the answer of {url}: {error}"))
        self._last_used = time.monotonic()
        if answer.will_close:
            self.close()
        return self._classify(
            url, answer.status, answer.getheader("Location"), answer.getheader("Retry-After"), data
        )

    def _classify(
        self, url: str, status: int, location: Optional[str], retry_after: Optional[str], data: bytes
    ) -> _Outcome:
        redirected = status in (307, 308)
        if redirected and location:
            to = urljoin(url, location.strip())
            if urlsplit(to).scheme in ("http", "https"):
                return _Redirected(to)
        if 200 <= status < 300:
            try:
                return _Done(HeartbeatResponse.from_json(json.loads(data)))
            except (ValueError, WireError) as error:
                return _Done(Failure("unreadable", message=f"heartbeat answer: {error}"))
        retry_after_ms = _retry_after_ms(retry_after)
        try:
            error_body = ErrorBody.from_json(json.loads(data))
        except ValueError:
            error_body = None
        if error_body is not None:
            message = error_body.message
        else:
            message = data[:ERROR_BODY_LEN_MAX].decode("utf-8", "replace")
        code = error_body.code if error_body is not None else None
        if status == 503 and code in _IN_TRANSIT_CODES:
            failure = Failure("server", status=status, retry_after_ms=retry_after_ms, message=message)
            return _InTransit(failure, may_have_reached=code != "shard_unavailable")
        if error_body is not None and (400 <= status < 500 or code == "not_coordinator"):
            failure = Failure("refused", status, error_body.code, retry_after_ms, message)
        elif 500 <= status < 600:
            failure = Failure("server", status=status, retry_after_ms=retry_after_ms, message=message)
        else:
            failure = Failure("unreadable", message=f"HTTP {status} without an error body: {message}")
        # A redirect the transport cannot follow still says the node does
        # not coordinate the group.
        return _NotReached(failure) if redirected else _Done(failure)
