"""Child process for the crash tests: opens (and so recovers) a store, then writes until it is killed.

    python crash_writer.py HOME RUN

Each acknowledged message is printed as one line `queue offset run thread seq` right after `put`
returns; the message itself is a pure function of (run, thread, seq), so the parent can check its
body, keys, tag and properties after restarting the store.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from tidemq_protocol.errors import TopicExists
from tidemq_protocol.message import Message
from tidemq_store import StoreConfig, TopicConfig, open_store

QUEUES = 4


def make_message(run: int, thread: int, seq: int) -> Message:
    body = f"{run}-{thread}-{seq}-".encode() + bytes([seq % 251]) * (seq % 300)
    return Message(
        body,
        queue=(thread + seq // 7) % QUEUES,
        keys=(f"r{run}t{thread}s{seq}",),
        tag=f"T{seq % 3}",
        properties={"run": str(run), "seq": str(seq)},
    )


def batch_sizes(run: int, thread: int) -> Iterator[int]:
    """The sizes of the batches a writer thread puts, in order (its messages go to several queues)."""
    rng = random.Random(run * 100 + thread)
    while True:
        yield rng.randint(1, 20)


def main() -> None:
    home, run = Path(sys.argv[1]), int(sys.argv[2])
    store = open_store(
        StoreConfig(home=home, commitlog_segment_bytes=256 * 1024, checkpoint_interval_s=0.05, clean_interval_s=0.2)
    )
    with contextlib.suppress(TopicExists):
        store.create_topic(TopicConfig(name="crash", queues=QUEUES))
    out = sys.stdout
    lock = threading.Lock()

    def write(thread: int) -> None:
        seq = 0
        for size in batch_sizes(run, thread):
            messages = [make_message(run, thread, seq + i) for i in range(size)]
            results = store.put("crash", messages)
            lines = "".join(f"{r.queue} {r.queue_offset} {run} {thread} {seq + i}\n" for i, r in enumerate(results))
            with lock:
                out.write(lines)
                out.flush()
            seq += len(messages)

    threads = [threading.Thread(target=write, args=(t,), daemon=True) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
