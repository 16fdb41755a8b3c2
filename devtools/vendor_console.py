"""Vendor the console's front-end files from their npm packages, at pinned versions, with a checksum file.

    .venv/bin/python -m devtools.vendor_console      # needs npm (only here: nothing at run time needs node or a CDN)

Each package is fetched with `npm pack <name>@<version>` into a temporary directory, and the files the console
serves are copied from its tarball into functions/console/static/, where `vendor.sha256` records each file's
SHA-256, its package and version (tests/unit/test_console_vendor.py checks the files against it). To upgrade, change
a version in PACKAGES, run this, look at the diff and run the console's browser test.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

STATIC = Path(__file__).parents[1] / "functions" / "console" / "static"
CHECKSUMS = STATIC / "vendor.sha256"


@dataclass(frozen=True)
class VendoredPackage:
    """An npm package at a pinned version, and the files of its tarball the console serves (tarball path: name)."""

    name: str
    version: str
    files: dict[str, str]


PACKAGES = (
    VendoredPackage("htmx.org", "2.0.11", {"package/dist/htmx.min.js": "htmx.min.js"}),
    VendoredPackage("@picocss/pico", "2.1.1", {"package/css/pico.min.css": "pico.min.css"}),
    VendoredPackage(
        "uplot",
        "1.6.32",
        {"package/dist/uPlot.iife.min.js": "uPlot.iife.min.js", "package/dist/uPlot.min.css": "uPlot.min.css"},
    ),
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_checksums(path: Path = CHECKSUMS) -> dict[str, str]:
    """The vendored files' SHA-256 by file name, from `vendor.sha256` (`<sha256>  <file>  <package>@<version>`)."""
    sums = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            digest, name, *_ = line.split()
            sums[name] = digest
    return sums


def vendor(static: Path = STATIC) -> list[str]:
    """Fetch every package, copy its files into `static`, write the checksum file; its lines."""
    lines = ["# written by devtools/vendor_console.py: <sha256>  <file>  <package>@<version>"]
    with tempfile.TemporaryDirectory() as scratch:
        for package in PACKAGES:
            spec = f"{package.name}@{package.version}"
            packed = subprocess.run(
                ["npm", "pack", spec, "--silent", "--pack-destination", scratch],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()[-1]
            with tarfile.open(Path(scratch) / packed) as tarball:
                for member, name in package.files.items():
                    extracted = tarball.extractfile(member)
                    if extracted is None:
                        raise RuntimeError(f"{spec} has no file {member}")
                    (static / name).write_bytes(extracted.read())
                    lines.append(f"{sha256(static / name)}  {name}  {spec}")
    (static / CHECKSUMS.name).write_text("\n".join(lines) + "\n")
    return lines


if __name__ == "__main__":
    print("\n".join(vendor()))
