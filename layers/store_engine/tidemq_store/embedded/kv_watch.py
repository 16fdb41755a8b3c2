"""What the embedded backend's KV watches read: the changes of a namespace's topic, read back as its messages.

A namespace's topic holds every change in revision order (revisions increase with offsets, kv/record.py), so a
watch from a revision finds its first offset by a binary search of the topic, and reads on from there. Where recent
watches stopped is remembered (revision -> offset), so a watcher's next call starts without a search. Only what RocksDB
has applied is read (`end`): a watch never sees a change before a reader could. A watch whose first change is gone
from the topic (key compaction removed it: the first change left says its previous revision is past the start)
fails with RevisionCompacted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from tidemq_protocol.errors import RevisionCompacted
from tidemq_protocol.kv import MAX_PAGE_BYTES, Change, ChangePage, topic_of

from ..api import MessageStore
from ..kv import record

READ_BATCH = 1000
"""Most changes one read of the topic returns."""
WATCH_SCAN = 10 * READ_BATCH
"""Most changes one watch call examines (a filter that matches few changes returns an empty page and where to go
on from, rather than reading the whole topic in one call)."""
CURSORS = 1024
"""Where recent watches stopped (revision -> offset), so a watcher's next call starts without a search."""


class ChangeReader:
    """The changes of the namespaces' topics in `store`, read for watches (see the module docstring)."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._cursors: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._cursors_lock = threading.Lock()

    def read(
        self,
        namespace: str,
        from_revision: int,
        end: int,
        revision: int,
        key: str | None,
        prefix: str | None,
        limit: int,
    ) -> ChangePage:
        """Changes at `from_revision` or later below offset `end` (what is applied, up to `revision`), matching
        `key` or `prefix`: at most `limit`, MAX_PAGE_BYTES of values past the first, WATCH_SCAN changes examined."""
        topic = topic_of(namespace)
        offset = self._offset_of(namespace, from_revision, end)
        changes: list[Change] = []
        next_revision, examined, size = from_revision, 0, 0
        while offset < end and examined < WATCH_SCAN:
            got = self.store.get(topic, 0, offset, max_messages=min(READ_BATCH, end - offset))
            for message in got.messages:
                if message.queue_offset >= end:
                    break
                change = record.from_message(message)
                if change.revision < from_revision:
                    offset = message.queue_offset + 1
                    continue
                if examined == 0 and change.previous >= from_revision:
                    raise RevisionCompacted(namespace, from_revision, change.revision)
                matches = (key is None or change.key == key) and (prefix is None or change.key.startswith(prefix))
                if matches and changes and (len(changes) == limit or size + len(change.value) > MAX_PAGE_BYTES):
                    end = offset  # the page is full: stop before this change
                    break
                examined += 1
                next_revision, offset = change.revision + 1, message.queue_offset + 1
                if matches:
                    changes.append(change)
                    size += len(change.value)
            else:
                offset = max(offset + 1, got.next_offset) if not got.messages else max(offset, got.next_offset)
        if examined == 0 and from_revision <= revision:  # the topic holds nothing from there, yet reached it
            raise RevisionCompacted(namespace, from_revision, revision + 1)
        if examined:
            self._remember(namespace, next_revision, offset)
        return ChangePage(changes, revision, next_revision)

    def forget(self) -> None:
        """Drop every remembered place (a namespace made, deleted or rebuilt: its offsets no longer hold)."""
        with self._cursors_lock:
            self._cursors.clear()

    def _offset_of(self, namespace: str, revision: int, end: int) -> int:
        """The first offset of the topic holding a change at `revision` or later (`end` if none yet): where the
        last watch stopped, else a binary search (revisions increase with offsets)."""
        remembered = self._cursors.get((namespace, revision))
        if remembered is not None:
            return remembered
        topic = topic_of(namespace)
        low = self.store.queue_offsets(topic)[0].min_offset
        high = end
        while low < high:
            middle = (low + high) // 2
            found = self.store.get(topic, 0, middle, max_messages=1).messages
            if not found:
                high = middle
                continue
            if record.from_message(found[0]).revision >= revision:
                high = middle
            else:
                low = found[0].queue_offset + 1
        return low

    def _remember(self, namespace: str, revision: int, offset: int) -> None:
        with self._cursors_lock:
            self._cursors[(namespace, revision)] = offset
            if len(self._cursors) > CURSORS:
                self._cursors.popitem(last=False)
