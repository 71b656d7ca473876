"""Fixtures: real local snowline clusters, started with the snowline binary and stopped afterwards.

The binary is $SNOWLINE_BIN, else the repository's target/release/snowline or target/debug/snowline (the
newer), else `snowline` on PATH. Without one the cluster tests fail, unless SNOWLINE_ALLOW_SKIP=1, which
skips them with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import snowline

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60.0


def find_binary() -> str | None:
    """The snowline binary to test against, or None."""
    env = os.environ.get("SNOWLINE_BIN")
    if env:
        return env
    built = [REPO / "target" / kind / "snowline" for kind in ("release", "debug")]
    built = [p for p in built if p.is_file() and os.access(p, os.X_OK)]
    if built:
        return str(max(built, key=lambda p: p.stat().st_mtime))
    return shutil.which("snowline")


def _no_binary(reason: str) -> None:
    if os.environ.get("SNOWLINE_ALLOW_SKIP") == "1":
        pytest.skip(f"{reason} (SNOWLINE_ALLOW_SKIP=1)")
    pytest.fail(
        f"{reason}: build it (cargo build -p snowline-cli), or set SNOWLINE_BIN to it; "
        "SNOWLINE_ALLOW_SKIP=1 skips the cluster tests instead",
        pytrace=False,
    )


class Cluster:
    """A local cluster started by `snowline cluster up --background` in a temporary directory."""

    def __init__(self, binary: str, protocol: str, dcs: int, partitions: int, extra: list[str]) -> None:
        self.binary = binary
        self.protocol = protocol
        self.dcs = dcs
        self.partitions = partitions
        self.dir = Path(tempfile.mkdtemp(prefix=f"snowline-py-{protocol}-"))
        args = [
            binary, "cluster", "up",
            "--protocol", protocol,
            "--dcs", str(dcs),
            "--partitions", str(partitions),
            "--dir", str(self.dir),
            "--background",
            *extra,
        ]  # fmt: skip
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            self.down()
            pytest.fail(
                f"`{' '.join(args)}` exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}", pytrace=False
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Wait until every datacenter's gRPC endpoint answers Info."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for dc in range(self.dcs):
            with snowline.connect(self.dir, dc=dc) as client:
                while True:
                    try:
                        client.info(timeout=2.0)
                        break
                    except snowline.SnowlineError as e:
                        if time.monotonic() > deadline:
                            self.down()
                            pytest.fail(f"the {self.protocol} cluster's dc {dc} endpoint never answered: {e}")
                        time.sleep(0.2)

    def connect(self, dc: int = 0, **kwargs: object) -> snowline.Client:
        """A client of datacenter ``dc``'s endpoint."""
        return snowline.connect(self.dir, dc=dc, **kwargs)  # type: ignore[arg-type]

    def grpc_addresses(self, dc: int | None = None) -> list[str]:
        """The `grpc` addresses in cluster.toml (of datacenter ``dc``, or all)."""
        import tomllib

        doc = tomllib.loads((self.dir / "cluster.toml").read_text())
        return [n["grpc"] for n in doc["node"] if "grpc" in n and (dc is None or n.get("dc", 0) == dc)]

    def down(self) -> None:
        subprocess.run(
            [self.binary, "cluster", "down", "--dir", str(self.dir)], capture_output=True, text=True, timeout=60
        )
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def snowline_bin() -> str:
    binary = find_binary()
    if binary is None:
        _no_binary("no snowline binary: not in $SNOWLINE_BIN, target/{release,debug}/, nor PATH")
    assert binary is not None
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        _no_binary(f"the snowline binary {binary} does not exist or is not executable")
    return binary


@pytest.fixture(scope="session")
def cluster_factory(snowline_bin: str) -> Iterator[Callable[..., Cluster]]:
    """``cluster_factory(protocol, dcs, partitions)``: a running cluster, one per set of arguments, shared by
    the whole test session and stopped at its end."""
    clusters: dict[tuple, Cluster] = {}

    def make(protocol: str, dcs: int = 1, partitions: int = 2, *extra: str) -> Cluster:
        key = (protocol, dcs, partitions, extra)
        if key not in clusters:
            clusters[key] = Cluster(snowline_bin, protocol, dcs, partitions, list(extra))
        return clusters[key]

    yield make
    for c in clusters.values():
        c.down()


@pytest.fixture(scope="session")
def causal(cluster_factory: Callable[..., Cluster]) -> Cluster:
    """A causal cluster: cure, 2 datacenters, 2 partitions."""
    return cluster_factory("cure", 2, 2)


@pytest.fixture(params=["occ", "2pl", "ser"], scope="session")
def serializable(request: pytest.FixtureRequest, cluster_factory: Callable[..., Cluster]) -> Cluster:
    """A serializable cluster with interactive transactions, 1 datacenter, 2 partitions: occ (validation at
    commit), 2pl (wound-wait locks) and ser (P-Store, of the Jessy family: certification)."""
    return cluster_factory(request.param, 1, 2)


@pytest.fixture
def unique() -> Callable[[str], str]:
    """``unique(name)``: a key no other test (or run against the same cluster) uses."""
    stamp = f"{os.getpid()}-{time.monotonic_ns()}"
    return lambda name: f"py-{name}-{stamp}"
