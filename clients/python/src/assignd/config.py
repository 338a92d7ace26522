"""What a member needs to know before it joins."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Union

from .loads import valid_load_capacity

#: How long one heartbeat may take before it counts as lost, in seconds.
REQUEST_TIMEOUT_DEFAULT = 5.0
#: The host's limits on what a member publishes (docs/routing.md).
ENDPOINT_BYTES_MAX = 256
METADATA_PAIRS_MAX = 16
METADATA_KEY_BYTES_MAX = 64
METADATA_VALUE_BYTES_MAX = 256


class ConfigError(ValueError):
    """A member config that cannot work."""


@dataclass(frozen=True)
class MemberConfig:
    """A member's identity and subscription.

    ``urls``: the host's base URL (``http://127.0.0.1:7070``) or, for a
    cluster, several nodes' (bootstrap URLs, tried in turn while none
    answers), as a list or one comma-separated string: any node redirects
    the member to the group's coordinator.
    """

    urls: Union[str, Sequence[str]]
    group: str
    topics: Sequence[str]
    #: A static member's name (KIP-345): a restart with the same name within
    #: the registration timeout gets the same tasks back. ``None``: dynamic.
    member_name: Optional[str] = None
    rack: Optional[str] = None
    #: This member's relative capacity (1 or more).
    capacity: int = 1
    #: The group's member token, sent as ``Authorization: Bearer TOKEN``.
    member_token: Optional[str] = field(default=None, repr=False)
    #: How long one heartbeat may take, redirects and retries included (s).
    request_timeout: float = REQUEST_TIMEOUT_DEFAULT
    #: Where this member serves (a URL or ``host:port``), published in the
    #: group's routing table for routers; ``None`` publishes none. Change
    #: it at run time with ``set_endpoint``.
    endpoint: Optional[str] = None
    #: Small string pairs published with the endpoint (zone, version, ...).
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: The load this member can carry, in the group's load unit, reported
    #: when the host asks for loads; ``None``: none. Change it at run time
    #: with ``report_load(load_capacity=...)``.
    load_capacity: Optional[float] = None
    #: How far (relative) a task's load may move from the value the host
    #: has before it is sent again (0.1: 10 %).
    load_threshold: float = 0.1

    def bootstrap_urls(self) -> List[str]:
        """The bootstrap URLs, in order."""
        parts = self.urls.split(",") if isinstance(self.urls, str) else list(self.urls)
        return [url.strip() for url in parts if url.strip()]

    def check(self) -> None:
        """Checks what can be checked without asking the host."""
        if not self.bootstrap_urls():
            raise ConfigError("no host URL")
        if not self.group:
            raise ConfigError("the group name is empty")
        if isinstance(self.topics, str) or not self.topics or not all(self.topics):
            raise ConfigError("a member must subscribe to at least one topic (a list of names)")
        if self.member_name == "":
            raise ConfigError("a static member's name must not be empty")
        if not isinstance(self.capacity, int) or not 1 <= self.capacity <= 2**32 - 1:
            raise ConfigError("capacity must be from 1 to 2^32-1")
        if not self.request_timeout > 0:
            raise ConfigError("the request timeout must be above zero")
        token = self.member_token
        if token is not None and (not token or not all("!" <= c <= "~" for c in token)):
            raise ConfigError("a member token must be visible ASCII characters, at least one")
        if not (isinstance(self.load_threshold, (int, float)) and 0 <= self.load_threshold < float("inf")):
            raise ConfigError("the load threshold must be a finite number, 0 or more")
        if not valid_load_capacity(self.load_capacity):
            raise ConfigError("a load capacity must be above 0 and at most 1e15")
        check_endpoint(self.endpoint, self.metadata)


def _visible(text: str) -> bool:
    return all(c.isprintable() or c == " " for c in text)


def check_endpoint(endpoint: Optional[str], metadata: Mapping[str, str]) -> None:
    """Checks an endpoint and its metadata against the host's limits, so
    that a mistake fails where it is made rather than as the host's
    refusal of a heartbeat."""
    if endpoint is not None and not (
        0 < len(endpoint.encode()) <= ENDPOINT_BYTES_MAX and all("!" <= c <= "~" for c in endpoint)
    ):
        raise ConfigError(
            f"an endpoint must be 1 to {ENDPOINT_BYTES_MAX} bytes of visible ASCII: {endpoint!r}"
        )
    if len(metadata) > METADATA_PAIRS_MAX:
        raise ConfigError(f"at most {METADATA_PAIRS_MAX} metadata pairs, not {len(metadata)}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigError(f"metadata keys and values must be strings: {key!r}")
        if not 0 < len(key.encode()) <= METADATA_KEY_BYTES_MAX:
            raise ConfigError(f"a metadata key must be 1 to {METADATA_KEY_BYTES_MAX} bytes: {key!r}")
        if len(value.encode()) > METADATA_VALUE_BYTES_MAX:
            raise ConfigError(f"a metadata value must be at most {METADATA_VALUE_BYTES_MAX} bytes: {key!r}")
        if not _visible(key) or not _visible(value):
            raise ConfigError(f"metadata must be visible characters: {key!r}")
