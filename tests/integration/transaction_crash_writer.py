"""Child process for the embedded engine's commit crash tests: opens the store, sends a half message of topic `tx`,
prints its id, then commits it and is killed (SIGKILL, by itself) at one of the commit's steps.

    python transaction_crash_writer.py HOME before_append|after_append

`before_append`: once the decision is written, before the message is appended to the commit log;
`after_append`: once it is appended, before the outcome is written (embedded/transactions.py says why a commit is
those three writes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from tidemq_protocol.errors import TopicExists
from tidemq_protocol.message import Message, MessageType
from tidemq_store import StoreConfig, TopicConfig, open_store


def main(home: str, when: str) -> None:
    store = open_store(StoreConfig(home=Path(home)))
    with contextlib.suppress(TopicExists):
        store.create_topic(TopicConfig(name="tx", queues=2, message_type=MessageType.TRANSACTION))
    half = store.transactions.prepare("tx", Message(b"paid", 1, keys=("order-1",)), "checkout", 0)
    print(half.msg_id, flush=True)
    append = store.append_batch

    def dying_append(topic, batch):
        if when == "before_append":
            os.kill(os.getpid(), signal.SIGKILL)
        results = append(topic, batch)
        os.kill(os.getpid(), signal.SIGKILL)
        return results

    store.append_batch = dying_append
    store.transactions.end("tx", half.msg_id, True, "producer")
    raise AssertionError("the commit returned: it should have been killed")


if __name__ == "__main__":
    main(*sys.argv[1:])
