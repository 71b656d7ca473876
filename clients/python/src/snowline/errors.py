"""The errors a snowline call raises.

The server reports a failed call as a gRPC status with two metadata entries: ``snowline-error`` names the
kind, one of a closed set, and ``snowline-abort-cause`` names why a transaction aborted. :func:`from_rpc_error`
turns such a status into one of the classes below, chosen by the kind, or, when the metadata is missing (an
error raised by gRPC itself, a proxy, or an older server), by the status code:

=================  =====================  ==========================================
kind               class                  status code
=================  =====================  ==========================================
conflict           :class:`Conflict`      ABORTED (retryable)
aborted            :class:`Aborted`       ABORTED
outcome-unknown    :class:`OutcomeUnknown` UNKNOWN, DEADLINE_EXCEEDED
not-offered        :class:`NotOffered`    UNIMPLEMENTED
invalid-argument   :class:`InvalidArgument` INVALID_ARGUMENT
unavailable        :class:`Unavailable`   UNAVAILABLE, RESOURCE_EXHAUSTED
unknown-session    :class:`UnknownSession` NOT_FOUND
=================  =====================  ==========================================

Any other status becomes a plain :class:`SnowlineError` whose ``kind`` is ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import grpc

__all__ = [
    "ABORT_CAUSE_METADATA",
    "ERROR_METADATA",
    "Aborted",
    "ConfigError",
    "Conflict",
    "InvalidArgument",
    "NotOffered",
    "OutcomeUnknown",
    "SnowlineError",
    "Unavailable",
    "UnknownSession",
    "from_rpc_error",
]

#: The metadata key naming the error's kind.
ERROR_METADATA = "snowline-error"
#: The metadata key naming an abort's cause (conflict, certification, vote, deadlock, timeout, user).
ABORT_CAUSE_METADATA = "snowline-abort-cause"


class SnowlineError(Exception):
    """Base class of every error the client raises.

    Attributes:
        kind: the server's ``snowline-error`` kind (``"conflict"``, ``"invalid-argument"``, ...), or the
            kind implied by the status code when the server sent none; ``None`` for an error outside the set
            (and for client-side errors such as :class:`ConfigError`).
        code: the gRPC status code, or ``None`` for an error raised before any call.
        message: the server's (or gRPC's) description.
        retryable: whether running the same transaction again may succeed (only :class:`Conflict`).
    """

    #: The kind this class stands for (what a status without metadata is given).
    KIND: ClassVar[str | None] = None
    retryable: ClassVar[bool] = False

    def __init__(self, message: str, *, kind: str | None = None, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind if kind is not None else self.KIND
        self.code = code

    def __str__(self) -> str:
        label = self.kind or (self.code.name.lower() if self.code is not None else None)
        return f"{label}: {self.message}" if label else self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, kind={self.kind!r}, code={self.code})"


class Aborted(SnowlineError):
    """The transaction aborted and had no effect; running it again would abort again (e.g. cause ``user``).

    Attributes:
        cause: the ``snowline-abort-cause`` (``conflict``, ``certification``, ``vote``, ``deadlock``,
            ``timeout``, ``user``), or ``None`` if the server named none.
    """

    KIND = "aborted"

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        code: grpc.StatusCode | None = None,
        cause: str | None = None,
    ) -> None:
        super().__init__(message, kind=kind, code=code)
        self.cause = cause

    def __str__(self) -> str:
        base = super().__str__()
        return f"{base} (cause: {self.cause})" if self.cause else base

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, kind={self.kind!r}, code={self.code}, cause={self.cause!r})"


class Conflict(Aborted):
    """The transaction aborted because of a concurrent one and had no effect: retrying it may commit.

    A subclass of :class:`Aborted`, so ``except Aborted`` catches both; ``.cause`` says which check failed
    (``conflict``, ``certification``, ``deadlock``, ...). :meth:`snowline.Client.run_transaction` retries it.
    """

    KIND = "conflict"
    retryable = True


class OutcomeUnknown(SnowlineError):
    """The call may or may not have taken effect (its deadline ran out, or the endpoint lost track of it)."""

    KIND = "outcome-unknown"


class NotOffered(SnowlineError):
    """The cluster's protocol does not offer this call (see :attr:`snowline.Info.offers`)."""

    KIND = "not-offered"


class InvalidArgument(SnowlineError):
    """The request was refused as malformed or over a limit (a value over ``max_value_bytes``, no keys...)."""

    KIND = "invalid-argument"


class Unavailable(SnowlineError):
    """The endpoint cannot serve the call now (unreachable, shutting down, or out of session budget)."""

    KIND = "unavailable"


class UnknownSession(SnowlineError):
    """The session named in the call does not exist at this endpoint (closed, expired, or never opened here)."""

    KIND = "unknown-session"


class ConfigError(SnowlineError, ValueError):
    """A connection target cannot be used: no cluster.toml, no gRPC endpoint in the datacenter, bad TLS files."""


_BY_KIND: dict[str, type[SnowlineError]] = {
    str(cls.KIND): cls
    for cls in (Conflict, Aborted, OutcomeUnknown, NotOffered, InvalidArgument, Unavailable, UnknownSession)
}

_BY_CODE: dict[grpc.StatusCode, type[SnowlineError]] = {
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.UNKNOWN: OutcomeUnknown,
    grpc.StatusCode.DEADLINE_EXCEEDED: OutcomeUnknown,
    grpc.StatusCode.UNIMPLEMENTED: NotOffered,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Unavailable,
    grpc.StatusCode.NOT_FOUND: UnknownSession,
}


#: Trailing metadata: (key, value) pairs, values str or bytes.
Metadata = Iterable[Any]


def _metadata_value(metadata: Metadata | None, key: str) -> str | None:
    for item in metadata or ():
        k, v = item[0], item[1]
        if k.lower() == key:
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return None


def from_status(
    code: grpc.StatusCode | None, message: str, metadata: Metadata | None = ()
) -> SnowlineError:
    """The exception for a status ``code`` with ``message`` and trailing ``metadata`` (key, value pairs)."""
    kind = _metadata_value(metadata, ERROR_METADATA)
    cause = _metadata_value(metadata, ABORT_CAUSE_METADATA)
    cls = _BY_KIND.get(kind) if kind else None
    if cls is None:
        # No kind, or one this client does not know: the status code decides (the kind is kept as sent).
        cls = _BY_CODE.get(code, SnowlineError) if code is not None else SnowlineError
    if issubclass(cls, Aborted):
        return cls(message, kind=kind, code=code, cause=cause)
    return cls(message, kind=kind, code=code)


def from_rpc_error(error: grpc.RpcError) -> SnowlineError:
    """The exception for a failed gRPC call (a ``grpc.RpcError`` that is also a ``grpc.Call``)."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else None
    metadata = error.trailing_metadata() if hasattr(error, "trailing_metadata") else ()
    message = details or (code.name if code is not None else str(error))
    return from_status(code, message, metadata)
