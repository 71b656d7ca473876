"""snowline: the Python client of snowline, a sharded geo-replicated transactional key-value store.

Quick start::

    import snowline

    with snowline.connect("/tmp/sl") as client:        # a cluster directory, or "host:port"
        client.put("greeting", "hello")
        assert client.get("greeting") == "hello"
        with client.transaction() as t:                 # protocols that offer interactive transactions
            t.put("counter", str(int(t.get("counter") or 0) + 1))

See :func:`connect`, :class:`Client` and the exceptions in :mod:`snowline.errors`.
"""

from .client import (
    CallResult,
    Client,
    Info,
    Meta,
    Offers,
    Read,
    Session,
    Transaction,
    Version,
    connect,
)
from .errors import (
    Aborted,
    ConfigError,
    Conflict,
    InvalidArgument,
    NotOffered,
    OutcomeUnknown,
    SnowlineError,
    Unavailable,
    UnknownSession,
)

__version__ = "0.1.0"

__all__ = [
    "Aborted",
    "CallResult",
    "Client",
    "ConfigError",
    "Conflict",
    "Info",
    "InvalidArgument",
    "Meta",
    "NotOffered",
    "Offers",
    "OutcomeUnknown",
    "Read",
    "Session",
    "SnowlineError",
    "Transaction",
    "Unavailable",
    "UnknownSession",
    "Version",
    "connect",
]
