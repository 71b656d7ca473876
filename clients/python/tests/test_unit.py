"""The client alone: error mapping, target resolution, and the calls against an in-process fake endpoint
(a small Python implementation of the snowline.v1 service: sessions, tokens, OCC-validated transactions)."""

from __future__ import annotations

import itertools
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

import snowline
from snowline import errors
from snowline._target import resolve
from snowline.v1 import snowline_pb2 as pb
from snowline.v1 import snowline_pb2_grpc as pb_grpc

# ---------------------------------------------------------------------------------------------------------
# Error mapping.


@pytest.mark.parametrize(
    "kind, code, cls",
    [
        ("conflict", grpc.StatusCode.ABORTED, snowline.Conflict),
        ("aborted", grpc.StatusCode.ABORTED, snowline.Aborted),
        ("outcome-unknown", grpc.StatusCode.UNKNOWN, snowline.OutcomeUnknown),
        ("outcome-unknown", grpc.StatusCode.DEADLINE_EXCEEDED, snowline.OutcomeUnknown),
        ("not-offered", grpc.StatusCode.UNIMPLEMENTED, snowline.NotOffered),
        ("invalid-argument", grpc.StatusCode.INVALID_ARGUMENT, snowline.InvalidArgument),
        ("unavailable", grpc.StatusCode.UNAVAILABLE, snowline.Unavailable),
        ("unavailable", grpc.StatusCode.RESOURCE_EXHAUSTED, snowline.Unavailable),
        ("unknown-session", grpc.StatusCode.NOT_FOUND, snowline.UnknownSession),
    ],
)
def test_the_kind_metadata_picks_the_class(kind: str, code: grpc.StatusCode, cls: type) -> None:
    e = errors.from_status(code, "why", [("snowline-error", kind)])
    assert type(e) is cls
    assert e.kind == kind and e.code == code and e.message == "why"
    assert isinstance(e, snowline.SnowlineError)


def test_an_abort_carries_its_cause_and_conflict_is_a_retryable_abort() -> None:
    e = errors.from_status(
        grpc.StatusCode.ABORTED, "stale read", [("snowline-error", "conflict"), ("snowline-abort-cause", "certification")]
    )
    assert isinstance(e, snowline.Conflict) and isinstance(e, snowline.Aborted)
    assert e.cause == "certification" and e.retryable
    assert "certification" in str(e)
    e = errors.from_status(grpc.StatusCode.ABORTED, "no", [("snowline-error", "aborted"), ("snowline-abort-cause", "user")])
    assert type(e) is snowline.Aborted and e.cause == "user" and not e.retryable


@pytest.mark.parametrize(
    "code, cls, kind",
    [
        (grpc.StatusCode.ABORTED, snowline.Aborted, "aborted"),
        (grpc.StatusCode.UNKNOWN, snowline.OutcomeUnknown, "outcome-unknown"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, snowline.OutcomeUnknown, "outcome-unknown"),
        (grpc.StatusCode.UNIMPLEMENTED, snowline.NotOffered, "not-offered"),
        (grpc.StatusCode.INVALID_ARGUMENT, snowline.InvalidArgument, "invalid-argument"),
        (grpc.StatusCode.UNAVAILABLE, snowline.Unavailable, "unavailable"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, snowline.Unavailable, "unavailable"),
        (grpc.StatusCode.NOT_FOUND, snowline.UnknownSession, "unknown-session"),
        (grpc.StatusCode.INTERNAL, snowline.SnowlineError, None),
    ],
)
def test_without_metadata_the_status_code_decides(code: grpc.StatusCode, cls: type, kind: str | None) -> None:
    e = errors.from_status(code, "m", [])
    assert type(e) is cls and e.kind == kind and e.code == code


def test_an_unknown_kind_falls_back_on_the_code_and_is_kept() -> None:
    e = errors.from_status(grpc.StatusCode.INVALID_ARGUMENT, "m", [("snowline-error", "brand-new")])
    assert type(e) is snowline.InvalidArgument and e.kind == "brand-new"


# ---------------------------------------------------------------------------------------------------------
# Target resolution.

