"""Generate the gRPC proxy's protobuf modules from RocketMQ's own .proto files (servers/grpc_proxy/protocol/).

    python -m devtools.rocketmq_protos            # regenerate definition_pb2.py and service_pb2.py (make protos)
    python -m devtools.rocketmq_protos --check    # exit 1 if the committed modules are not what generation gives

The .proto files under `protocol/upstream/` are apache/rocketmq-apis' as the npm package `rocketmq-client-nodejs`
ships them, unchanged. Generation renames their proto package (`apache.rocketmq.v2` -> `tidemq.rocketmq.v2`) and the
file they register (`servers/grpc_proxy/protocol/definition.proto`), so that TideMQ's modules and the ones
`rocketmq-python-client` ships can be imported in one process (the protobuf runtime refuses a second definition of a
symbol). The bytes on the wire are the same: a message's package travels nowhere, and the proxy serves the service
under its real name (servers/grpc_proxy/protocol/__init__.py says why this way). grpcio-tools is pinned in the dev
extra, so generation gives the same bytes everywhere.
"""

from __future__ import annotations

import argparse
import importlib.resources
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = Path("servers/grpc_proxy/protocol")
UPSTREAM = ROOT / PROTOCOL / "upstream"
FILES = ("definition.proto", "service.proto")
RENAMES = (
    ("package apache.rocketmq.v2;", "package tidemq.rocketmq.v2;"),
    ('import "apache/rocketmq/v2/definition.proto";', f'import "{PROTOCOL.as_posix()}/definition.proto";'),
)
GENERATED = ("definition_pb2.py", "definition_pb2.pyi", "service_pb2.py", "service_pb2.pyi")


def renamed(text: str) -> str:
    """An upstream file's text with TideMQ's package and import path (each rename must apply: a changed upstream
    file fails here rather than generating modules that clash with the client's)."""
    for old, new in RENAMES:
        text = text.replace(old, new)
    if "package tidemq.rocketmq.v2;" not in text or 'import "apache/' in text:
        raise SystemExit("an upstream .proto changed its package or imports: update devtools/rocketmq_protos.py")
    return text


def generate(out: Path) -> None:
    """Write the generated modules into `out` (flat: definition_pb2.py, service_pb2.py and their .pyi)."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as work:
        source, target = Path(work) / "src", Path(work) / "out"
        (source / PROTOCOL).mkdir(parents=True)
        target.mkdir()
        for name in FILES:
            (source / PROTOCOL / name).write_text(renamed((UPSTREAM / name).read_text()))
        include = importlib.resources.files("grpc_tools") / "_proto"
        arguments = ["protoc", f"-I{source}", f"-I{include}", f"--python_out={target}", f"--pyi_out={target}"]
        if protoc.main([*arguments, *(str(PROTOCOL / name) for name in FILES)]) != 0:
            raise SystemExit("protoc failed")
        for name in GENERATED:
            (out / name).write_bytes((target / PROTOCOL / name).read_bytes())


def differences(against: Path) -> list[str]:
    """The generated modules that differ from those in `against`."""
    with tempfile.TemporaryDirectory() as fresh:
        generate(Path(fresh))
        return [
            name
            for name in GENERATED
            if not (against / name).exists() or (Path(fresh) / name).read_bytes() != (against / name).read_bytes()
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    check = parser.parse_args().check
    if check:
        stale = differences(ROOT / PROTOCOL)
        if stale:
            sys.exit(f"not what generation gives: {', '.join(stale)} (run make protos)")
        return
    generate(ROOT / PROTOCOL)


if __name__ == "__main__":
    main()
