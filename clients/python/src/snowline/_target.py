"""Resolving what :func:`snowline.connect` is given: a cluster directory (or its cluster.toml) or host:port."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

__all__ = ["Endpoint", "node_server_name", "resolve"]


def node_server_name(node_id: int) -> str:
    """The name a node's certificate is issued for (``node-<id>.snowline``): what TLS verifies."""
    return f"node-{node_id}.snowline"


@dataclass(frozen=True)
class Endpoint:
    """Where to connect and how.

    Attributes:
        address: the gRPC ``host:port``.
        tls: whether to use TLS.
        ca: the CA certificate (PEM path) to verify the server with; ``None``: the system's roots.
        server_name: the name the server's certificate must carry (``None``: the host of ``address``).
        node: the node id of the server, when known from a cluster.toml.
        dc: the datacenter of the server, when known from a cluster.toml.
    """

    address: str
    tls: bool = False
    ca: Path | None = None
    server_name: str | None = None
    node: int | None = None
    dc: int | None = None


def _config_path(target: str | os.PathLike[str]) -> Path | None:
    path = Path(target)
    if path.is_dir():
        return path / "cluster.toml"
    if path.is_file() or path.suffix == ".toml":
        return path
    return None


def resolve(
    target: str | os.PathLike[str],
    *,
    dc: int = 0,
    tls: bool | None = None,
    ca: str | os.PathLike[str] | None = None,
    server_name: str | None = None,
) -> Endpoint:
    """The endpoint named by ``target``.

    ``target`` is a cluster directory (or the path of its ``cluster.toml``): the first ``[[node]]`` of
    datacenter ``dc`` with a ``grpc`` entry is chosen; TLS is used when ``[tls] clients = true`` (the
    endpoints then present their node certificates, and serve plain connections otherwise), verified against
    ``[tls] ca`` (unless ``ca`` is given) and the node's certificate name ``node-<id>.snowline``. Otherwise
    ``target`` is ``host:port``; TLS is used when ``tls`` is true or ``ca`` is given.
    """
    config = _config_path(target)
    if config is None:
        address = str(target)
        if ":" not in address:
            raise ConfigError(
                f"{address!r} is neither a cluster directory (no such directory) nor a host:port address"
            )
        use_tls = bool(tls) or (tls is None and ca is not None)
        return Endpoint(address, tls=use_tls, ca=Path(ca) if ca is not None else None, server_name=server_name)

    if not config.is_file():
        raise ConfigError(f"{config}: no such file (is {config.parent} a cluster directory?)")
    try:
        with open(config, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{config}: cannot read it: {e}") from e

    nodes = doc.get("node")
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(f"{config}: no [[node]] entries")
    in_dc = [n for n in nodes if isinstance(n, dict) and n.get("dc", 0) == dc]
    if not in_dc:
        dcs = sorted({n.get("dc", 0) for n in nodes if isinstance(n, dict)})
        raise ConfigError(f"{config}: no node in datacenter {dc} (datacenters: {', '.join(map(str, dcs))})")
    with_grpc = [n for n in in_dc if isinstance(n.get("grpc"), str) and n["grpc"]]
    if not with_grpc:
        ids = ", ".join(str(n.get("id")) for n in in_dc)
        raise ConfigError(
            f"{config}: no node of datacenter {dc} has a `grpc` entry (nodes {ids}): "
            "this cluster serves no gRPC endpoint there (was it started by an older snowline?)"
        )
    node = with_grpc[0]
    node_id = node.get("id")

    tls_section = doc.get("tls") if isinstance(doc.get("tls"), dict) else None
    clients_tls = bool(tls_section and tls_section.get("clients", False))
    use_tls = tls if tls is not None else (clients_tls or ca is not None)
    if tls is False and clients_tls:
        raise ConfigError(f"{config}: [tls] clients = true: this cluster accepts TLS clients only")
    if tls and not clients_tls and ca is None:
        # The gRPC endpoints present the node certificates only when clients must use TLS.
        raise ConfigError(
            f"{config}: TLS asked for, but the cluster's gRPC endpoints serve plain connections "
            "([tls] clients is not true; start it with `snowline cluster up --client-tls`)"
        )
    ca_path: Path | None = Path(ca) if ca is not None else None
    if use_tls and ca_path is None:
        if tls_section is None or not tls_section.get("ca"):
            raise ConfigError(f"{config}: TLS asked for but the config has no [tls] ca to verify the servers")
        ca_path = Path(tls_section["ca"])
        if not ca_path.is_absolute():
            ca_path = config.parent / ca_path
    if server_name is None and use_tls and isinstance(node_id, int):
        server_name = node_server_name(node_id)
    return Endpoint(
        node["grpc"],
        tls=bool(use_tls),
        ca=ca_path,
        server_name=server_name,
        node=node_id if isinstance(node_id, int) else None,
        dc=dc,
    )
