"""The Spark compaction job on local[2] against one Python process doing the same work on the same data.

Prints one JSON line per run, a baseline line and then a Spark line for each kind of compaction:
  {"bench": "spark_compaction", "compaction": "segment"|"key", "mode": "baseline"|"spark", "records": ...,
   "bytes": ..., "seconds": ..., "records_per_s": ..., "mb_per_s": ...,      (MB: 10^6 bytes read)
   "speedup_vs_baseline": ...}     (Spark lines only: the baseline's seconds / Spark's, same data, same run;
                                    target >= 1.5 on local[2])
with where the CPU went meanwhile: "own_cpu_s" (this process: the baseline's work, or the Spark driver),
"spark_cpu_s" (the Spark JVM and its Python workers, this process's other descendants), "s3_server_cpu_s" (the
moto server process), "other_cpu_s" (every other process on the machine: the machine is shared, and a run that
finds its second core busy cannot use it), and the settings.

The data, built once: a serverless backend (DynamoDB and S3 on a moto server over HTTP) with a topic of Q
queues per kind of compaction, `segments` (cleanup.policy DELETE) and `keyed` (cleanup.policy=COMPACTION),
each given the same N messages of S bytes, produced in batches of B to one queue, each with one key of K (a key
always goes to one queue: key % Q). The engine's own maintenance run then moves them to the S3 tier, an upload of about
--upload-bytes per queue at a time (the engine's default: 4 MiB, a few thousand messages), each upload one
commit-log object and one ConsumeQueue object: the many small objects compaction exists to merge.

Each run gets a fresh server-side copy of one topic's tier objects in a bucket of its own (compaction rewrites a
queue, so no run sees another's work), and compacts it as `spark_emr/jobs/compaction.py` would, with the same
settings (--target-bytes, --grace-s, --now-ms), replaced objects deleted in the run (--grace-s 0):
  baseline   this process: the job's plan for the topic, then `compact_queue` for each queue in turn
  spark      the job itself, `compaction.run` in a Spark session on --master (one task per queue); the session
             is started before the clock starts, and its Python workers have imported the job's modules, as the
             baseline's process has ("session_start_s", "workers_start_s" on the Spark lines)
With --repeat R, each repeat runs both again on fresh copies, the baseline first in odd repeats and Spark first
in even ones. Full size takes about 10 minutes (4 of them building the data); compare the two modes on a
machine otherwise idle ("other_cpu_s" near 0), since the baseline needs one core and Spark both.

    python bench/spark_compaction.py                           # 1,000,000 x 1 KiB, 100,000 keys, 8 queues
    python bench/spark_compaction.py --messages 100000 --keys 10000 --compaction key
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from devtools.moto_server import LocalAws
from spark_emr.backend import Backend
from spark_emr.compaction import Plan, compact_queue, tier_driver
from spark_emr.jobs import compaction
from spark_emr.session import spark_session
from spark_emr.tier import QueueRef
from tidemq_protocol.attributes import TopicPolicy
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.tiered.s3 import s3_client

MIB = 1024 * 1024
TIER_PREFIX = "tidemq"
TOPICS = {"segment": "segments", "key": "keyed"}
CLEANUP = {"segment": "DELETE", "key": "COMPACTION"}


def machine_cpu_seconds() -> float:
    """CPU time every process of the machine has used since boot (Linux: /proc/stat's first line)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def descendants_cpu_seconds() -> dict[int, float]:
    """CPU time of each process descending from this one (Linux /proc), its reaped children's included: the moto
    server, and the Spark JVM with its Python workers."""
    parents, times = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    ours, found = {os.getpid()}, True
    while found:
        found = False
        for pid, parent in parents.items():
            if parent in ours and pid not in ours:
                ours.add(pid)
                found = True
    return {pid: times[pid] for pid in ours if pid != os.getpid()}


class CpuMeter:
    """Where the CPU went between its start and `figures()`: this process, its descendants (the moto server
    apart), the moto server, and everything else on the machine."""

    def __init__(self, aws: LocalAws) -> None:
        self.aws = aws
        self.own, self.machine, self.server = time.process_time(), machine_cpu_seconds(), aws.cpu_seconds()
        self.descendants = descendants_cpu_seconds()

    def figures(self) -> dict:
        own, machine = time.process_time() - self.own, machine_cpu_seconds() - self.machine
        server = self.aws.cpu_seconds() - self.server
        now = descendants_cpu_seconds()
        descendants = sum(seconds - self.descendants.get(pid, 0.0) for pid, seconds in now.items())
        spark = descendants - server
        return {
            "own_cpu_s": round(own, 2),
            "spark_cpu_s": round(spark, 2),
            "s3_server_cpu_s": round(server, 2),
            "other_cpu_s": round(max(0.0, machine - own - descendants), 2),
        }


def build(args, work: Path) -> tuple[str, str, dict]:
    """The serverless backend with both topics' messages in its S3 tier: (dynamodb prefix, bucket, build figures)."""
    prefix, bucket = f"bench{uuid.uuid4().hex[:8]}", f"built-{uuid.uuid4().hex[:12]}"
    config = StoreConfig(
        home=work,
        backend="serverless",
        efs_path=work / "efs",
        dynamodb_prefix=prefix,
        tier="s3",
        tier_bucket=bucket,
        tier_prefix=TIER_PREFIX,
        tier_upload_bytes=args.upload_bytes,
    )
    store = open_store(config)
    for kind in args.compaction:
        attributes = {TopicPolicy.CLEANUP: CLEANUP[kind]}
        store.create_topic(TopicConfig(name=TOPICS[kind], queues=args.queues, attributes=attributes))
    rng = random.Random(args.seed)
    pending: list[list[Message]] = [[] for _ in range(args.queues)]
    began, produced = time.perf_counter(), 0
    for _ in range(args.messages):
        key = rng.randrange(args.keys)
        queue = key % args.queues
        pending[queue].append(Message(rng.randbytes(args.body_bytes), queue=queue, keys=(f"key-{key}",)))
        if len(pending[queue]) == args.batch:
            for kind in args.compaction:
                store.put(TOPICS[kind], pending[queue])
            produced += len(pending[queue])
            pending[queue] = []
            if produced % (args.messages // 10 or 1) < args.batch:
                print(f"build: {produced} of {args.messages} messages produced", file=sys.stderr, flush=True)
    for messages in pending:
        if messages:
            for kind in args.compaction:
                store.put(TOPICS[kind], messages)
    produce_s = time.perf_counter() - began
    began = time.perf_counter()
    report = store.maintenance().run()
    upload_s = time.perf_counter() - began
    store.close()
    if report.failed or report.messages != args.messages * len(args.compaction):
        raise SystemExit(f"the maintenance run uploaded {report.messages} messages, failed {report.failed}")
    objects = sum(1 for _ in objects_of(s3_client(), bucket, f"{TIER_PREFIX}/"))
    figures = {"produce_s": round(produce_s, 1), "upload_s": round(upload_s, 1), "tier_objects": objects}
    print(f"build: done {figures}", file=sys.stderr, flush=True)
    return prefix, bucket, figures


def objects_of(client, bucket: str, prefix: str):
    """Every (key, size) under `prefix`."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            yield item["Key"], item["Size"]


def fresh_copy(client, built: str, topic: str) -> str:
    """A new bucket holding a server-side copy of `topic`'s tier objects in bucket `built`; its name."""
    bucket = f"run-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    for key, _ in objects_of(client, built, f"{TIER_PREFIX}/{topic}/"):
        client.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": built, "Key": key})
    return bucket


def remove_bucket(client, bucket: str) -> None:
    """Delete the bucket and everything in it (the moto server keeps objects in memory)."""
    keys = [key for key, _ in objects_of(client, bucket, "")]
    for first in range(0, len(keys), 1000):
        chunk = keys[first : first + 1000]
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in chunk], "Quiet": True})
    client.delete_bucket(Bucket=bucket)


