"""Against a real cluster whose clients must use TLS (`cluster up --client-tls`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import snowline

if TYPE_CHECKING:
    from conftest import Cluster


@pytest.fixture(scope="module")
def tls_cluster(cluster_factory) -> Cluster:
    return cluster_factory("cure", 1, 1, "--client-tls")


def test_a_tls_cluster_directory_connects_with_its_ca(tls_cluster: Cluster, unique) -> None:
    key = unique("tls")
    with tls_cluster.connect() as client:
        assert client.endpoint.tls
        assert client.endpoint.ca == tls_cluster.dir / "tls" / "ca.pem"
        assert client.endpoint.server_name == f"node-{client.endpoint.node}.snowline"
        client.put(key, "secret")
        assert client.get(key) == "secret"
    # host:port with the CA and the node's certificate name.
    address = tls_cluster.grpc_addresses()[0]
    node = tls_cluster.connect().endpoint.node
    with snowline.connect(
        address, ca=tls_cluster.dir / "tls" / "ca.pem", server_name=f"node-{node}.snowline"
    ) as client:
        assert client.get(key) == "secret"


def test_a_plain_connection_to_a_tls_endpoint_fails(tls_cluster: Cluster) -> None:
    address = tls_cluster.grpc_addresses()[0]
    with snowline.connect(address) as client, pytest.raises(snowline.Unavailable):
        client.info(timeout=5)
