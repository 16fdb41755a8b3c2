"""`QueueIndex`: each queue's batches, sequenced in DynamoDB with no owner (the serverless ConsumeQueue).

A queue is one `queues` item (tables.py) and the `batches` items below it:

    next_offset  the offset the next message gets (the queue's counter)
    pending      the newest batch entries, in offset order, covering [indexed, next_offset); each entry is
                 one string "file position length count store_timestamp flags" (flags: "k" when the
                 batch carries message keys, else "-")
    indexed      where `pending` starts: every batch below it has a `batches` item
    min_offset   the oldest readable offset (retention moves it)
    hot_offset   below it messages are read from the cold tier (maintenance.py moves it)

Sequencing protocol, per produce batch and queue (the bytes are already appended and fsync'd, segments.py):

  1. sequence  one UpdateItem of the queue item:
                   ADD next_offset :count  SET pending = list_append(pending, [entry]), dirty = "dirty"
                   condition attribute_exists(next_offset), returning the new item.
               DynamoDB applies writes to one item one after another, so the batch gets
               [next_offset - count, next_offset) of the returned item, and its entry is the returned
               list's last. It never loses a race, so it is never retried, however many writers there are.
  2. acknowledge.
  3. index     (every TRIM_EVERY-th entry, by the writer whose entry made `pending` that long) write a
               `batches` item for each entry it saw (BatchWriteItem; the same item each time, so redoing it
               is harmless), then one UpdateItem: REMOVE pending[0..k-1], SET indexed = indexed + their
               counts, condition indexed = the value it saw (so two indexers never both trim).

Why it is safe:
- Dense and unique: the counter moves only by step 1, atomically with the entry that claims exactly the
  offsets it moved over, and step 3 moves entries from the front of `pending` into items while moving
  `indexed` by their counts in one conditional write. So `batches` items below `indexed` and `pending`
  from `indexed` on always tile [0, next_offset): no offset unclaimed, none claimed twice.
- No hole that later fills: a reader reads the queue item (strongly consistent) first, then, only for
  offsets below the `indexed` it saw, the `batches` items, which were written before `indexed` moved past
  them. Everything below the `next_offset` it saw is therefore there to read.
- Nothing acknowledged is lost: a batch's bytes are durable before its entry exists. A crash before
  step 1 leaves bytes nothing points to (maintenance deletes their file once no entry points into it);
  between 1 and 2, a stored batch its producer may send again (at least once, as everywhere); in step 3,
  entries the next indexer indexes again.
- All or nothing: a batch's part in one queue is one entry. A batch spread over several queues is sequenced
  by one TransactWriteItems instead of step 1's UpdateItem: it reads the queue items (one BatchGetItem),
  then, in one transaction, moves each queue's `next_offset` from the value read to that plus its part's
  count (condition: still the value read) and appends the part's entry. Either every queue gets its part or
  none does, whatever crashes when; a writer that raced it (the condition failed, or DynamoDB reports a
  conflicting transaction) reads again and retries, with jittered backoff. Transactions return no values,
  hence the read; and under contention they retry where step 1 never does, so they are kept to the batches
  that need them.
- A batch sequenced on a condition of other items (`sequence(..., also=)`: a transaction's commit, which records
  its outcome in the same write, transactions.py; due timers, deleted from the timers table in the same write,
  timers.py) is sequenced the same way, by one transaction that also writes those items: the batch gets its
  offsets exactly when their conditions hold (else ItemChanged).

Cost: one request per batch, plus two per TRIM_EVERY (16) batches for indexing: 1.125 requests a batch,
whatever the concurrency (two for a batch spread over several queues, more when it has to retry). The
queue item stays under 1 KB (one write unit) with 16 entries of about 45 bytes, and holds the queue's hot
end, so tail reads cost one GetItem.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from pynamodb.exceptions import DoesNotExist, PutError, TransactWriteError, UpdateError
from pynamodb.transactions import TransactWrite

from tidemq_protocol.errors import DependencyUnavailable, StoreUnavailable

from .conditions import failed_beyond, is_conditional, raced
from .known_queues import KnownQueue, KnownQueues
from .tables import DIRTY, Tables

log = logging.getLogger("tidemq.serverless")
TRIM_EVERY = 16
BATCH_GET_KEYS = 100  # DynamoDB's most keys a BatchGetItem
LOOKAHEAD = 4096
"""Offsets past a read whose `batches` items a read that must query them learns too (a page of a few hundred KB at
most): a consumer's next reads find them known (known_queues.py)."""
MOST_TRIMMED = 100  # entries one index step moves (bounds the size of its UpdateItem)
BACKOFF_S, MAX_BACKOFF_S = 0.005, 0.5  # a transaction that lost a race waits up to this, doubling
RACING_S = 10.0
"""How long a transaction that keeps losing races (to other writers, or to DynamoDB's conflicts with transactions
of other items) goes on before its caller gets DependencyUnavailable (a 503)."""


