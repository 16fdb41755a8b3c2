"""Long polling with no process to notify: the waits of one process share one poll.

A serverless writer tells no reader it wrote (it may be another Lambda invocation, on another machine), so a long
poll learns of new messages by reading its queue's item. One read per waiter every `interval_s` made 200 waiting
long polls 4,000 DynamoDB reads a second, which starved every other request of the same table (locally, the moto
server answers one request at a time). Here each process has one poller, running while anyone waits: every
`interval_s` it reads the `next_offset` of every queue waited on (one BatchGetItem per 100 queues, however many
wait on each) and wakes the waiters whose queue moved past their offset.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

log = logging.getLogger("tidemq.serverless")

QueueKey = tuple[str, int]  # (topic, queue)


class ArrivalWatch:
    """Waits for new messages of one process's long polls; `read` gives the next offset of each queue it is asked
    about that has an item (`QueueIndex.next_offsets`)."""

    def __init__(self, read: Callable[[Iterable[QueueKey]], dict[QueueKey, int]], interval_s: float) -> None:
        self._read, self.interval_s = read, interval_s
        self._changed = threading.Condition()
        self._waiters: dict[QueueKey, int] = {}  # how many wait on each queue
        self._next_offsets: dict[QueueKey, int] = {}  # as last read, for the queues waited on
        self._poller: threading.Thread | None = None

    def wait(self, topic: str, queue: int, offset: int, timeout_s: float) -> bool:
        """Whether the queue holds a message at `offset` or later within `timeout_s` (the caller has just read it
        and found none: the first poll is the next one)."""
        key, deadline = (topic, queue), time.monotonic() + timeout_s
        with self._changed:
            self._waiters[key] = self._waiters.get(key, 0) + 1
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="serverless-long-polls", daemon=True)
                self._poller.start()
            try:
                while self._next_offsets.get(key, 0) <= offset:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._changed.wait(remaining)
                return True
            finally:
                self._waiters[key] -= 1
                if not self._waiters[key]:
                    del self._waiters[key]
                    self._next_offsets.pop(key, None)

    def _poll(self) -> None:
        """Read the queues waited on every `interval_s`, until nobody waits (the next waiter starts a new poller)."""
        while True:
            with self._changed:
                if not self._waiters:
                    self._poller = None
                    return
                keys = list(self._waiters)
            try:
                found = self._read(keys)
            except Exception:  # the waits go on until their timeout; the next round reads again
                log.warning("reading %d queue(s) for long polls failed", len(keys), exc_info=True)
                found = {}
            with self._changed:
                self._next_offsets.update((key, offset) for key, offset in found.items() if key in self._waiters)
                self._changed.notify_all()
            time.sleep(self.interval_s)
