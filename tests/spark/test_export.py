"""The export job on real PySpark local[2] against a moto server over HTTP: Parquet read back holds every message
of the range with its fields (or of what a SQL92 filter selects), a rerun gives the same result, and `spark-submit`
runs the entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from spark_emr.jobs import export
from tidemq_protocol.errors import InvalidFilterExpression
from tidemq_protocol.filter import SqlFilter
from tidemq_protocol.message import Message
from tidemq_protocol.record import property_map
from tidemq_store import TopicConfig

from ..tier_reads import read_all
from .processes import kill_at


@pytest.fixture
def tiered_topic(aws_env, open_test_store):
    """Topic `orders` (3 queues) in a fresh bucket, uploaded: messages of every shape, in two phases a
    millisecond boundary apart; returns (bucket, boundary_ms, expected rows by phase)."""
    bucket = f"export-{uuid.uuid4().hex[:10]}"
    store = open_test_store(tier="s3", tier_bucket=bucket, tier_upload_age_ms=3_600_000)
    store.create_topic(TopicConfig(name="orders", queues=3))
    for b in range(6):
        store.put(
            "orders",
            [
                Message(
                    os.urandom(5 + (b * 31 + i) % 300),
                    queue=(b + i) % 3,
                    keys=(f"k{b}-{i}", "shared") if i % 2 else (),
                    tag="A" if i % 3 == 0 else None,
                    properties={"batch": str(b)} if i % 4 == 0 else {},
                )
                for i in range(20)
            ],
        )
        if b == 2:  # the second phase is stored at least a millisecond later
            boundary = max(m.store_timestamp for q in range(3) for m in store.get("orders", q, 0, 1000).messages) + 1
            time.sleep(0.005)
    assert store.upload_now("orders") > 0
    rows = {
        (queue, offset): (msg_id, list(keys), tag, props, born, stored, body)
        for queue in range(3)
        for msg_id, offset, body, keys, tag, props, born, stored in read_all(store, "orders", queue)
    }
    return bucket, boundary, rows


def exported(path: Path) -> dict:
    table = pq.read_table(path).to_pylist()
    return {
        (row["queue"], row["offset"]): (
            row["msg_id"],
            row["keys"],
            row["tag"],
            dict(row["properties"]),
            row["born_timestamp"],
            row["store_timestamp"],
            row["body"],
        )
        for row in table
        if row["topic"] == "orders"
    }


def test_export_writes_every_message_with_its_fields_and_a_rerun_gives_the_same(spark, tiered_topic, tmp_path):
    bucket, _, expected = tiered_topic
    args = export.arguments(["--bucket", bucket, "--topic", "orders", "--output", str(tmp_path / "out")])
    summary = export.run(spark, args)
    assert summary["records_out"] == len(expected) and summary["queues_in"] == 3
    assert exported(tmp_path / "out") == expected
    export.run(spark, args)  # run again over the same output: replaced, not appended
    assert exported(tmp_path / "out") == expected


def test_export_of_a_time_range_keeps_what_was_stored_in_it(spark, tiered_topic, tmp_path):
    bucket, boundary, expected = tiered_topic
    args = ["--bucket", bucket, "--topic", "orders", "--from-ms", str(boundary), "--output", str(tmp_path / "late")]
    export.run(spark, export.arguments(args))
    late = {key: row for key, row in expected.items() if row[5] >= boundary}
    assert 0 < len(late) < len(expected)
    assert exported(tmp_path / "late") == late


def test_a_dry_run_writes_nothing(spark, tiered_topic, tmp_path):
    bucket, _, _ = tiered_topic
    args = ["--bucket", bucket, "--topic", "orders", "--output", str(tmp_path / "none"), "--dry-run"]
    summary = export.run(spark, export.arguments(args))
    assert summary["dry_run"] is True and summary["queues_in"] == 3
    assert not (tmp_path / "none").exists()


def test_spark_submit_runs_the_entry_point_and_prints_its_summary(tiered_topic, aws_env, tmp_path):
    """`python -m spark_emr run` is spark-submit --master local[2] of the job's file, as on EMR."""
    bucket, _, expected = tiered_topic
    command = [sys.executable, "-m", "spark_emr", "run", "export", "--bucket", bucket, "--topic", "orders"]
    output = ["--output", str(tmp_path / "submitted")]
    done = subprocess.run([*command, *output], env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["records_out"] == len(expected)
    assert exported(tmp_path / "submitted") == expected


@pytest.mark.long
def test_an_export_killed_midway_several_times_then_run_again_leaves_every_message_once(
    tiered_topic, aws_env, tmp_path
):
    bucket, _, expected = tiered_topic
    output = tmp_path / "killed"
    command = [sys.executable, "-m", "spark_emr", "run", "export", "--bucket", bucket, "--topic", "orders"]
    command += ["--output", str(output)]
    for stage, after_s in ((None, 1.0), ("export: 3 queues", 0.0), ("export: 3 queues", 1.5)):  # JVM, listing, tasks
        kill_at(command, stage, after_s)
    done = subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert exported(output) == expected


def test_export_where_keeps_what_the_sql92_filter_selects_as_the_broker_would(spark, tiered_topic, tmp_path):
    bucket, _, expected = tiered_topic
    where = "batch IN ('1', '4') OR TAGS = 'A' AND KEYS CONTAINS 'shared'"
    args = ["--bucket", bucket, "--topic", "orders", "--where", where, "--output", str(tmp_path / "some")]
    summary = export.run(spark, export.arguments(args))
    sql = SqlFilter.parse(where)
    kept = {key: row for key, row in expected.items() if sql.selects(property_map(tuple(row[1]), row[2], row[3]))}
    assert 0 < len(kept) < len(expected) and summary["where"] == where
    assert (summary["records_read"], summary["records_out"]) == (len(expected), len(kept))
    assert exported(tmp_path / "some") == kept


def test_export_where_refuses_an_expression_that_does_not_parse_before_reading(spark, tiered_topic, tmp_path):
    bucket, _, _ = tiered_topic
    args = ["--bucket", bucket, "--topic", "orders", "--where", "batch = ", "--output", str(tmp_path / "no")]
    with pytest.raises(InvalidFilterExpression, match="at position 8"):
        export.run(spark, export.arguments(args))
    assert not (tmp_path / "no").exists()
