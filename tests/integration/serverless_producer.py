"""Child process for the serverless concurrency and crash tests: produce batches to one queue, print acks.

    python serverless_producer.py EFS_DIR PREFIX PRODUCER BATCHES

Each acknowledged message is printed as `offset producer seq` right after `put` returns (AWS_ENDPOINT_URL
points at the test's moto server). Bodies are `producer:seq`: give each run of a producer its own number.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tidemq_store import Message, StoreConfig, open_store

BATCH = 100


def main() -> None:
    efs, prefix, producer, batches = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = open_store(StoreConfig(home=efs.parent, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
    out = sys.stdout
    for b in range(batches):
        first = b * BATCH
        results = store.put("race", [Message(f"{producer}:{first + i}".encode(), queue=0) for i in range(BATCH)])
        out.write("".join(f"{r.queue_offset} {producer} {first + i}\n" for i, r in enumerate(results)))
        out.flush()
    out.write(f"requests {store.requests}\n")
    store.close()


if __name__ == "__main__":
    main()
