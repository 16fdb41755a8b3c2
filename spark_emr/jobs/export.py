"""Export a topic, or a time range of it, from the cold tier to Parquet, one row per message.

    spark-submit --master local[2] spark_emr/jobs/export.py --bucket tidemq-tier --topic orders --output /tmp/orders
    spark-submit ... export.py --bucket B --prefix tidemq --topic orders --from-ms 1795300000000 --to-ms 1795400000000 \
        --output s3://analytics/orders/        # on EMR (EMRFS writes s3://)
    spark-submit ... export.py --bucket B --topic orders --where "region = 'eu' AND amount > 100" --output /tmp/eu

Arguments: `--bucket`, `--prefix` (default `tidemq`) name the tier (TIDEMQ_TIER_BUCKET / TIDEMQ_TIER_PREFIX);
`--topic`; `--from-ms` / `--to-ms` keep messages stored in [from, to) (ms since the epoch); `--where` keeps the messages
a SQL92 filter over their properties selects, as a subscription's `sql` would (tidemq_protocol.filter: the broker's
own evaluator; an expression that does not parse stops the job before it reads anything); `--output` is where the
Parquet files go, replaced whole by each run (so a run killed midway and run again leaves the same result);
`--dry-run` prints each queue's offset range and what would be read, and writes nothing.

Columns: topic, queue, offset, msg_id, keys (list), tag, properties (map), born_timestamp, store_timestamp
(ms since the epoch), body (binary), for Athena, Spark SQL or DuckDB. Messages are read through the engine's tier
format, every record CRC-checked; only what the tier holds is exported (the hot tier's newest messages are not).
The last line on stdout is the job's summary as JSON.
"""

from __future__ import annotations

import argparse
import sys
import time

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from spark_emr.session import run_job
from spark_emr.tier import TierLocation, queue_messages, tier_queues
from tidemq_protocol.filter import SqlFilter

SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("queue", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("msg_id", StringType(), False),
        StructField("keys", ArrayType(StringType(), False), False),
        StructField("tag", StringType(), True),
        StructField("properties", MapType(StringType(), StringType(), False), False),
        StructField("born_timestamp", LongType(), False),
        StructField("store_timestamp", LongType(), False),
        StructField("body", BinaryType(), False),
    ]
)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bucket", required=True, help="the tier's S3 bucket")
    parser.add_argument("--prefix", default="tidemq", help="the tier's key prefix (default tidemq)")
    parser.add_argument("--topic", required=True, help="the topic to export")
    parser.add_argument("--from-ms", type=int, default=None, help="keep messages stored at or after (ms)")
    parser.add_argument("--to-ms", type=int, default=None, help="keep messages stored before (ms)")
    parser.add_argument("--where", default=None, help="keep the messages this SQL92 filter over properties selects")
    parser.add_argument("--output", required=True, help="where the Parquet files go (replaced whole)")
    parser.add_argument("--dry-run", action="store_true", help="print what would be exported; write nothing")
    return parser.parse_args(argv)


def run(spark, args: argparse.Namespace) -> dict:
    """Export as `args` say; return the summary."""
    began = time.monotonic()
    where = args.where
    if where is not None:
        SqlFilter.parse(where)  # InvalidFilterExpression, naming the position, before anything is read
    location = TierLocation.here(args.bucket, args.prefix)
    queues = tier_queues(location, args.topic)
    print(f"export: {len(queues)} queues of {args.topic!r} in {location.describe()}", file=sys.stderr, flush=True)
    summary = {"job": "export", "topic": args.topic, "tier": location.describe(), "queues_in": len(queues)}
    if where is not None:
        summary["where"] = where
    if args.dry_run:
        summary |= {"dry_run": True, "output": args.output}
        return summary | {"seconds": round(time.monotonic() - began, 3)}
    records, body_bytes = spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0)
    records_read = spark.sparkContext.accumulator(0)
    from_ms, to_ms = args.from_ms, args.to_ms

    def rows(refs):
        selected = SqlFilter.parse(where).accepts if where is not None else None  # parsed where it runs
        for ref in refs:
            for m in queue_messages(location, ref, from_ms, to_ms):
                records_read.add(1)
                if selected is not None and not selected(m):
                    continue
                records.add(1)
                body_bytes.add(len(m.body))
                yield (
                    m.topic,
                    m.queue,
                    m.queue_offset,
                    m.msg_id,
                    list(m.keys),
                    m.tag,
                    m.properties,
                    m.born_timestamp,
                    m.store_timestamp,
                    bytes(m.body),
                )

    refs = spark.sparkContext.parallelize(queues, max(1, len(queues)))
    frame = spark.createDataFrame(refs.mapPartitions(rows), SCHEMA)
    frame.write.mode("overwrite").parquet(args.output)
    print(f"export: wrote {records.value} messages to {args.output}", file=sys.stderr, flush=True)
    return summary | {
        "records_read": records_read.value,
        "records_out": records.value,
        "body_bytes_out": body_bytes.value,
        "output": args.output,
        "seconds": round(time.monotonic() - began, 3),
    }


def main(argv: list[str] | None = None) -> None:
    run_job("export", run, arguments(argv))


if __name__ == "__main__":
    main()
