"""The serverless backend still writes its golden segment file (tests/golden/README.md) byte for byte: the same
puts, each queue's records together with offsets relative to the batch, in one file of the writer's own. Its
readers are pinned in tests/unit/test_golden_formats.py."""

from __future__ import annotations

import uuid

from ..golden.make_golden import GOLDEN, SERVERLESS_SEGMENT, serverless_segment


def test_serverless_segment_is_what_the_serverless_backend_writes(tmp_path, aws_env):
    written = serverless_segment(tmp_path, tables=f"golden{uuid.uuid4().hex[:8]}")
    assert written == (GOLDEN / SERVERLESS_SEGMENT).read_bytes()
