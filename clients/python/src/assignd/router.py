"""The router: who owns which key right now, for everyone outside a group.

A background thread keeps a blocking query open on the group's routing
table (``GET /v1/groups/{group}/routes?after_epoch=E&wait_ms=W``) and
holds the newest table, indexed (:mod:`assignd.routes`); lookups read it
without a lock or a round trip. While the table held promises an
ownership bound (``valid_ms``), a query waits at most half of it, so that
in a quiet group the next answer renews the bound before it runs out. It
tries the host's URLs in turn while
none answers, follows redirects, honours ``Retry-After``, and reports the
host's refusals (a wrong token, an unknown group) through :meth:`Router.ready`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Union

from .config import ConfigError
from .core import now_ms
from .keys import Key
from .routes import Route, RouteError, RouteTable
from .routes_http import Outcome, Refused, RoutesClient, TableBody, Unavailable, routes_url
from .wire import WireError

log = logging.getLogger("assignd")

#: How long the host holds a blocking query open, by default and at most
#: (the host refuses a longer wait).
WAIT_MS_DEFAULT = 20_000
WAIT_MS_MAX = 20_000
#: What a query may take past ``wait_ms`` before it counts as lost (s).
REQUEST_SLACK_S = 10.0
#: The pause before asking the next URL after a failure, doubling (s).
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 2.0
#: The pause before asking again after a refusal (401, 403, 404) (s).
REFUSED_RETRY_S = 5.0
#: How long :meth:`Router.close` waits for the loop thread (s).
CLOSE_JOIN_S = 5.0

#: ``on_change(table)``: told of each table whose epoch differs from the
#: one held before (the first included), in order, on the thread that got
#: it. Keep it quick; an exception it raises is logged and dropped.
ChangeObserver = Callable[[RouteTable], None]


class RouterError(Exception):
    """The router has no table to give."""


class RouterNotReady(RouterError, TimeoutError):
    """No table came within the time :meth:`Router.ready` was given."""


class RoutesRefused(RouterError):
    """The host refused the routes query: ``status`` and its error body's
    ``code`` and ``message`` (``forbidden``, ``unauthorized``,
    ``group_not_found``, ...)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"the host refused the routes query: {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class RouterConfig:
    """Where a router reads its group's routes, and how.

    ``urls``: the host's base URL or a cluster's nodes (a list or one
    comma-separated string), tried in turn while none answers.
    """

    urls: Union[str, Sequence[str]]
    group: str
    #: The group's reader token or the admin token (``Authorization: Bearer``).
    token: Optional[str] = field(default=None, repr=False)
    #: How long the host may hold each blocking query (ms, at most 20,000);
    #: while the table held promises a bound, at most half its ``valid_ms``.
    wait_ms: int = WAIT_MS_DEFAULT
    #: How long one query may take (s); default ``wait_ms`` + 10 s.
    request_timeout: Optional[float] = None

    def bootstrap_urls(self) -> List[str]:
        parts = self.urls.split(",") if isinstance(self.urls, str) else list(self.urls)
        return [url.strip() for url in parts if url.strip()]

    def timeout_s(self) -> float:
        if self.request_timeout is not None:
            return self.request_timeout
        return self.wait_ms / 1000 + REQUEST_SLACK_S

    def check(self) -> None:
        """Checks what can be checked without asking the host."""
        urls = self.bootstrap_urls()
        if not urls:
            raise ConfigError("no host URL")
        if not self.group:
            raise ConfigError("the group name is empty")
        for url in urls:
            routes_url(url, self.group, {})
        wait_ms = self.wait_ms
        if isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or not 0 <= wait_ms <= WAIT_MS_MAX:
            raise ConfigError(f"wait_ms must be an integer from 0 to {WAIT_MS_MAX} (the host's limit)")
        if not self.timeout_s() > 0:
            raise ConfigError("the request timeout must be above zero")
        token = self.token
        if token is not None and (not token or not all("!" <= c <= "~" for c in token)):
            raise ConfigError("a token must be visible ASCII characters, at least one")