def baseline(job: argparse.Namespace) -> dict:
    """What `compaction.run` does, in this one process: the job's plan for each topic, then `compact_queue` for each
    of its queues in turn; the job's summary counts."""
    backend = Backend.here(job.dynamodb_prefix, job.bucket, job.prefix)
    base = Plan(target_bytes=job.target_bytes, now_ms=job.now_ms, grace_s=job.grace_s)
    results, driver = [], tier_driver(backend.tier)
    for topic in backend.topics(job.topic):
        plan = compaction.topic_plan(topic.attributes, base)
        if isinstance(plan, str):
            raise SystemExit(f"topic {topic.name}: {plan}")
        for queue in range(topic.queues):
            results.append(asdict(compact_queue(driver, QueueRef(topic.name, queue), plan)))
    summary = {name: sum(r[name] for r in results) for name in compaction.COUNTS}
    return summary | {"queues_switched": sum(r["switched"] for r in results)}


class Runs:
    """The runs of one bench: the moto server, the built data, the Spark session."""

    def __init__(self, args, aws: LocalAws, prefix: str, built: str, spark) -> None:
        self.args, self.aws, self.prefix, self.built, self.spark = args, aws, prefix, built, spark
        self.client = s3_client()

    def run(self, kind: str, mode: str) -> dict:
        """One compaction of a fresh copy of the topic of `kind` by `mode`; its result line (but the speedup)."""
        args, topic = self.args, TOPICS[kind]
        bucket = fresh_copy(self.client, self.built, topic)
        job = compaction.arguments(
            [
                *("--dynamodb-prefix", self.prefix, "--bucket", bucket, "--prefix", TIER_PREFIX, "--topic", topic),
                *("--target-bytes", str(args.target_bytes), "--grace-s", str(args.grace_s)),
                *("--now-ms", str(args.now_ms)),
            ]
        )
        print(f"{kind} compaction, {mode}: running on s3://{bucket}", file=sys.stderr, flush=True)
        loadavg = round(os.getloadavg()[0], 2)
        meter, began = CpuMeter(self.aws), time.perf_counter()
        summary = compaction.run(self.spark, job) if mode == "spark" else baseline(job)
        seconds = time.perf_counter() - began
        figures = meter.figures() | {"loadavg_before": loadavg}
        remove_bucket(self.client, bucket)
        if summary["queues_switched"] != args.queues:
            raise SystemExit(
                f"{kind} compaction, {mode}: {summary['queues_switched']} of {args.queues} queues switched "
                "(each queue needs at least two uploads to merge: a smaller --upload-bytes for fewer messages)"
            )
        return {
            "bench": "spark_compaction",
            "compaction": kind,
            "mode": mode,
            "records": summary["records_in"],
            "bytes": summary["bytes_in"],
            "seconds": round(seconds, 3),
            "records_per_s": round(summary["records_in"] / seconds),
            "mb_per_s": round(summary["bytes_in"] / 1e6 / seconds, 1),
            **{name: summary[name] for name in ("objects_in", "objects_out", "records_out", "bytes_out")},
            **figures,
        }