class BatchRef(NamedTuple):
    """Where one sequenced batch of one queue is: offsets [first_offset, first_offset + count)."""

    first_offset: int
    count: int
    file: str
    position: int
    length: int
    store_timestamp: int
    has_keys: bool

    @property
    def end_offset(self) -> int:
        return self.first_offset + self.count

    def entry(self) -> str:
        flags = "k" if self.has_keys else "-"
        return f"{self.file} {self.position} {self.length} {self.count} {self.store_timestamp} {flags}"


def decode_entries(entries: Iterable[str], first_offset: int) -> list[BatchRef]:
    refs = []
    for entry in entries:
        file, position, length, count, stamp, flags = entry.split(" ")
        refs.append(BatchRef(first_offset, int(count), file, int(position), int(length), int(stamp), flags == "k"))
        first_offset += int(count)
    return refs


class QueueState(NamedTuple):
    """One strongly consistent read of a queue item."""

    min_offset: int
    hot_offset: int
    indexed: int
    next_offset: int
    pending: list[BatchRef]
    dirty: bool


EMPTY = QueueState(0, 0, 0, 0, [], False)


ExtraWrite = Callable[[TransactWrite, dict[int, int]], None]
"""Adds conditional writes of other items to a sequencing transaction, given each queue's first offset in it."""


class ItemChanged(Exception):
    """A condition of the other items' writes a batch was to be sequenced with (`sequence(..., also=)`) did not
    hold: nothing was written (the batch's records lie in their file, referenced by nothing)."""


class BatchesMoved(StoreUnavailable):
    """The `batches` items of offsets a read asked for are gone since it read the queue's item: the queue's low end
    moved past them meanwhile (a maintenance run moved them to the cold tier, or retention expired them). The read
    is made again from a fresh read of the item, which sends it where they are now; never answered from further on,
    which would skip them."""

    def __init__(self, topic: str, queue: int, offset: int) -> None:
        super().__init__(f"the batch holding offset {offset} of {topic}:{queue} moved while it was read; read again")


class QueueMissing(Exception):
    """These queues have no item yet (made on the first put) or their topic was deleted."""

    def __init__(self, queues: list[int]) -> None:
        super().__init__(f"queues {queues} have no item")
        self.queues = queues


def queue_key(topic: str, queue: int) -> str:
    return f"{topic}|{queue}"


