"""Against a real causal cluster (cure, 2 datacenters, 2 partitions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
import pytest

import snowline

if TYPE_CHECKING:
    from conftest import Cluster


def test_info_describes_the_cluster_and_the_endpoint(causal: Cluster) -> None:
    for dc in (0, 1):
        with causal.connect(dc) as client:
            info = client.info()
            assert info.protocol == "cure"
            assert info.dcs == 2 and info.partitions == 2
            assert info.dc == dc
            assert info.level, info
            assert info.api_version, info
            assert info.max_value_bytes > 0
            assert info.offers.read_only and info.offers.multi_key_read_only


def test_put_then_get(causal: Cluster, unique) -> None:
    key = unique("put-get")
    with causal.connect() as client:
        version = client.put(key, "v1")
        assert client.get(key) == "v1"
        client.put(key, "v2")
        assert client.get(key) == "v2"
        read = client.get_read(key)
        assert read.value == "v2" and read.key == key
        assert read.version is not None
        if version is not None:
            assert read.version.time >= version.time


def test_get_of_a_missing_key_is_none(causal: Cluster, unique) -> None:
    with causal.connect() as client:
        assert client.get(unique("never-written")) is None


def test_rot_reads_keys_on_every_partition_in_request_order(causal: Cluster, unique) -> None:
    keys = [unique(f"rot-{i}") for i in range(6)]  # six keys: both partitions, with near certainty
    missing = unique("rot-missing")
    with causal.connect() as client:
        for i, k in enumerate(keys):
            client.put(k, f"value-{i}")
        values = client.rot([*keys, missing])
        assert values == [f"value-{i}" for i in range(6)] + [None]
        reads = client.read_only(list(reversed(keys)))
        assert [r.key for r in reads] == list(reversed(keys))


def test_write_only_is_read_back(causal: Cluster, unique) -> None:
    a, b = unique("wo-a"), unique("wo-b")
    with causal.connect() as client:
        if not client.info().offers.write_only_transactions:
            with pytest.raises(snowline.NotOffered):
                client.write_only({a: "1", b: "2"})
            return
        client.write_only({a: "1", b: "2"})
        assert client.rot([a, b]) == ["1", "2"]


def test_a_session_resumed_by_token_in_another_datacenter_reads_its_own_write(causal: Cluster, unique) -> None:
    key = unique("session")
    with causal.connect(0) as writer:
        assert writer.info().dc == 0
        writer.put(key, "mine")
        token = writer.session_token
        assert isinstance(token, bytes) and token
    # A second connection, to the dc-1 endpoint, resumes the session from the token.
    with causal.connect(1, token=token) as reader:
        assert reader.info().dc == 1
        assert reader.get(key) == "mine"
        assert reader.session_token  # the reply's token was kept
    # The same through client.session(token=...) and a host:port target.
    key2 = unique("session-2")
    with causal.connect(0) as writer:
        writer.put(key2, "again")
        token = writer.session_token
    address = causal.grpc_addresses(dc=1)[0]
    with snowline.connect(address) as other, other.session(token=token) as session:
        assert session.get(key2) == "again"


def test_a_call_the_protocol_does_not_offer_raises_not_offered(causal: Cluster, unique) -> None:
    with causal.connect() as client:
        offers = client.info().offers
        assert not (offers.interactive and offers.stored_procedures), "cure should lack one of them"
        if not offers.interactive:
            with pytest.raises(snowline.NotOffered) as e, client.transaction() as t:
                t.put(unique("not-offered"), "x")
            assert e.value.kind == "not-offered" and e.value.code == grpc.StatusCode.UNIMPLEMENTED
        if not offers.stored_procedures:
            with pytest.raises(snowline.NotOffered):
                client.call("rw", [1, unique("np-a"), unique("np-b"), "1"])
        # The session still works.
        client.put(unique("after-not-offered"), "ok")


def test_an_oversized_value_is_an_invalid_argument_and_the_next_call_works(causal: Cluster, unique) -> None:
    key = unique("big")
    with causal.connect() as client:
        limit = client.info().max_value_bytes
        with pytest.raises(snowline.InvalidArgument) as e:
            client.put(key, "x" * (limit + 1))
        assert e.value.kind == "invalid-argument" and e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert client.get(key) is None
        client.put(key, "x" * 100)
        assert client.get(key) == "x" * 100


def test_malformed_requests_get_an_error_and_the_server_keeps_serving(causal: Cluster, unique) -> None:
    with causal.connect() as client:
        with pytest.raises(snowline.InvalidArgument):
            client.rot([])
        # Bytes that do not parse as a GetRequest (a truncated length-delimited field).
        raw = client.channel.unary_unary("/snowline.v1.Snowline/Get", None, None)
        with pytest.raises(grpc.RpcError) as e:
            raw(b"\x12\xff\xff\xff\xff\x0f", timeout=5)
        assert e.value.code() != grpc.StatusCode.OK
        # A method that does not exist.
        with pytest.raises(grpc.RpcError) as e:
            client.channel.unary_unary("/snowline.v1.Snowline/NoSuchMethod", None, None)(b"", timeout=5)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # Still serving.
        key = unique("after-garbage")
        client.put(key, "fine")
        assert client.get(key) == "fine"
        assert client.info().protocol == "cure"


def test_explicit_sessions_and_close(causal: Cluster, unique) -> None:
    key = unique("explicit")
    client = causal.connect()
    with client.session() as s:
        s.put(key, "1")
        assert s.id
        assert s.get(key) == "1"
        assert s.token
    client.close()
    client.close()  # idempotent


def test_a_session_the_endpoint_forgot_is_reopened_from_its_token(causal: Cluster, unique) -> None:
    from snowline.v1 import snowline_pb2 as pb
    from snowline.v1 import snowline_pb2_grpc as pb_grpc

    key = unique("forgotten")
    with causal.connect() as client:
        client.put(key, "kept")
        first = client.default_session.id
        assert first
        # Close it behind the client's back (as the endpoint does to idle sessions).
        pb_grpc.SnowlineStub(client.channel).CloseSession(pb.CloseSessionRequest(id=first), timeout=5)
        assert client.get(key) == "kept"
        assert client.default_session.id not in (None, first)
