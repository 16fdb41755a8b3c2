"""Child process for the idempotent-send crash test: opens (and so recovers) a store, then sends keyed batches until
it is killed, starting each thread's stream where the parent says, so that it sends again batches an earlier run had
sent (acknowledged or cut off by the kill), under their keys.

    python send_key_writer.py STORE_ARGS_JSON START_0,START_1,... [DELIVER_AT_MS]

STORE_ARGS_JSON: the StoreConfig's fields (embedded: home; serverless: backend, efs_path, dynamodb_prefix). Thread t
sends batches t/START_t, t/START_t+1, ... of `batch_messages(t, i)`, each with the key `t/i`, and prints one line per
acknowledged message right after `put` returns: `t i j queue offset msg_id` (message j of batch i). With
DELIVER_AT_MS the topic is a DELAY topic and every message is due then (ms since the epoch): sent before, a batch is
kept as timers (offset -1); after, appended.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading

from tidemq_protocol.errors import TopicExists
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.timer import delivery_properties
from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.sends import SendKey

TOPIC, QUEUES = "sends", 4


def batch_messages(thread: int, index: int, deliver_at: int | None = None) -> list[Message]:
    """Batch `index` of thread `thread`: a pure function of both (and of the due time), spread over the queues, 1..8
    messages."""
    count = 1 + (thread * 7 + index) % 8
    due = delivery_properties(deliver_at)
    return [Message(f"{thread}/{index}/{j}".encode(), queue=(index + j) % QUEUES, properties=due) for j in range(count)]


def main() -> None:
    config = StoreConfig(**json.loads(sys.argv[1]), checkpoint_interval_s=0.05, clean_interval_s=0.2)
    starts = [int(start) for start in sys.argv[2].split(",")]
    deliver_at = int(sys.argv[3]) if len(sys.argv) > 3 else None
    kind = MessageType.NORMAL if deliver_at is None else MessageType.DELAY
    store = open_store(config)
    with contextlib.suppress(TopicExists):
        store.create_topic(TopicConfig(name=TOPIC, queues=QUEUES, message_type=kind))
    out, lock = sys.stdout, threading.Lock()

    def send(thread: int) -> None:
        index = starts[thread]
        while True:
            results = store.put(TOPIC, batch_messages(thread, index, deliver_at), SendKey(f"{thread}/{index}"))
            lines = "".join(
                f"{thread} {index} {j} {r.queue} {r.queue_offset} {r.msg_id}\n" for j, r in enumerate(results)
            )
            with lock:
                out.write(lines)
                out.flush()
            index += 1

    threads = [threading.Thread(target=send, args=(t,), daemon=True) for t in range(len(starts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
