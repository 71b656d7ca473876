"""The snowline client: :func:`connect`, :class:`Client`, :class:`Session` and :class:`Transaction`."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from . import errors
from ._target import Endpoint, resolve
from .errors import Conflict, SnowlineError, UnknownSession
from .v1 import snowline_pb2 as pb
from .v1 import snowline_pb2_grpc as pb_grpc

__all__ = [
    "CallResult",
    "Client",
    "Info",
    "Meta",
    "Offers",
    "Read",
    "Session",
    "Transaction",
    "Version",
    "connect",
]

T = TypeVar("T")

# Let the server decide what is too large (it names the limit); gRPC's own 4 MiB default would refuse first.
_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
# How long close() waits for each CloseSession.
_CLOSE_TIMEOUT_S = 2.0


# ---------------------------------------------------------------------------------------------------------
# Plain data returned by the calls.


@dataclass(frozen=True)
class Version:
    """A commit version: the protocol's timestamp and the datacenter that committed it.

    ``Version(0, 0)`` is the initial version of a key never written.
    """

    time: int
    dc: int

    @classmethod
    def _from_pb(cls, v: pb.Version) -> Version:
        return cls(time=v.time, dc=v.dc)


@dataclass(frozen=True)
class Meta:
    """What the store's metrics know of one call.

    Attributes:
        rounds: rounds of requests to the partitions.
        blocked_ns: time the call waited at the servers (locks, snapshots, stabilisation), in nanoseconds.
        version: the commit version of a write; ``None`` for reads.
        session_token: the session's token after the call (empty for a call without a session).
    """

    rounds: int
    blocked_ns: int
    version: Version | None
    session_token: bytes

    @classmethod
    def _from_pb(cls, m: pb.Meta) -> Meta:
        version = Version._from_pb(m.version) if m.HasField("version") else None
        return cls(rounds=m.rounds, blocked_ns=m.blocked_ns, version=version, session_token=bytes(m.session_token))


@dataclass(frozen=True)
class Read:
    """One key's read.

    Attributes:
        key: the key.
        value: its value; ``None``: never written, as far as the snapshot can see.
        version: the version read (``Version(0, 0)`` for a key never written); ``None`` where the endpoint
            gives none, as for a transaction's read of a key it wrote itself (the buffered value).
    """

    key: str
    value: str | None
    version: Version | None

    @classmethod
    def _from_pb(cls, r: pb.ReadResult) -> Read:
        return cls(
            key=r.key,
            value=r.value if r.HasField("value") else None,
            version=Version._from_pb(r.version) if r.HasField("version") else None,
        )


@dataclass(frozen=True)
class Offers:
    """What the cluster's protocol offers; a call it lacks raises :class:`snowline.NotOffered`."""

    read_only: bool
    multi_key_read_only: bool
    blind_writes: bool
    write_only_transactions: bool
    interactive: bool
    stored_procedures: bool


@dataclass(frozen=True)
class Info:
    """The cluster's protocol, its claimed consistency level, what it offers, and where the endpoint is.

    Attributes:
        protocol: the protocol every server runs (docs/PROTOCOLS.md), e.g. ``"cure"``.
        level: the consistency level it claims (``causal``, ``tcc``, ``ser``, ``strict-ser``, ...).
        family: ``causal``, ``snow``, ``replicated``, ``jessy`` or ``ramp``.
        dcs: datacenters.
        partitions: partitions per datacenter.
        dc: the endpoint's datacenter: its sessions read and write there.
        node: the node id of the server process serving the endpoint.
        offers: what the protocol offers.
        max_value_bytes: the largest value, in bytes, a write may carry.
        op_timeout_ms: how long a call may take before the endpoint reports its outcome unknown.
        api_version: the wire version of the API.
    """

    protocol: str
    level: str
    family: str
    dcs: int
    partitions: int
    dc: int
    node: int
    offers: Offers
    max_value_bytes: int
    op_timeout_ms: int
    api_version: str

    @classmethod
    def _from_pb(cls, r: pb.InfoReply) -> Info:
        o = r.offers
        offers = Offers(
            read_only=o.read_only,
            multi_key_read_only=o.multi_key_read_only,
            blind_writes=o.blind_writes,
            write_only_transactions=o.write_only_transactions,
            interactive=o.interactive,
            stored_procedures=o.stored_procedures,
        )
        return cls(
            protocol=r.protocol,
            level=r.level,
            family=r.family,
            dcs=r.dcs,
            partitions=r.partitions,
            dc=r.dc,
            node=r.node,
            offers=offers,
            max_value_bytes=r.max_value_bytes,
            op_timeout_ms=r.op_timeout_ms,
            api_version=r.api_version,
        )