CLUSTER_TOML = """
protocol = "cure"
dcs = 2
partitions = 2
{top}

{tls}

[[node]]
id = 0
addr = "127.0.0.1:7100"
dc = 0
partitions = [0, 1]
{grpc0}

[[node]]
id = 1
addr = "127.0.0.1:7101"
dc = 1
partitions = [0]
grpc = "127.0.0.1:8101"

[[node]]
id = 2
addr = "127.0.0.1:7102"
dc = 1
partitions = [1]
grpc = "127.0.0.1:8102"
"""


def write_cluster(tmp_path: Path, *, grpc0: bool = True, tls: str | None = "false") -> Path:
    tls_section = "" if tls is None else f'[tls]\nca = "tls/ca.pem"\ncert = "x-{{id}}"\nkey = "y-{{id}}"\nclients = {tls}'
    text = CLUSTER_TOML.format(
        top="insecure = true" if tls is None else "",
        tls=tls_section,
        grpc0='grpc = "127.0.0.1:8100"' if grpc0 else "",
    )
    (tmp_path / "cluster.toml").write_text(text)
    return tmp_path


def test_a_cluster_directory_resolves_to_the_first_grpc_node_of_the_datacenter(tmp_path: Path) -> None:
    d = write_cluster(tmp_path)
    assert resolve(d).address == "127.0.0.1:8100"
    e = resolve(str(d), dc=1)
    assert e.address == "127.0.0.1:8101" and e.node == 1 and e.dc == 1 and not e.tls
    assert resolve(d / "cluster.toml", dc=1).address == "127.0.0.1:8101"


def test_a_datacenter_without_a_grpc_endpoint_is_a_clear_error(tmp_path: Path) -> None:
    d = write_cluster(tmp_path, grpc0=False)
    with pytest.raises(snowline.ConfigError, match="no node of datacenter 0 has a `grpc` entry"):
        snowline.connect(d)
    with pytest.raises(snowline.ConfigError, match="no node in datacenter 5"):
        snowline.connect(d, dc=5)
    with pytest.raises(snowline.ConfigError, match="no such file"):
        snowline.connect(tmp_path / "nowhere" / "cluster.toml")
    with pytest.raises(snowline.ConfigError, match="neither a cluster directory"):
        snowline.connect("no-such-dir")


def test_tls_for_clients_uses_the_cluster_ca_and_the_node_name(tmp_path: Path) -> None:
    d = write_cluster(tmp_path, tls="true")
    e = resolve(d, dc=1)
    assert e.tls and e.ca == d / "tls" / "ca.pem" and e.server_name == "node-1.snowline"
    with pytest.raises(snowline.ConfigError, match="TLS clients only"):
        resolve(d, tls=False)
    d2 = write_cluster(tmp_path, tls="false")
    assert not resolve(d2).tls
    with pytest.raises(snowline.ConfigError, match="serve plain connections"):
        resolve(d2, tls=True)
    forced = resolve(d2, tls=True, ca="/elsewhere/ca.pem")  # e.g. behind a TLS proxy with its own CA
    assert forced.tls and forced.server_name == "node-0.snowline"
    assert resolve("10.0.0.1:9", ca="/ca.pem").tls
    assert not resolve("10.0.0.1:9").tls


def test_tls_with_an_unreadable_ca_is_a_config_error(tmp_path: Path) -> None:
    d = write_cluster(tmp_path, tls="true")
    with pytest.raises(snowline.ConfigError, match="cannot read the CA"):
        snowline.connect(d)


# ---------------------------------------------------------------------------------------------------------
# A fake endpoint.


def _fail(context: grpc.ServicerContext, code: grpc.StatusCode, kind: str, message: str, cause: str | None = None):
    md = [("snowline-error", kind)]
    if cause:
        md.append(("snowline-abort-cause", cause))
    context.set_trailing_metadata(tuple(md))
    context.abort(code, message)


