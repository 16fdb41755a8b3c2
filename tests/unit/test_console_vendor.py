"""The console's vendored front-end files are the ones devtools/vendor_console.py fetched: each matches its checksum,
every vendored file is listed, and the console serves nothing it did not vendor or write itself."""

from __future__ import annotations

from devtools.vendor_console import CHECKSUMS, PACKAGES, STATIC, read_checksums, sha256
from functions.console import static


def test_every_vendored_file_matches_its_checksum():
    sums = read_checksums()
    vendored = {name for package in PACKAGES for name in package.files.values()}
    assert set(sums) == vendored
    for name, digest in sums.items():
        assert sha256(STATIC / name) == digest, f"{name} changed: run `python -m devtools.vendor_console`"


def test_the_checksum_file_names_each_file_s_package_and_pinned_version():
    lines = [line.split() for line in CHECKSUMS.read_text().splitlines() if not line.startswith("#")]
    assert {(name, spec) for _, name, spec in lines} == {
        (name, f"{package.name}@{package.version}") for package in PACKAGES for name in package.files.values()
    }


def test_static_files_are_served_with_their_content_types_and_nothing_else():
    assert static.serve("htmx.min.js").content_type.startswith("text/javascript")
    assert static.serve("pico.min.css").content_type.startswith("text/css")
    assert static.serve("vendor.sha256").status == 404
    assert static.serve("../handler.py").status == 404