class Router:
    """Keeps the newest routing table of a group and answers who owns what.

    ``Router(config, on_change=...).start()``, or ``with Router(config) as
    router:`` (which closes it on exit). Every method may be called from
    any thread; lookups never block.
    """

    def __init__(self, config: RouterConfig, on_change: Optional[ChangeObserver] = None) -> None:
        config.check()
        self.config = config
        self._urls = config.bootstrap_urls()
        self._url = 0
        self._on_change = on_change
        self._client = RoutesClient(config.token)
        self._table: Optional[RouteTable] = None
        self._refusal: Optional[RoutesRefused] = None
        self._last_failure = ""
        self._misroutes = 0
        self._refreshing = False
        self._closed = threading.Event()
        # Orders the tables offered by the loop and by a refresh, and the
        # observer's calls; ready() waits on it.
        self._offer = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="assignd-router", daemon=True)

    def start(self) -> "Router":
        """Starts asking for the table."""
        self._thread.start()
        return self

    def __enter__(self) -> "Router":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the loop and ends the query under way."""
        self._closed.set()
        self._client.abort()
        if self._thread.ident is not None and threading.current_thread() is not self._thread:
            self._thread.join(CLOSE_JOIN_S)
        self._client.close()

    # --- what the application reads -------------------------------------

    def ready(self, timeout: Optional[float] = None) -> RouteTable:
        """Waits (up to ``timeout`` seconds) for the first table and returns
        it. Raises :class:`RoutesRefused` if the host refused the query
        before any table came, :class:`RouterNotReady` on timeout."""
        with self._offer:
            ended = self._offer.wait_for(
                lambda: self._table is not None or self._refusal is not None or self._closed.is_set(),
                timeout,
            )
            if self._table is not None:
                return self._table
            if self._refusal is not None:
                raise self._refusal
        why = "the router is closed" if ended else f"no routing table within {timeout} s"
        last = f" (last failure: {self._last_failure})" if self._last_failure else ""
        raise RouterNotReady(f"{why}{last}")

    def owner_of(self, topic: str, key: Key) -> Route:
        """The route of the partition ``key`` maps to (Kafka's default
        partitioner; a string is hashed as its UTF-8 bytes). Raises
        :class:`~assignd.routes.RouteError` for an unknown topic, or before
        the first table."""
        return self._held().route_for_key(topic, key, now_ms())

    def owner_of_partition(self, topic: str, partition: int) -> Route:
        """The route of ``partition`` of ``topic``; raises
        :class:`~assignd.routes.RouteError` for an unknown topic or a
        partition past its count."""
        return self._held().route(topic, partition, now_ms())

    @property
    def table(self) -> Optional[RouteTable]:
        """The newest table, or ``None`` before the first."""
        return self._table

    @property
    def epoch(self) -> Optional[int]:
        table = self._table
        return None if table is None else table.epoch

    @property
    def fresh(self) -> bool:
        """Whether the table held is within its ownership bound now."""
        table = self._table
        return table is not None and table.is_fresh(now_ms())

    @property
    def age(self) -> Optional[float]:
        """Seconds since the request that got (or confirmed) the table was sent."""
        table = self._table
        return None if table is None else (now_ms() - table.sent_at_ms) / 1000

    @property
    def misroutes(self) -> int:
        """How many times :meth:`misrouted` was called."""
        return self._misroutes

    def misrouted(self, route: Route) -> None:
        """A member answered "not mine" for ``route``: counts it and, if the
        route came from the newest table held, asks for a newer one at once
        (besides the blocking query, which tells of it too)."""
        with self._offer:
            self._misroutes += 1
            table = self._table
            if table is None or route.epoch < table.epoch or self._refreshing or self._closed.is_set():
                return
            self._refreshing = True
        threading.Thread(target=self._refresh, name="assignd-router-refresh", daemon=True).start()

    def _held(self) -> RouteTable:
        table = self._table
        if table is None:
            raise RouteError(f"no routing table of group {self.config.group!r} yet: wait for ready()")
        return table

    # --- the loop -----------------------------------------------------------

    def _run(self) -> None:
        after: Optional[int] = None
        backoff = BACKOFF_MIN_S
        while not self._closed.is_set():
            query: Dict[str, int] = {}
            if after is not None:
                query = {"after_epoch": after, "wait_ms": self._wait_ms(self._table)}
            sent = now_ms()
            outcome = self._ask(self._client, query)
            if self._closed.is_set():
                break
            if isinstance(outcome, TableBody):
                table = self._read(outcome, sent)
                if table is not None:
                    after = self._take(table, after).epoch
                    backoff = BACKOFF_MIN_S
                    continue
                outcome = Unavailable(self._last_failure)
            if isinstance(outcome, Refused):
                self._refused(outcome)
                self._closed.wait(REFUSED_RETRY_S)
                continue
            self._last_failure = outcome.message
            log.debug("routes of %s: %s; trying the next URL", self.config.group, outcome.message)
            self._url = (self._url + 1) % len(self._urls)
            self._closed.wait(max(backoff, outcome.retry_after_s or 0.0))
            backoff = min(backoff * 2, BACKOFF_MAX_S)
        self._client.close()
        with self._offer:
            self._offer.notify_all()

    def _wait_ms(self, held: Optional[RouteTable]) -> int:
        """How long a blocking query past ``held`` may wait: the configured
        wait, or half the table's ``valid_ms`` when that is shorter (and the
        table promises anything), so that the answer renews the bound before
        it runs out."""
        if held is None or held.valid_ms <= 0:
            return self.config.wait_ms
        return min(self.config.wait_ms, max(held.valid_ms // 2, 1))

    def _ask(self, client: RoutesClient, query: Dict[str, int]) -> Outcome:
        url = routes_url(self._urls[self._url], self.config.group, query)
        return client.get(url, self.config.timeout_s())

    def _read(self, answer: TableBody, sent: int) -> Optional[RouteTable]:
        try:
            return RouteTable(answer.body, sent, answer.waited_ms)
        except WireError as error:
            self._last_failure = f"an unreadable routing table: {error}"
            log.warning("routes of %s: %s", self.config.group, self._last_failure)
            return None

    def _refused(self, refused: Refused) -> None:
        error = RoutesRefused(refused.status, refused.code, refused.message)
        self._last_failure = str(error)
        log.warning("routes of %s: %s", self.config.group, error)
        with self._offer:
            self._refusal = error
            self._offer.notify_all()

    def _refresh(self) -> None:
        client = RoutesClient(self.config.token)
        try:
            sent = now_ms()
            outcome = self._ask(client, {})
            if isinstance(outcome, TableBody) and not self._closed.is_set():
                table = self._read(outcome, sent)
                if table is not None:
                    self._take(table, None)
        finally:
            client.close()
            with self._offer:
                self._refreshing = False

    def _take(self, table: RouteTable, asked_after: Optional[int]) -> RouteTable:
        """Keeps ``table`` if it is newer than the one held, or lower than
        the epoch asked after (the host's answer when the router's table
        came from elsewhere); returns the table held then."""
        with self._offer:
            self._refusal = None
            self._last_failure = ""
            held = self._table
            if held is not None and table.epoch == held.epoch:
                if table.read_at_ms > held.read_at_ms:
                    held = self._table = held.resent(table.sent_at_ms, table.waited_ms)
                return held
            lower = asked_after is not None and table.epoch < asked_after
            if held is not None and table.epoch < held.epoch and not lower:
                return held
            self._table = table
            self._offer.notify_all()
            if self._on_change is not None:
                try:
                    self._on_change(table)
                except Exception:  # an observer must not stop the router
                    log.exception("the routes change observer failed")
            return table
