"""Child process for the serverless concurrency and crash tests: produce batches to one queue, print acks.

    python serverless_producer.py EFS_DIR PREFIX PRODUCER BATCHES [TOPIC QUEUES]

Puts batches of BATCH messages to queue 0 of `race`, or, given TOPIC and QUEUES, spreads each batch over that
topic's queues (message i to queue i % QUEUES). Each acknowledged message is printed as `offset producer seq`
(with its queue first when spread) right after `put` returns (AWS_ENDPOINT_URL points at the test's moto
server). Bodies are `producer:seq`: give each run of a producer its own number.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, open_store

BATCH = 100


def main() -> None:
    efs, prefix, producer, batches = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    topic, queues = (sys.argv[5], int(sys.argv[6])) if len(sys.argv) > 5 else ("race", 1)
    store = open_store(StoreConfig(home=efs.parent, backend="serverless", efs_path=efs, dynamodb_prefix=prefix))
    out = sys.stdout
    for b in range(batches):
        first = b * BATCH
        messages = [Message(f"{producer}:{first + i}".encode(), queue=i % queues) for i in range(BATCH)]
        results = store.put(topic, messages)
        where = [f"{r.queue} {r.queue_offset}" if queues > 1 else str(r.queue_offset) for r in results]
        out.write("".join(f"{at} {producer} {first + i}\n" for i, at in enumerate(where)))
        out.flush()
    out.write(f"requests {store.requests}\n")
    store.close()


if __name__ == "__main__":
    main()