@dataclass(frozen=True)
class CallResult:
    """What a stored procedure read and wrote, in program order, and the call's :class:`Meta`."""

    reads: list[Read]
    writes: list[tuple[str, str]]
    meta: Meta


# ---------------------------------------------------------------------------------------------------------
# Helpers.


def _check_str(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value


def _keys(keys: Iterable[str]) -> list[str]:
    if isinstance(keys, str):
        raise TypeError("keys must be a list of str, not one str (use get() for one key)")
    return [_check_str("a key", k) for k in keys]


def _writes(writes: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[pb.KeyValue]:
    items = writes.items() if isinstance(writes, Mapping) else writes
    out = []
    for key, value in items:
        out.append(pb.KeyValue(key=_check_str("a key", key), value=_check_str("a value", value)))
    return out


def _call(method: Any, request: Any, timeout: float | None) -> Any:
    """Invoke one unary method, turning a failed status into a :class:`SnowlineError`."""
    try:
        return method(request, timeout=timeout)
    except grpc.RpcError as e:
        raise errors.from_rpc_error(e) from None


# ---------------------------------------------------------------------------------------------------------
# The operations, shared by Client (on its default session) and Session.


class _Operations:
    """The key-value operations; each runs in :meth:`_session`'s session."""

    _stub: pb_grpc.SnowlineStub
    _timeout: float | None

    def _session(self) -> Session:  # pragma: no cover - overridden
        raise NotImplementedError

    def _deadline(self, timeout: float | None) -> float | None:
        return timeout if timeout is not None else self._timeout

    def info(self, *, timeout: float | None = None) -> Info:
        """The cluster's protocol, consistency level, offers, limits, and this endpoint's datacenter and node."""
        return Info._from_pb(_call(self._stub.Info, pb.InfoRequest(), self._deadline(timeout)))

    @property
    def session_token(self) -> bytes:
        """The session's current token (from the last reply's ``Meta.session_token``).

        Hand it to :func:`connect` (``token=``) or :meth:`Client.session` at another endpoint, even in another
        datacenter, to go on with the same session guarantees (e.g. read your own writes). Reading it opens
        the session if no call has yet.
        """
        return self._session().token

    @property
    def last_meta(self) -> Meta | None:
        """The :class:`Meta` of the session's last reply that carried one (rounds, blocked time, version)."""
        return self._session().last_meta

    def get(self, key: str, *, timeout: float | None = None) -> str | None:
        """The value of ``key``, or ``None`` if it was never written (a read-only transaction of one key)."""
        return self.get_read(key, timeout=timeout).value

    def get_read(self, key: str, *, timeout: float | None = None) -> Read:
        """Like :meth:`get`, with the version read."""
        key = _check_str("key", key)
        reply = self._session()._invoke(
            "Get", lambda ref: pb.GetRequest(session=ref, key=key), self._deadline(timeout)
        )
        value = reply.value if reply.HasField("value") else None
        version = Version._from_pb(reply.version) if reply.HasField("version") else None
        return Read(key=key, value=value, version=version)

    def put(self, key: str, value: str, *, timeout: float | None = None) -> Version | None:
        """Write ``value`` to ``key``; returns the commit version (``None`` if the protocol reports none)."""
        key, value = _check_str("key", key), _check_str("value", value)
        reply = self._session()._invoke(
            "Put", lambda ref: pb.PutRequest(session=ref, key=key, value=value), self._deadline(timeout)
        )
        return Meta._from_pb(reply.meta).version

    def rot(self, keys: Iterable[str], *, timeout: float | None = None) -> list[str | None]:
        """A read-only transaction: the values of ``keys`` from one consistent snapshot.

        Returns a list in the order of ``keys`` (``None`` for a key never written), so duplicates and order
        are kept; ``dict(zip(keys, client.rot(keys)))`` makes a mapping. :meth:`read_only` also gives versions.
        """
        return [r.value for r in self.read_only(keys, timeout=timeout)]

    def read_only(self, keys: Iterable[str], *, timeout: float | None = None) -> list[Read]:
        """Like :meth:`rot`, with each key's version: one :class:`Read` per key, in request order."""
        ks = _keys(keys)
        reply = self._session()._invoke(
            "ReadOnly", lambda ref: pb.ReadOnlyRequest(session=ref, keys=ks), self._deadline(timeout)
        )
        return [Read._from_pb(r) for r in reply.reads]

    def write_only(
        self, writes: Mapping[str, str] | Iterable[tuple[str, str]], *, timeout: float | None = None
    ) -> Version | None:
        """A write-only transaction: every write of ``writes`` (a mapping or ``(key, value)`` pairs) becomes
        visible atomically, or none does. Returns the commit version (``None`` if the protocol reports none)."""
        kvs = _writes(writes)
        reply = self._session()._invoke(
            "WriteOnly", lambda ref: pb.WriteOnlyRequest(session=ref, writes=kvs), self._deadline(timeout)
        )
        return Meta._from_pb(reply.meta).version

    def call(
        self, procedure: str, args: Sequence[str | int] = (), *, timeout: float | None = None
    ) -> CallResult:
        """Run the registered stored procedure ``procedure`` with ``args`` (``rw`` and the TPC-C ones; an
        unknown name raises :class:`snowline.InvalidArgument` listing them).

        For example ``client.call("rw", [1, "a", "b", "2"])`` reads ``a`` and writes ``b = "2"``. Integers
        in ``args`` are passed as their decimal string.
        """
        procedure = _check_str("procedure", procedure)
        if isinstance(args, str):
            raise TypeError("args must be a list, not one str")
        str_args = [a if isinstance(a, str) else str(int(a)) for a in args]
        reply = self._session()._invoke(
            "Call",
            lambda ref: pb.CallRequest(session=ref, procedure=procedure, args=str_args),
            self._deadline(timeout),
        )
        return CallResult(
            reads=[Read._from_pb(r) for r in reply.reads],
            writes=[(kv.key, kv.value) for kv in reply.writes],
            meta=Meta._from_pb(reply.meta),
        )

    def transaction(self, *, timeout: float | None = None) -> Transaction:
        """An interactive read-write transaction, used as a context manager::

            with client.transaction() as t:
                balance = int(t.get("alice") or 0)
                t.put("alice", str(balance - 10))

        It begins on entry and commits when the block ends without an exception; commit raises
        :class:`snowline.Conflict` (retryable) or :class:`snowline.Aborted` if the transaction aborted. An
        exception inside the block aborts it and propagates. ``timeout`` applies to each call it makes.
        A session has at most one open transaction.
        """
        return Transaction(self._session(), self._deadline(timeout))

    def run_transaction(
        self,
        fn: Callable[[Transaction], T],
        *,
        retries: int = 10,
        backoff: float = 0.01,
        max_backoff: float = 1.0,
        timeout: float | None = None,
    ) -> T:
        """Run ``fn(t)`` in a transaction and commit it, running it again when it aborts with
        :class:`snowline.Conflict`, up to ``retries`` more times (then that Conflict propagates).

        ``fn`` may run several times, so it should have no other side effects. Between attempts it sleeps
        ``backoff * 2**attempt`` seconds (at most ``max_backoff``), jittered. Returns what the committed
        attempt's ``fn`` returned. Other errors (:class:`snowline.Aborted` for a non-retryable cause,
        :class:`snowline.OutcomeUnknown`, ...) propagate at once.
        """
        if retries < 0:
            raise ValueError("retries must be >= 0")
        attempt = 0
        while True:
            try:
                with self.transaction(timeout=timeout) as t:
                    return fn(t)
            except Conflict:
                if attempt >= retries:
                    raise
                delay = min(max_backoff, backoff * (2**attempt))
                time.sleep(delay * random.uniform(0.5, 1.5))
                attempt += 1


# ---------------------------------------------------------------------------------------------------------
# Sessions and transactions.


class Session(_Operations):
    """A session at one endpoint: the protocol's session guarantees (read your writes, monotonic reads...)
    hold across its calls.

    It opens lazily, on its first call (``OpenSession``, resuming from ``token`` if one was given), and keeps
    the token of each reply (:attr:`token`). If the endpoint has forgotten it (an idle session closes on
    its own), a call outside a transaction reopens it from the last token and is retried once. Use it as a
    context manager, or :meth:`close` it. Not for concurrent use by several threads during a transaction.
    """

    def __init__(self, stub: pb_grpc.SnowlineStub, *, token: bytes = b"", timeout: float | None = None) -> None:
        if not isinstance(token, (bytes, bytearray)):
            raise TypeError(f"token must be bytes, not {type(token).__name__}")
        self._stub = stub
        self._timeout = timeout
        self._id: str | None = None
        self._token = bytes(token)
        self._lock = threading.Lock()
        self._in_transaction = False
        self._closed = False
        self._last_meta: Meta | None = None

    def _session(self) -> Session:
        return self

    @property
    def id(self) -> str | None:
        """The session's id at the endpoint, or ``None`` before it opened."""
        return self._id

    @property
    def token(self) -> bytes:
        """The session's current token (opening the session first if it has not been)."""
        if self._id is None and not self._token:
            self._open(self._timeout)
        return self._token

    @property
    def last_meta(self) -> Meta | None:
        """The :class:`Meta` of the session's last reply that carried one."""
        return self._last_meta

    def _open(self, timeout: float | None, *, stale: str | None = None) -> str:
        """The session's id, opening it first if it is not open, or if its id is ``stale`` (forgotten by the
        endpoint; another thread may have reopened it already)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the session is closed")
            if self._id is None or self._id == stale:
                reply = _call(self._stub.OpenSession, pb.OpenSessionRequest(token=self._token), timeout)
                self._id = reply.id
                if reply.token:
                    self._token = bytes(reply.token)
            return self._id

    def _note(self, reply: Any) -> None:
        if "meta" in reply.DESCRIPTOR.fields_by_name and reply.HasField("meta"):
            meta = Meta._from_pb(reply.meta)
            self._last_meta = meta
            if meta.session_token:
                self._token = meta.session_token

    def _invoke(self, method: str, make: Callable[[pb.SessionRef], Any], timeout: float | None) -> Any:
        """Run ``method`` in this session (opening it first); keep the reply's token."""
        session_id = self._id if self._id is not None else self._open(timeout)
        try:
            reply = _call(getattr(self._stub, method), make(pb.SessionRef(id=session_id)), timeout)
        except UnknownSession:
            if self._in_transaction:
                raise
            # The endpoint forgot the session (idle, or restarted): reopen it from its last token, once.
            session_id = self._open(timeout, stale=session_id)
            reply = _call(getattr(self._stub, method), make(pb.SessionRef(id=session_id)), timeout)
        self._note(reply)
        return reply

    def close(self, *, timeout: float | None = _CLOSE_TIMEOUT_S) -> None:
        """Close the session at the endpoint (an open transaction in it aborts). Idempotent; errors are
        ignored, since the endpoint closes idle sessions on its own."""
        with self._lock:
            session_id, self._id, self._closed = self._id, None, True
        if session_id:
            try:
                _call(self._stub.CloseSession, pb.CloseSessionRequest(id=session_id), timeout)
            except SnowlineError:
                pass

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Transaction:
    """An interactive read-write transaction in a session (see :meth:`Client.transaction`).

    Reads go to the store (a read of a key this transaction wrote returns the buffered value); writes are
    buffered at the endpoint and sent with the commit.
    """

    def __init__(self, session: Session, timeout: float | None) -> None:
        self._session = session
        self._timeout = timeout
        self._state = "new"  # new -> open -> committed | aborted | unknown
        self.commit_version: Version | None = None
        self.meta: Meta | None = None

    @property
    def state(self) -> str:
        """``"new"``, ``"open"``, ``"committed"``, ``"aborted"``, or ``"unknown"`` (the commit raised
        :class:`snowline.OutcomeUnknown`: it may or may not have committed)."""
        return self._state

    def begin(self) -> Transaction:
        """Begin the transaction (``with`` does it)."""
        if self._state != "new":
            raise RuntimeError(f"the transaction is {self._state}; it can begin once")
        if self._session._in_transaction:
            raise RuntimeError("this session already has an open transaction")
        self._session._invoke("Begin", lambda ref: pb.BeginRequest(session=ref), self._timeout)
        self._session._in_transaction = True
        self._state = "open"
        return self

    def _check_open(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"the transaction is {self._state}, not open")

    def _run(self, method: str, make: Callable[[pb.SessionRef], Any]) -> Any:
        self._check_open()
        try:
            return self._session._invoke(method, make, self._timeout)
        except (errors.Aborted, UnknownSession):
            # The server aborted the transaction (e.g. a read that conflicted), or forgot its session: over.
            self._finish("aborted")
            raise

    def get(self, key: str) -> str | None:
        """The value of ``key`` in this transaction (``None``: never written)."""
        return self.read([_check_str("key", key)])[0].value

    def get_many(self, keys: Iterable[str]) -> list[str | None]:
        """The values of ``keys``, in order (``None`` for a key never written)."""
        return [r.value for r in self.read(keys)]

    def read(self, keys: Iterable[str]) -> list[Read]:
        """The reads of ``keys`` (values and versions), in order."""
        ks = _keys(keys)
        reply = self._run("Read", lambda ref: pb.ReadRequest(session=ref, keys=ks))
        return [Read._from_pb(r) for r in reply.reads]

    def put(self, key: str, value: str) -> None:
        """Write ``value`` to ``key`` (buffered until the commit)."""
        self.write([(_check_str("key", key), _check_str("value", value))])

    def write(self, writes: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """Write several keys (a mapping or ``(key, value)`` pairs), buffered until the commit."""
        kvs = _writes(writes)
        self._run("Write", lambda ref: pb.WriteRequest(session=ref, writes=kvs))

    def commit(self) -> Version | None:
        """Commit; returns the commit version (``None`` if the protocol reports none, e.g. read-only).

        Raises :class:`snowline.Conflict` or :class:`snowline.Aborted` if it aborted (it had no effect), and
        :class:`snowline.OutcomeUnknown` if it may or may not have committed.
        """
        self._check_open()
        try:
            reply = self._session._invoke("Commit", lambda ref: pb.CommitRequest(session=ref), self._timeout)
        except errors.OutcomeUnknown:
            self._finish("unknown")
            raise
        except SnowlineError:
            self._finish("aborted")  # the endpoint ends the transaction whatever the commit's error
            raise
        self._finish("committed")
        self.meta = Meta._from_pb(reply.meta)
        self.commit_version = self.meta.version
        return self.commit_version

    def abort(self) -> None:
        """Abort: nothing the transaction wrote takes effect. A no-op once it is over."""
        if self._state != "open":
            return
        self._finish("aborted")
        self._session._invoke("Abort", lambda ref: pb.AbortRequest(session=ref), self._timeout)

    def _finish(self, state: str) -> None:
        self._state = state
        self._session._in_transaction = False

    def __enter__(self) -> Transaction:
        return self.begin()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self._state != "open":
            return
        if exc_type is None:
            self.commit()
            return
        try:
            self.abort()
        except SnowlineError:
            pass  # the original exception matters more; the endpoint drops the transaction anyway


# ---------------------------------------------------------------------------------------------------------
# The client.


class Client(_Operations):
    """A connection to one snowline gRPC endpoint, with a default session used by every call.

    Made by :func:`connect`. The default session opens on the first call (resuming ``token`` if given);
    :meth:`session` opens more. Use it as a context manager, or :meth:`close` it.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        endpoint: Endpoint,
        *,
        token: bytes | None = None,
        timeout: float | None = None,
    ) -> None:
        self._channel = channel
        self._stub = pb_grpc.SnowlineStub(channel)  # type: ignore[no-untyped-call]
        self._timeout = timeout
        self.endpoint = endpoint
        self._default = Session(self._stub, token=token or b"", timeout=timeout)
        self._sessions: list[Session] = [self._default]

    def _session(self) -> Session:
        return self._default

    @property
    def address(self) -> str:
        """The ``host:port`` of the endpoint."""
        return self.endpoint.address

    @property
    def default_session(self) -> Session:
        """The session every call of this client runs in."""
        return self._default

    @property
    def channel(self) -> grpc.Channel:
        """The underlying gRPC channel (for raw calls)."""
        return self._channel

    def session(self, token: bytes | None = None) -> Session:
        """Another session on this connection: fresh, or resumed from ``token`` (a session's token from any
        endpoint of the cluster). It opens on its first call; :meth:`close` closes it too."""
        s = Session(self._stub, token=token or b"", timeout=self._timeout)
        self._sessions.append(s)
        return s

    def close(self) -> None:
        """Close the sessions this client opened and the connection. Idempotent."""
        sessions, self._sessions = self._sessions, []
        for s in sessions:
            s.close()
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        tls = ", tls" if self.endpoint.tls else ""
        return f"<snowline.Client {self.endpoint.address}{tls}>"


def connect(
    target: str | os.PathLike[str],
    *,
    dc: int = 0,
    token: bytes | None = None,
    timeout: float | None = None,
    tls: bool | None = None,
    ca: str | os.PathLike[str] | None = None,
    server_name: str | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> Client:
    """Connect to a snowline cluster.

    Args:
        target: a cluster directory (as ``snowline cluster up --dir DIR`` made; or its ``cluster.toml``),
            whose first node in datacenter ``dc`` with a ``grpc`` entry is used; or a ``host:port``.
        dc: with a cluster directory, the datacenter to connect in.
        token: a session token (:attr:`Client.session_token` of another client) to resume that session.
        timeout: the default deadline of each call, in seconds (``None``: none); every call also takes
            ``timeout=``.
        tls: use TLS. ``None``: with a cluster directory, when its config says ``[tls] clients = true``;
            with ``host:port``, when ``ca`` is given.
        ca: the CA certificate (PEM file) to verify the server against; with a cluster directory, its
            ``[tls] ca`` by default; with ``host:port``, the system's roots by default.
        server_name: the name the server's certificate must carry; with a cluster directory,
            ``node-<id>.snowline`` (as the cluster's certificates are issued).
        options: extra gRPC channel options.

    The connection is made lazily: an unreachable endpoint raises :class:`snowline.Unavailable` on the
    first call.
    """
    endpoint = resolve(target, dc=dc, tls=tls, ca=ca, server_name=server_name)
    opts: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ]
    if endpoint.tls:
        root = None
        if endpoint.ca is not None:
            try:
                root = endpoint.ca.read_bytes()
            except OSError as e:
                raise errors.ConfigError(f"cannot read the CA certificate {endpoint.ca}: {e}") from e
        if endpoint.server_name:
            opts.append(("grpc.ssl_target_name_override", endpoint.server_name))
        opts.extend(options)
        channel = grpc.secure_channel(
            endpoint.address, grpc.ssl_channel_credentials(root_certificates=root), options=opts
        )
    else:
        opts.extend(options)
        channel = grpc.insecure_channel(endpoint.address, options=opts)
    return Client(channel, endpoint, token=token, timeout=timeout)