class Fake(pb_grpc.SnowlineServicer):
    """An in-memory snowline endpoint: OCC transactions; tokens count each session's calls."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.store: dict[str, tuple[str, int]] = {}
        self.clock = itertools.count(1)
        self.ids = itertools.count(1)
        self.sessions: dict[str, dict] = {}
        self.opened_with: list[bytes] = []
        self.closed: list[str] = []
        self.inject: dict[str, list[tuple[grpc.StatusCode, str, str | None]]] = {}
        self.delay: float = 0.0
        self.address = ""  # set once the server listens

    # helpers
    def _injected(self, method: str, context) -> None:
        if self.delay:
            time.sleep(self.delay)
        queue = self.inject.get(method)
        if queue:
            code, kind, cause = queue.pop(0)
            _fail(context, code, kind, f"injected {kind}", cause)

    def _session(self, ref: pb.SessionRef, context) -> dict:
        s = self.sessions.get(ref.id)
        if s is None:
            _fail(context, grpc.StatusCode.NOT_FOUND, "unknown-session", f"no session {ref.id!r}")
        return s

    def _meta(self, s: dict, version: int | None = None) -> pb.Meta:
        s["calls"] += 1
        m = pb.Meta(rounds=1, session_token=f"tok-{s['id']}-{s['calls']}".encode())
        if version is not None:
            m.version.CopyFrom(pb.Version(time=version, dc=0))
        return m

    def _read(self, key: str) -> pb.ReadResult:
        if key in self.store:
            v, t = self.store[key]
            return pb.ReadResult(key=key, value=v, version=pb.Version(time=t))
        return pb.ReadResult(key=key)

    # the service
    def Info(self, request, context):
        self._injected("Info", context)
        return pb.InfoReply(
            protocol="fake", level="ser", family="fake", dcs=1, partitions=1, dc=0, node=0,
            offers=pb.Offers(read_only=True, multi_key_read_only=True, blind_writes=True, interactive=True),
            max_value_bytes=64, op_timeout_ms=1000, api_version="v1",
        )  # fmt: skip

    def OpenSession(self, request, context):
        self._injected("OpenSession", context)
        with self.lock:
            sid = f"s{next(self.ids)}"
            self.opened_with.append(bytes(request.token))
            self.sessions[sid] = {"id": sid, "calls": 0, "txn": None}
            return pb.OpenSessionReply(id=sid, token=f"tok-{sid}-0".encode())

    def CloseSession(self, request, context):
        with self.lock:
            self.sessions.pop(request.id, None)
            self.closed.append(request.id)
        return pb.CloseSessionReply()

    def Get(self, request, context):
        self._injected("Get", context)
        with self.lock:
            s = self._session(request.session, context)
            r = self._read(request.key)
            reply = pb.GetReply(version=r.version, meta=self._meta(s))
            if r.HasField("value"):
                reply.value = r.value
            return reply

    def Put(self, request, context):
        self._injected("Put", context)
        with self.lock:
            s = self._session(request.session, context)
            if len(request.value) > 64:
                _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "invalid-argument", "value over 64 bytes")
            t = next(self.clock)
            self.store[request.key] = (request.value, t)
            return pb.PutReply(meta=self._meta(s, t))

    def ReadOnly(self, request, context):
        self._injected("ReadOnly", context)
        with self.lock:
            s = self._session(request.session, context)
            if not request.keys:
                _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "invalid-argument", "no keys")
            return pb.ReadOnlyReply(reads=[self._read(k) for k in request.keys], meta=self._meta(s))

    def WriteOnly(self, request, context):
        self._injected("WriteOnly", context)
        with self.lock:
            s = self._session(request.session, context)
            t = next(self.clock)
            for kv in request.writes:
                self.store[kv.key] = (kv.value, t)
            return pb.WriteOnlyReply(meta=self._meta(s, t))

    def Begin(self, request, context):
        self._injected("Begin", context)
        with self.lock:
            s = self._session(request.session, context)
            s["txn"] = {"reads": {}, "writes": {}}
            return pb.BeginReply(meta=self._meta(s))

    def Read(self, request, context):
        self._injected("Read", context)
        with self.lock:
            s = self._session(request.session, context)
            txn = s["txn"]
            out = []
            for k in request.keys:
                if k in txn["writes"]:
                    out.append(pb.ReadResult(key=k, value=txn["writes"][k]))
                else:
                    r = self._read(k)
                    txn["reads"][k] = r.version.time
                    out.append(r)
            return pb.ReadReply(reads=out, meta=self._meta(s))

    def Write(self, request, context):
        self._injected("Write", context)
        with self.lock:
            s = self._session(request.session, context)
            for kv in request.writes:
                s["txn"]["writes"][kv.key] = kv.value
            return pb.WriteReply()

    def Commit(self, request, context):
        self._injected("Commit", context)
        with self.lock:
            s = self._session(request.session, context)
            txn, s["txn"] = s["txn"], None
            for k, t in txn["reads"].items():
                if self.store.get(k, (None, 0))[1] != t:
                    _fail(context, grpc.StatusCode.ABORTED, "conflict", f"{k} changed", "certification")
            t = next(self.clock)
            for k, v in txn["writes"].items():
                self.store[k] = (v, t)
            return pb.CommitReply(meta=self._meta(s, t))

    def Abort(self, request, context):
        with self.lock:
            s = self._session(request.session, context)
            s["txn"] = None
            s["aborts"] = s.get("aborts", 0) + 1
            return pb.AbortReply()

    def Call(self, request, context):
        _fail(context, grpc.StatusCode.UNIMPLEMENTED, "not-offered", "fake offers no stored procedures")


@pytest.fixture
def fake():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    servicer = Fake()
    pb_grpc.add_SnowlineServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.address = f"127.0.0.1:{port}"
    yield servicer
    server.stop(None)


def test_put_get_rot_write_only_and_info(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        info = c.info()
        assert info.protocol == "fake" and info.offers.interactive and not info.offers.stored_procedures
        version = c.put("a", "1")
        assert version is not None and version.time > 0
        assert c.get("a") == "1"
        assert c.get("missing") is None
        assert c.rot(["a", "missing", "a"]) == ["1", None, "1"]
        assert c.write_only({"b": "2", "c": "3"}) is not None
        assert c.write_only([("d", "4")]) is not None
        reads = c.read_only(["b", "c", "d"])
        assert [(r.key, r.value) for r in reads] == [("b", "2"), ("c", "3"), ("d", "4")]
        assert c.last_meta is not None and c.last_meta.rounds == 1
        with pytest.raises(TypeError):
            c.put("a", 1)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            c.rot("ab")


def test_errors_map_and_the_session_goes_on(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        with pytest.raises(snowline.InvalidArgument):
            c.put("big", "x" * 65)
        with pytest.raises(snowline.InvalidArgument):
            c.rot([])
        with pytest.raises(snowline.NotOffered):
            c.call("rw", [1, "a", "b", "c"])
        c.put("ok", "yes")
        assert c.get("ok") == "yes"
        assert len(fake.opened_with) == 1  # one default session throughout


def test_the_default_session_opens_once_and_its_token_follows_the_replies(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        assert fake.opened_with == []
        c.put("k", "v")
        assert fake.opened_with == [b""]
        sid = c.default_session.id
        assert c.session_token == f"tok-{sid}-1".encode()
        c.get("k")
        assert c.session_token == f"tok-{sid}-2".encode()
        token = c.session_token
    assert fake.closed == [sid]
    with snowline.connect(fake.address, token=token) as c2:
        assert c2.session_token == token  # not opened yet: the token it was given
        c2.get("k")
        assert fake.opened_with[-1] == token
        s = c2.session(token=b"other")
        s.get("k")
        assert fake.opened_with[-1] == b"other"
        with pytest.raises(TypeError):
            c2.session(token="str")  # type: ignore[arg-type]


def test_a_forgotten_session_is_reopened_from_its_last_token(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        c.put("k", "v")
        token = c.session_token
        fake.sessions.clear()  # the endpoint forgets it (idle timeout, restart)
        assert c.get("k") == "v"
        assert fake.opened_with == [b"", token]


def test_a_transaction_commits_on_exit(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        c.put("x", "1")
        with c.transaction() as t:
            assert t.get("x") == "1"
            t.put("x", "2")
            t.write({"y": "3"})
            assert t.get_many(["x", "y", "z"]) == ["2", "3", None]
        assert t.state == "committed" and t.commit_version is not None
        assert c.rot(["x", "y"]) == ["2", "3"]


def test_an_exception_aborts_the_transaction_and_propagates(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        c.put("x", "1")
        with pytest.raises(KeyError), c.transaction() as t:
            t.put("x", "2")
            raise KeyError("boom")
        assert t.state == "aborted"
        assert fake.sessions[c.default_session.id]["aborts"] == 1
        assert c.get("x") == "1"


def test_a_conflicting_commit_raises_conflict_with_its_cause(fake: Fake) -> None:
    with snowline.connect(fake.address) as c, snowline.connect(fake.address) as other:
        c.put("x", "1")
        with pytest.raises(snowline.Conflict) as e, c.transaction() as t:
            t.get("x")
            other.put("x", "9")
            t.put("x", "2")
        assert e.value.cause == "certification" and e.value.kind == "conflict"
        assert e.value.code == grpc.StatusCode.ABORTED
        assert t.state == "aborted"
        assert c.get("x") == "9"


def test_run_transaction_retries_conflicts(fake: Fake) -> None:
    with snowline.connect(fake.address) as c, snowline.connect(fake.address) as other:
        c.put("n", "0")
        attempts = 0

        def incr(t: snowline.Transaction) -> int:
            nonlocal attempts
            attempts += 1
            n = int(t.get("n") or 0)
            if attempts < 3:
                other.put("n", str(100 * attempts))
            t.put("n", str(n + 1))
            return n + 1

        assert c.run_transaction(incr, retries=5, backoff=0.001) == 201
        assert attempts == 3 and c.get("n") == "201"


def test_run_transaction_does_not_retry_a_plain_abort(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        fake.inject["Commit"] = [(grpc.StatusCode.ABORTED, "aborted", "user")]
        calls = 0

        def fn(t: snowline.Transaction) -> None:
            nonlocal calls
            calls += 1
            t.put("k", "v")

        with pytest.raises(snowline.Aborted) as e:
            c.run_transaction(fn, retries=5)
        assert type(e.value) is snowline.Aborted and e.value.cause == "user" and calls == 1


def test_a_transaction_cannot_nest_in_its_session_nor_be_used_after_it_ends(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        with c.transaction() as t, pytest.raises(RuntimeError, match="already has an open transaction"):
            c.transaction().begin()
        with pytest.raises(RuntimeError):
            t.get("x")
        with c.session() as s, s.transaction() as t2, c.transaction() as t3:
            t2.put("a", "1")
            t3.put("b", "2")
        assert c.rot(["a", "b"]) == ["1", "2"]


def test_the_per_call_timeout_is_the_deadline(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        c.put("k", "v")
        fake.delay = 0.5
        with pytest.raises(snowline.OutcomeUnknown) as e:
            c.get("k", timeout=0.05)
        assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        fake.delay = 0.0
        assert c.get("k", timeout=5) == "v"
    with snowline.connect(fake.address, timeout=0.05) as c:
        fake.delay = 0.5
        with pytest.raises(snowline.OutcomeUnknown):
            c.info()
        fake.delay = 0.0


def test_injected_kinds_reach_the_caller(fake: Fake) -> None:
    with snowline.connect(fake.address) as c:
        fake.inject["Get"] = [
            (grpc.StatusCode.UNAVAILABLE, "unavailable", None),
            (grpc.StatusCode.RESOURCE_EXHAUSTED, "unavailable", None),
            (grpc.StatusCode.UNKNOWN, "outcome-unknown", None),
        ]
        for cls in (snowline.Unavailable, snowline.Unavailable, snowline.OutcomeUnknown):
            with pytest.raises(cls):
                c.get("k")
        assert c.get("k") is None


def test_an_unreachable_endpoint_is_unavailable() -> None:
    with snowline.connect("127.0.0.1:1") as client, pytest.raises(snowline.Unavailable):
        client.info(timeout=5)


def test_close_closes_every_session_and_is_idempotent(fake: Fake) -> None:
    c = snowline.connect(fake.address)
    c.get("a")
    s = c.session()
    s.get("a")
    ids = {c.default_session.id, s.id}
    c.close()
    c.close()
    assert set(fake.closed) == ids and len(fake.closed) == 2
    assert c.default_session.id is None