class QueueIndex:
    """Sequencing and finding batches (see the module docstring). `keys_of` reads a batch's message keys,
    for the `batches` items of batches that carry keys."""

    def __init__(self, tables: Tables, keys_of: Callable[[BatchRef], set[str]]) -> None:
        self.tables, self.keys_of = tables, keys_of
        self.known = KnownQueues()

    # ---- writing ---------------------------------------------------------------------------------

    def create(self, topic: str, queue: int) -> None:
        """Make the queue's item if it has none (a conditional put: never resets a queue in use)."""
        queues = self.tables.queues
        try:
            queues(queue_key(topic, queue), next_offset=0, indexed=0, pending=[]).save(
                condition=queues.next_offset.does_not_exist()
            )
        except PutError as error:
            if not is_conditional(error):
                raise

    def sequence(self, topic: str, parts: dict[int, BatchRef], also: ExtraWrite | None = None) -> dict[int, int]:
        """Step 1 (and, when its turn, 3) of the protocol for a batch whose part in queue q is `parts[q]`: every
        part gets its offsets, or none does; return each part's first offset. QueueMissing names the queues
        that have no item yet. `also` adds writes of other items to the sequencing, made with it or not at all (in
        its transaction, whatever the batch's queues): ItemChanged if one of their conditions fails."""
        if len(parts) == 1 and also is None:
            ((queue, batch),) = parts.items()
            return {queue: self._sequence_alone(topic, queue, batch)}
        return self._sequence_together(topic, parts, also)

    def _sequence_alone(self, topic: str, queue: int, batch: BatchRef) -> int:
        queues = self.tables.queues
        item, entry = queues(queue_key(topic, queue)), batch.entry()
        try:
            item.update(
                actions=[
                    queues.next_offset.add(batch.count),
                    queues.pending.set(queues.pending.append([entry])),
                    queues.dirty.set(DIRTY),
                ],
                condition=queues.next_offset.exists() & ~queues.pending.contains(entry),
            )
        except UpdateError as error:
            if not is_conditional(error):
                raise
            landed = self._landed(topic, queue, batch, self._states(topic, [queue])[queue])  # QueueMissing: no item
            if landed is None:
                raise QueueMissing([queue]) from None
            return landed
        if len(item.pending) % TRIM_EVERY == 0:
            self._index_quietly(topic, queue, int(item.indexed), item.pending)
        return int(item.next_offset) - batch.count

    def _sequence_together(
        self, topic: str, parts: dict[int, BatchRef], also: ExtraWrite | None = None
    ) -> dict[int, int]:
        """Sequence a batch spread over several queues (or with another item's write) in one transaction (see the
        module docstring)."""
        queues = self.tables.queues
        states = self._states(topic, list(parts))
        gives_up = time.monotonic() + RACING_S
        for attempt in itertools.count():
            try:
                token = uuid.uuid4().hex  # DynamoDB applies a transaction sent again with its token once
                with TransactWrite(connection=self.tables.connection, client_request_token=token) as transaction:
                    for queue, batch in parts.items():
                        seen = states[queue].next_offset
                        actions = [
                            queues.next_offset.set(seen + batch.count),
                            queues.pending.set(queues.pending.append([batch.entry()])),
                            queues.dirty.set(DIRTY),
                        ]
                        transaction.update(
                            queues(queue_key(topic, queue)), actions, condition=queues.next_offset == seen
                        )
                    if also is not None:
                        also(transaction, {queue: state.next_offset for queue, state in states.items()})
            except TransactWriteError as error:
                firsts = {queue: state.next_offset for queue, state in states.items()}  # had it landed
                states = self._states(topic, list(parts))
                queue, batch = next(iter(parts.items()))  # all or nothing: one part there is the whole batch there
                if self._landed(topic, queue, batch, states[queue], firsts[queue]) is not None:
                    return firsts  # an attempt whose answer was lost had landed, and botocore sent it again
                if also is not None and failed_beyond(error, len(parts)):
                    raise ItemChanged() from None
                if not raced(error):
                    raise
                if time.monotonic() > gives_up:
                    raise DependencyUnavailable(
                        "dynamodb", f"sequencing lost every race for {RACING_S:.0f} s"
                    ) from None
                time.sleep(random.uniform(0, min(MAX_BACKOFF_S, BACKOFF_S * 2**attempt)))  # step back, more each time
                continue
            for queue, state in states.items():
                if (len(state.pending) + 1) % TRIM_EVERY == 0:
                    fresh = self.state(topic, queue)
                    self._index_quietly(topic, queue, fresh.indexed, [ref.entry() for ref in fresh.pending])
            return {queue: state.next_offset for queue, state in states.items()}
        raise AssertionError("unreachable")

    def _landed(
        self, topic: str, queue: int, batch: BatchRef, state: QueueState, first: int | None = None
    ) -> int | None:
        """The first offset of `batch` in the queue if it is sequenced already (as of `state`, read since), else None:
        a write whose answer was lost may have landed, and botocore sent it again (its condition then fails, or it
        loses a race with itself). The batch is found by its entry, unique to its place in its file: in `pending`,
        or in a `batches` item if an indexer moved it there since: at `first` (where it would have landed, when
        the write said), else through the `by_file` index."""
        entry = batch.entry()
        found = next((ref.first_offset for ref in state.pending if ref.entry() == entry), None)
        if found is not None:
            return found
        if first is None:
            return self.first_offset_at(topic, queue, batch.file, batch.position)
        if first >= state.indexed:
            return None
        try:
            item = self.tables.batches.get(queue_key(topic, queue), first, consistent_read=True)
        except DoesNotExist:
            return None
        return first if (item.file, item.position) == (batch.file, batch.position) else None

    def _states(self, topic: str, queues: list[int]) -> dict[int, QueueState]:
        """The queues' items, read strongly consistent with one BatchGetItem; QueueMissing if some have none."""
        keys = {queue_key(topic, queue): queue for queue in queues}
        found = {keys[item.key]: state_of(item) for item in self.tables.queues.batch_get(keys, consistent_read=True)}
        missing = [queue for queue in queues if queue not in found]
        if missing:
            raise QueueMissing(missing)
        return found

    def _index_quietly(self, topic: str, queue: int, indexed: int, pending: list[str]) -> None:
        """Step 3, for a writer whose batch is sequenced whatever happens here (the next indexer redoes it)."""
        try:
            self.index(topic, queue, indexed, pending)
        except Exception:
            log.warning("indexing %s:%s failed", topic, queue, exc_info=True)

    def index(self, topic: str, queue: int, indexed: int, pending: list[str]) -> int:
        """Step 3: move the first entries of `pending` (as read at `indexed`) into `batches` items; return
        the new `indexed` (unchanged if another indexer got there first)."""
        refs = decode_entries(pending[:MOST_TRIMMED], indexed)
        if not refs:
            return indexed
        key, batches, queues = queue_key(topic, queue), self.tables.batches, self.tables.queues
        with batches.batch_write() as writer:
            for ref in refs:
                keys = (self.keys_of(ref) if ref.has_keys else None) or None
                writer.save(
                    batches(
                        key,
                        ref.first_offset,
                        count=ref.count,
                        file=ref.file,
                        position=ref.position,
                        length=ref.length,
                        store_timestamp=ref.store_timestamp,
                        keys=keys,
                    )
                )
        actions = [queues.pending[i].remove() for i in range(len(refs))]
        try:
            queues(key).update(
                actions=[*actions, queues.indexed.set(refs[-1].end_offset)], condition=queues.indexed == indexed
            )
        except UpdateError as error:
            if is_conditional(error):
                return indexed
            raise
        return refs[-1].end_offset

    # ---- reading ---------------------------------------------------------------------------------

    def next_offsets(self, queues: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The next offset of each (topic, queue) that has an item, read strongly consistent: one BatchGetItem per
        100 queues, of two attributes each."""
        keys = {queue_key(topic, queue): (topic, queue) for topic, queue in queues}
        items = self.tables.queues.batch_get(list(keys), consistent_read=True, attributes_to_get=["key", "next_offset"])
        return {keys[item.key]: int(item.next_offset) for item in items}

    def readable(self, topic: str, queue: int, through: int, queues: int) -> KnownQueue:
        """The queue for a read of offsets below `through`: as read lately if that holds them all, else read now,
        with the items of the topic's other queues (of `queues`) this process no longer knows, in one BatchGetItem
        (a receive goes through them next). known_queues.py says why that is safe."""
        known = self.known.get(topic, queue, through)
        if known is not None:
            return known
        others = [other for other in range(queues) if other != queue and self.known.get(topic, other, 0) is None]
        keys = {queue_key(topic, one): one for one in [queue, *others[: BATCH_GET_KEYS - 1]]}
        items = self.tables.queues.batch_get(list(keys), consistent_read=True)
        states = {keys[item.key]: state_of(item) for item in items}
        for other, state in states.items():
            if other != queue:
                self.known.read(topic, other, state)
        return self.known.read(topic, queue, states.get(queue, EMPTY))

    def known_batches(
        self, topic: str, queue: int, known: KnownQueue, start: int, end: int, window: int
    ) -> list[BatchRef]:
        """`batches` of a queue as `readable` gave it: the batches seen before when they hold [start, end), else
        those up to LOOKAHEAD offsets further too (one Query for the reads that follow)."""
        refs = self.known.tiling(known, start, end)
        if refs is None:
            ahead = max(end, min(known.state.next_offset, start + LOOKAHEAD))
            learned = self.batches(topic, queue, known.state, start, ahead, window)
            self.known.learn(known, learned)
            refs = [ref for ref in learned if ref.first_offset < end]
        return refs

    def state(self, topic: str, queue: int) -> QueueState:
        try:
            return state_of(self.tables.queues.get(queue_key(topic, queue), consistent_read=True))
        except DoesNotExist:
            return EMPTY

    def index_through(self, topic: str, queue: int, state: QueueState, end: int) -> QueueState:
        """Index entries until everything below `end` has a `batches` item; return the queue's state then."""
        while state.indexed < end and state.pending:
            self.index(topic, queue, state.indexed, [ref.entry() for ref in state.pending])
            state = self.state(topic, queue)
        return state

    def batches(self, topic: str, queue: int, state: QueueState, start: int, end: int, window: int) -> list[BatchRef]:
        """The batches holding offsets [start, end), in order, as of `state`. `window`: the most messages one
        batch holds (so one bounded Query usually finds the batch holding `start`). BatchesMoved if some of them
        have no item any more (the queue's low end moved past them since `state` was read)."""
        refs: list[BatchRef] = []
        if start < state.indexed:
            batches = self.tables.batches
            key, last = queue_key(topic, queue), min(end, state.indexed) - 1
            span = batches.first_offset.between(max(0, start - window + 1), last)
            refs = [_ref(item) for item in batches.query(key, span, consistent_read=True)]
            refs = [ref for ref in refs if ref.end_offset > start]
            if not refs or refs[0].first_offset > start:  # a batch bigger than `window` holds `start`
                before = batches.query(
                    key, batches.first_offset <= start, scan_index_forward=False, limit=1, consistent_read=True
                )
                refs = [_ref(item) for item in before if item.first_offset + item.count > start] + refs
        refs += [ref for ref in state.pending if ref.end_offset > start and ref.first_offset < end]
        covered = start
        for ref in refs:
            if ref.first_offset > covered:  # a hole: the batches there were deleted after `state` was read
                raise BatchesMoved(topic, queue, covered)
            covered = ref.end_offset
        if covered < min(end, state.next_offset):
            raise BatchesMoved(topic, queue, covered)
        return refs

    def indexed_batches(self, topic: str, queue: int, newest_first: bool = False, condition=None, below=None):
        """The queue's `batches` items (a paged Query; `below`: those starting below that offset), as BatchRef."""
        batches = self.tables.batches
        span = None if below is None else batches.first_offset < below
        items = batches.query(
            queue_key(topic, queue),
            span,
            filter_condition=condition,
            scan_index_forward=not newest_first,
            consistent_read=True,
        )
        return (_ref(item) for item in items)

    def first_offset_at(self, topic: str, queue: int, file: str, position: int) -> int | None:
        """The first offset of the indexed batch holding `position` of `file` (None: no batch item holds it).
        One Query of the `by_file` index; as that index lags its table a little, a batch indexed a moment ago
        is then looked for with a filtered Query of the queue's items."""
        batches, key = self.tables.batches, queue_key(topic, queue)
        near = batches.by_file.query(file, batches.position <= position, scan_index_forward=False, limit=1)
        for item in near:
            if item.key == key:
                found = batches.get(key, item.first_offset, consistent_read=True)
                return int(found.first_offset) if position < found.position + found.length else None
        holds = (batches.file == file) & (batches.position <= position)
        for ref in self.indexed_batches(topic, queue, condition=holds):
            if position < ref.position + ref.length:
                return ref.first_offset
        return None

    def walk(self, topic: str, queue: int, state: QueueState, start: int) -> Iterator[BatchRef]:
        """Every batch from the one starting at `start` (a batch boundary) on, oldest first, paging lazily."""
        if start < state.indexed:
            batches = self.tables.batches
            items = batches.query(queue_key(topic, queue), batches.first_offset >= start, consistent_read=True)
            for item in items:
                if item.first_offset >= state.indexed:
                    break
                yield _ref(item)
        yield from (ref for ref in state.pending if ref.first_offset >= start)

    def drop_below(self, topic: str, queue: int, offset: int) -> int:
        """Delete the `batches` items of batches wholly below `offset` (moved cold, or expired); return how many."""
        self.known.forget(topic, queue)  # its low end moved (the caller moved it)
        doomed = [ref for ref in self.indexed_batches(topic, queue, below=offset) if ref.end_offset <= offset]
        batches, key = self.tables.batches, queue_key(topic, queue)
        with batches.batch_write() as writer:
            for ref in doomed:
                writer.delete(batches(key, ref.first_offset))
        return len(doomed)

    def drop(self, topic: str, queue: int) -> None:
        """Delete the queue's item and all its `batches` items (topic deletion)."""
        key = queue_key(topic, queue)
        self.known.forget(topic, queue)
        with self.tables.batches.batch_write() as writer:
            for item in self.tables.batches.query(key):
                writer.delete(item)
        self.tables.queues(key).delete()


def state_of(item) -> QueueState:
    """The state in a queue item (read, or returned by an update)."""
    indexed = int(item.indexed)
    return QueueState(
        int(item.min_offset),
        int(item.hot_offset),
        indexed,
        int(item.next_offset),
        decode_entries(item.pending or [], indexed),
        item.dirty is not None,
    )


def _ref(item) -> BatchRef:
    return BatchRef(
        int(item.first_offset),
        int(item.count),
        item.file,
        int(item.position),
        int(item.length),
        int(item.store_timestamp),
        bool(item.keys),
    )
