"""Child process of the KV crash test: opens (and so recovers) a store with a KV namespace, then writes to it from
three threads until it is killed.

    python kv_crash_writer.py HOME RUN

Each acknowledged write is printed as one line right after it returns: `put KEY VERSION VALUE` or `del KEY VERSION`.
Puts are plain, create-only or compare-and-set on the version just read; a refused condition prints nothing.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from pathlib import Path

from tidemq_protocol.errors import KeyNotFound, NamespaceExists, VersionMismatch
from tidemq_protocol.kv import NamespaceConfig
from tidemq_store import StoreConfig, open_store

KEYS = 40


def main() -> None:
    home, run = Path(sys.argv[1]), int(sys.argv[2])
    store = open_store(StoreConfig(home=home, commitlog_segment_bytes=256 * 1024, checkpoint_interval_s=0.05))
    kv = store.kv
    with contextlib.suppress(NamespaceExists):
        kv.create_namespace(NamespaceConfig("crash"))
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def write(thread: int) -> None:
        rng = random.Random(run * 10 + thread)
        for seq in range(1_000_000):
            key, value = f"k{rng.randrange(KEYS)}", f"{run}-{thread}-{seq}"
            choice = rng.random()
            try:
                if choice < 0.15:
                    say(f"del {key} {kv.delete('crash', key).version}")
                elif choice < 0.5:
                    current = kv.get("crash", key).entry
                    if current is None:
                        written = kv.put("crash", key, value.encode(), create_only=True)
                    else:
                        written = kv.put("crash", key, value.encode(), expected_version=current.version)
                    say(f"put {key} {written.version} {value}")
                else:
                    say(f"put {key} {kv.put('crash', key, value.encode()).version} {value}")
            except (KeyNotFound, VersionMismatch):
                pass

    threads = [threading.Thread(target=write, args=(thread,), daemon=True) for thread in range(3)]
    for thread in threads:
        thread.start()
    print("ready", file=sys.stderr, flush=True)
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
