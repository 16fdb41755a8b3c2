"""bench/console.py runs, at a tiny size, to its end: every page answers (the bench stops at a page that does not),
one line per page with its server times, and the browser's scan stops at its bound and says where to continue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "console.py"


def test_the_console_bench_prints_every_page_and_the_scan_stopping_at_its_bound():
    arguments = ["--topics", "60", "--groups", "6", "--messages", "400", "--repeat", "2", "--scan-limit", "150"]
    run = subprocess.run([sys.executable, str(BENCH), *arguments], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["bench"] == "console_seed" and lines[0]["topics"] == 60
    pages = [line for line in lines if line["bench"] == "console"]
    assert {"overview", "topics", "topic", "groups", "group", "messages_sql_filter", "dead_letters", "users"} <= {
        line["page"] for line in pages
    }
    assert all(line["page_server_ms_p95"] >= line["page_server_ms_p50"] > 0 for line in pages)
    (scan,) = [line for line in lines if line["bench"] == "console_scan"]
    assert (scan["scanned"], scan["queue_size"], scan["stopped_at_bound"], scan["continue_from"]) == (
        150,
        400,
        True,
        150,
    )