def start_workers(spark) -> float:
    """Have each of the session's Python workers import the job's modules (a task per slot, run at once); return
    the seconds it took."""
    slots = spark.sparkContext.defaultParallelism

    def start(_):
        import spark_emr.compaction  # noqa: F401

        time.sleep(0.5)  # every slot's task running at once: a worker each
        yield os.getpid()

    began = time.perf_counter()
    spark.sparkContext.parallelize(range(slots), slots).mapPartitions(start).collect()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per topic (default 1,000,000)")
    parser.add_argument("--body-bytes", type=int, default=1024, help="bytes of each message's body (default 1024)")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys the messages draw from (100,000)")
    parser.add_argument("--queues", type=int, default=8, help="queues per topic, one Spark task each (default 8)")
    parser.add_argument("--batch", type=int, default=1000, help="messages per produce, all to one queue (1000)")
    parser.add_argument(
        "--upload-bytes", type=int, default=4 * MIB, help="the maintenance run's upload size (default 4 MiB)"
    )
    parser.add_argument(
        "--target-bytes",
        type=int,
        default=compaction.DEFAULT_TARGET_BYTES,
        help="segment size compaction makes (default the job's, 128 MiB)",
    )
    parser.add_argument("--grace-s", type=float, default=0.0, help="replaced objects' grace (default 0: deleted)")
    parser.add_argument(
        "--compaction", nargs="+", choices=tuple(TOPICS), default=list(TOPICS), help="which (default both)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each pair (default 1)")
    parser.add_argument("--master", default="local[2]", help="the Spark master (default local[2])")
    parser.add_argument("--seed", type=int, default=13, help="the data's random seed (default 13)")
    args = parser.parse_args()
    args.now_ms = int(time.time() * 1000)

    work = Path(tempfile.mkdtemp(prefix="tidemq-bench-spark-compaction-"))
    try:
        with LocalAws() as aws:
            os.environ.update(aws.env)  # before the session starts: its Python workers inherit it
            os.environ["TIDEMQ_SPARK_MASTER"] = args.master
            prefix, built, build_figures = build(args, work)
            began = time.perf_counter()
            spark = spark_session("bench-compaction")
            session_start_s = round(time.perf_counter() - began, 1)
            workers_start_s = round(start_workers(spark), 1)
            runs = Runs(args, aws, prefix, built, spark)
            settings = {
                "messages": args.messages,
                "body_bytes": args.body_bytes,
                "keys": args.keys,
                "queues": args.queues,
                "batch": args.batch,
                "upload_bytes": args.upload_bytes,
                "target_bytes": args.target_bytes,
                "grace_s": args.grace_s,
                "master": args.master,
                "s3": "moto server over HTTP",
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                **build_figures,
            }
            try:
                for repeat in range(1, args.repeat + 1):
                    for kind in args.compaction:
                        modes = ("baseline", "spark") if repeat % 2 else ("spark", "baseline")
                        lines = {mode: runs.run(kind, mode) for mode in modes}
                        lines["spark"]["speedup_vs_baseline"] = round(
                            lines["baseline"]["seconds"] / lines["spark"]["seconds"], 2
                        )
                        lines["spark"]["session_start_s"] = session_start_s
                        lines["spark"]["workers_start_s"] = workers_start_s
                        for mode in ("baseline", "spark"):
                            print(json.dumps(lines[mode] | {"repeat": repeat, "order": modes} | settings), flush=True)
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
