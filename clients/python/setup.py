"""Build hook: generate the snowline.v1 protobuf and gRPC modules from the committed .proto at build time.

The generated modules (``snowline/v1/snowline_pb2.py``, ``snowline_pb2.pyi``, ``snowline_pb2_grpc.py``) are
never committed. The .proto is found at ``proto/snowline/v1/snowline.proto`` beside this file (an sdist, which
carries a copy) or at ``../../proto/snowline/v1/snowline.proto`` (the repository, where this package lives in
``clients/python``). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTO_REL = Path("snowline") / "v1" / "snowline.proto"
# Where the .proto root may be: an sdist's own copy first, then the repository's.
PROTO_ROOTS = (HERE / "proto", HERE.parent.parent / "proto")


def proto_root() -> Path:
    """The directory holding ``snowline/v1/snowline.proto`` (the import root protoc is given)."""
    for root in PROTO_ROOTS:
        if (root / PROTO_REL).is_file():
            return root
    tried = ", ".join(str(r / PROTO_REL) for r in PROTO_ROOTS)
    raise FileNotFoundError(f"snowline.proto not found (tried {tried})")


def generate(out_dir: Path) -> None:
    """Run grpcio-tools' protoc: ``out_dir/snowline/v1/snowline_pb2{,_grpc}.py`` and the .pyi stub."""
    try:
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - the build requirements install it
        raise RuntimeError("building snowline needs grpcio-tools (a build requirement in pyproject.toml)") from e
    import grpc_tools

    root = proto_root()
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(root / PROTO_REL),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {root / PROTO_REL}")


class BuildPyWithProto(build_py):
    """build_py that first generates the protobuf and gRPC modules into the build tree."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            # `pip install -e`: the package is imported from src/, so generate there (git-ignored).
            generate(HERE / "src")
        else:
            generate(Path(self.build_lib))


class SdistWithProto(sdist):
    """sdist that carries the .proto (under proto/), so a wheel built from the sdist generates the same code."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        dest = Path(base_dir) / "proto" / PROTO_REL
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(proto_root() / PROTO_REL, dest)


class GenerateProto(Command):
    """``python setup.py generate_proto``: generate the modules into src/ (for working on the client)."""

    description = "generate snowline.v1 protobuf/gRPC modules into src/"
    user_options: list = []

    def initialize_options(self) -> None:
        pass

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        generate(HERE / "src")


os.chdir(HERE)
setup(cmdclass={"build_py": BuildPyWithProto, "sdist": SdistWithProto, "generate_proto": GenerateProto})
