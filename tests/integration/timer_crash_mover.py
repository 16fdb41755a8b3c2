"""Child process for the timer move crash tests: opens an embedded store whose DELAY topic `later` has timers due,
and dies by SIGKILL at one step of the first move of them (tidemq_store/embedded/timers.py):

    python timer_crash_mover.py HOME intent     killed once the intent is written, before the append
    python timer_crash_mover.py HOME appended   killed once the batch is appended, before the timers are deleted

The kill is the only thing changed: the store, its RocksDB and its commit log are the real ones, written as a mover
writes them. It prints `ready` before it opens the store.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tidemq_store import StoreConfig
from tidemq_store.embedded.store import EmbeddedMessageStore
from tidemq_store.embedded.timers import RocksTimers


def main(home: Path, step: str) -> None:
    if step == "intent":
        append = EmbeddedMessageStore.append_due

        def append_due(store, topic, batch, intent):
            def then_die(position: int) -> None:
                intent(position)
                os.kill(os.getpid(), signal.SIGKILL)

            return append(store, topic, batch, then_die)

        EmbeddedMessageStore.append_due = append_due
    else:
        RocksTimers._finish = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
    print("ready", flush=True)
    EmbeddedMessageStore(StoreConfig(home=home))  # its mover moves the due timers, and dies doing it
    signal.pause()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
