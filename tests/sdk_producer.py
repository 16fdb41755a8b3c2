"""TideMQ's SDK Producer in a process of its own, for the gateway SIGKILL test (tests/e2e/test_produce_sigkill.py):
sends `count` messages `m-0`, `m-1`, ... in batches of `batch` with `Producer.add`, as an application would, and
when a send fails (its retries spent while the gateway is down) flushes again until it succeeds: `flush` sends the
failed batch again as it was, under its idempotency key. One JSON line per acknowledged message, `[msg_id, body]`.

    python tests/sdk_producer.py URL TOPIC COUNT BATCH PAUSE_S      (PAUSE_S: a pause after each batch)
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque

from tidemq import Producer
from tidemq.client import HttpClient

BODIES: deque[str] = deque()
"""The bodies added and not acknowledged yet, in order: a flush's results are theirs, in the same order."""


def acknowledged(results) -> None:
    for result in results:
        print(json.dumps([result.msg_id, BODIES.popleft()]), flush=True)


def main() -> None:
    url, topic, count, batch, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    client = HttpClient(url, retries=3, backoff_s=0.1, max_backoff_s=1.0)
    with Producer(topic, client=client, batch_size=batch) as producer:
        for n in range(count):
            if n and n % batch == 0:
                time.sleep(pause)  # the sends spread over the kills
            BODIES.append(f"m-{n}")
            try:
                acknowledged(producer.add(f"m-{n}"))
            except Exception as error:  # the gateway is down: flush again until it is up
                print(json.dumps({"failed": type(error).__name__}), flush=True)
                while True:
                    time.sleep(0.2)
                    try:
                        acknowledged(producer.flush())
                        break
                    except Exception as again:  # still down
                        print(json.dumps({"failed": type(again).__name__}), flush=True)
        acknowledged(producer.flush())


if __name__ == "__main__":
    main()
