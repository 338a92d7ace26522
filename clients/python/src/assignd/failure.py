"""Why a heartbeat failed, in the five kinds the member machine tells apart.

What matters is whether the heartbeat may have reached a coordinator of
the group: only then can the host have acted on it (taken tasks early), so
only ``unreached`` keeps a member on its longer unreached lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Literal, Optional

FailureKind = Literal["unreached", "no_answer", "refused", "server", "unreadable"]

_KINDS = ("unreached", "no_answer", "refused", "server", "unreadable")


@dataclass(frozen=True)
class Failure:
    """A failed heartbeat.

    - ``unreached``: no coordinator of the group can have handled it (every
      attempt was refused a connection, redirected, or answered 503
      ``shard_unavailable``, or it never went out);
    - ``no_answer``: a timeout, or the connection was lost after sending;
    - ``refused``: a 4xx with an error body (``status``, ``code``);
    - ``server``: a 5xx without such a code (``status``);
    - ``unreadable``: an answer this client cannot read.

    ``retry_after_ms`` is the answer's ``Retry-After`` (at most 60 s), for
    ``refused`` and ``server``. ``message`` is for people and logs only.
    """

    kind: FailureKind
    status: Optional[int] = None
    code: Optional[str] = None
    retry_after_ms: Optional[int] = None
    message: str = ""

    @property
    def is_transient(self) -> bool:
        """Whether the same request may succeed later."""
        return self.kind in ("unreached", "no_answer", "server")

    def __str__(self) -> str:
        if self.kind == "refused":
            return f"the host refused the request ({self.code}, HTTP {self.status}): {self.message}"
        if self.kind == "server":
            return f"the host failed (HTTP {self.status}): {self.message}"
        if self.kind == "unreached":
            return f"no coordinator of the group got the heartbeat: {self.message}"
        if self.kind == "no_answer":
            return f"no answer from the host: {self.message}"
        return f"unreadable answer from the host: {self.message}"

    def to_json(self) -> Dict[str, Any]:
        """As the conformance vectors write it (no message)."""
        body: Dict[str, Any] = {"kind": self.kind}
        if self.kind in ("refused", "server"):
            body["status"] = self.status
            if self.kind == "refused":
                body["code"] = self.code
            body["retry_after_ms"] = self.retry_after_ms
        return body

    @staticmethod
    def from_json(value: Dict[str, Any]) -> "Failure":
        kind = value.get("kind")
        if kind not in _KINDS:
            raise ValueError(f"unknown failure kind {kind!r}")
        return Failure(
            kind=kind,
            status=value.get("status"),
            code=value.get("code"),
            retry_after_ms=value.get("retry_after_ms"),
            message=value.get("message", ""),
        )
