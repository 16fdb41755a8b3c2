"""The serverless backend with 1, 4 and 8 concurrent producer processes on one queue (DynamoDB on a moto server, or
on LocalStack with `--local-aws localstack`).

Prints one JSON line per producer count:
  {"bench": "serverless", "producers": P, "produce_msgs_per_s": ..., "consume_msgs_per_s": ...,
   "dynamodb_requests_per_message": ...,   (target: <= 0.05 at batch 100)
   "aws_cpu_ms_per_request": ..., "aws_busy": ...}   (how much of the produce time the local AWS was busy:
                                                      near 1.0, it is the bottleneck, not the protocol)

Each producer is its own process (as concurrent Lambda invocations are) writing B-message batches of S bytes
to one queue of one topic; then one reader consumes the queue from offset 0, 1,000 messages a read, checking
that offsets are dense and every message is there once.

    python bench/serverless.py                      # 1, 4, 8 producers x 100 batches of 100 x 1 KiB
    python bench/serverless.py --producers 8 --batches 300
    python bench/serverless.py --local-aws localstack   # the same on LocalStack (installed on first use)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from devtools.localstack import LocalStack
from devtools.moto_server import LocalAws
from tidemq_store import StoreConfig, TopicConfig, open_store

TOPIC = "bench"

PRODUCER = """
import sys, time
from pathlib import Path
from tidemq_store import Message, StoreConfig, open_store
efs, prefix = Path(sys.argv[1]), sys.argv[2]
batches, batch, size, start_at = *map(int, sys.argv[3:6]), float(sys.argv[6])
store = open_store(StoreConfig(home=efs.parent, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
messages = [Message(b"x" * size, queue=0)] * batch
time.sleep(max(0.0, start_at - time.time()))  # every producer starts at the same moment
for _ in range(batches):
    store.put("bench", messages)
print(store.requests, flush=True)
"""


def run(args, producers: int, aws: LocalAws | LocalStack, work: Path) -> dict:
    efs, prefix = work / f"efs-{producers}", f"bench{uuid.uuid4().hex[:8]}"
    config = StoreConfig(home=work, backend="serverless", efs_path=efs, dynamodb_prefix=prefix)
    store = open_store(config)
    store.create_topic(TopicConfig(name=TOPIC, queues=1))
    server_cpu = aws.cpu_seconds()
    start_at = time.time() + 5  # time for every process to import and connect
    env = {**os.environ, **aws.env}
    argv = [str(efs), prefix, str(args.batches), str(args.batch), str(args.size), str(start_at)]
    children = [
        subprocess.Popen([sys.executable, "-c", PRODUCER, *argv], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(producers)
    ]
    requests = 0
    for child in children:
        out, _ = child.communicate(timeout=3600)
        if child.returncode:
            raise SystemExit(f"a producer failed (exit {child.returncode})")
        requests += int(out.split()[-1])
    produce_s = time.time() - start_at
    server_cpu = aws.cpu_seconds() - server_cpu
    total = producers * args.batches * args.batch

    began, offset, count = time.perf_counter(), 0, 0
    while True:
        result = store.get(TOPIC, 0, offset, max_messages=1000)
        if result.messages and result.messages[0].queue_offset != offset:
            raise SystemExit(f"expected offset {offset}, read {result.messages[0].queue_offset}")
        count += len(result.messages)
        if result.next_offset >= result.max_offset:
            break
        offset = result.next_offset
    consume_s = time.perf_counter() - began
    store.close()
    if count != total:
        raise SystemExit(f"read {count} messages back, produced {total}")
    return {
        "bench": "serverless",
        "producers": producers,
        "messages": total,
        "batch": args.batch,
        "size": args.size,
        "produce_msgs_per_s": round(total / produce_s),
        "consume_msgs_per_s": round(total / consume_s),
        "dynamodb_requests_per_message": round(requests / total, 4),
        "aws_cpu_ms_per_request": round(server_cpu * 1000 / requests, 2),
        "aws_busy": round(server_cpu / produce_s, 2),
        "local_aws": args.local_aws,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, nargs="+", default=[1, 4, 8], help="producer process counts")
    parser.add_argument("--batches", type=int, default=100, help="batches per producer")
    parser.add_argument("-b", "--batch", type=int, default=100, help="messages per batch")
    parser.add_argument("-s", "--size", type=int, default=1024, help="payload bytes")
    parser.add_argument(
        "--local-aws", choices=("moto", "localstack"), default="moto", help="DynamoDB's server (default moto)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tidemq-bench-serverless-"))
    try:
        with LocalStack(work / "localstack") if args.local_aws == "localstack" else LocalAws() as aws:
            os.environ.update(aws.env)
            for producers in args.producers:
                print(json.dumps(run(args, producers, aws, work)), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
