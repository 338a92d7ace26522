"""What a member needs to know before it joins."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

#: How long one heartbeat may take before it counts as lost, in seconds.
REQUEST_TIMEOUT_DEFAULT = 5.0


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
