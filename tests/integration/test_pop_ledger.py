"""The pop ledgers, each test on both: the embedded one on real RocksDB files and the serverless one on DynamoDB (a
moto server over HTTP, or LocalStack): claims and settlements hold their conditions (one claim of two that read the
same state wins; a handle names one delivery; a dead-lettered message's handles say so, within MARK_SLOTS marks a
queue), concurrent receivers never claim one offset twice, and what was written is there after the ledger is opened
again."""

from __future__ import annotations

import math
import struct
import threading
import uuid

import pytest

from tidemq_protocol.errors import InvalidArgument, InvalidReceiptHandle
from tidemq_store.embedded.pop import RocksPopLedger
from tidemq_store.pop.api import MARK_SLOTS, Claim, Entry, PopLedger, QueueLedger, Receipt, Settled, Settlement
from tidemq_store.pop.known import KnownLedgers
from tidemq_store.rocks import Families
from tidemq_store.serverless.pop import MOST_DELIVERED, DynamoDbPopLedger
from tidemq_store.serverless.tables import Tables


@pytest.fixture(
    params=[
        "embedded",
        "embedded, known",
        pytest.param("serverless", marks=pytest.mark.local_aws),
        pytest.param("serverless, known", marks=[pytest.mark.local_aws, pytest.mark.long]),  # embedded's "known" stays
    ]
)
def open_ledger(request, tmp_path):
    """Open the backend's ledger (each opening sees what the ones before wrote; the caller closes it), or the same
    with its reads answered from what the opening knows (`KnownLedgers`, as the stores open them). The serverless
    ones are marked `local_aws`, so `make test-localstack` runs them too."""
    backend, _, known = request.param.partition(", ")
    if backend == "serverless":
        request.getfixturevalue("aws_env")
        tables = Tables(f"pop{uuid.uuid4().hex[:8]}")
        tables.create_missing()

    def opener(sync: bool = True) -> PopLedger:
        if backend == "serverless":
            ledger: PopLedger = DynamoDbPopLedger(Tables(tables.prefix))  # its own connections, as another process
        else:
            ledger = RocksPopLedger(tmp_path / "pop", sync=sync)
        return KnownLedgers(ledger, math.inf) if known else ledger

    return opener


@pytest.fixture
def ledger(open_ledger):
    ledger = open_ledger(sync=False)
    yield ledger
    ledger.close()


def held(offset: int, nonce: int, attempt: int = 1, visible_at_ms: int = 10_000) -> Entry:
    return Entry(offset, attempt, nonce, visible_at_ms)


def test_a_group_that_never_received_has_cursor_0_and_no_entries(ledger):
    assert ledger.read("g", "t", 0) == QueueLedger(0)


def test_a_claim_moves_the_cursor_and_adds_its_entries_only_from_where_it_read(ledger):
    assert ledger.claim("g", "t", 0, Claim(0, 3, (held(0, 11), held(2, 12))))  # offset 1 filtered out
    assert ledger.read("g", "t", 0) == QueueLedger(3, (held(0, 11), held(2, 12)))
    assert ledger.read("g", "t", 0).progress == 0
    assert not ledger.claim("g", "t", 0, Claim(0, 2, (held(0, 99), held(1, 98))))  # read before the first claim
    assert ledger.read("g", "t", 0) == QueueLedger(3, (held(0, 11), held(2, 12)))
    assert ledger.read("g", "t", 1) == QueueLedger(0)  # queues, groups and topics apart
    assert ledger.read("h", "t", 0) == QueueLedger(0)
    assert ledger.read("g", "u", 0) == QueueLedger(0)


def test_a_delivery_again_wins_only_against_the_nonce_it_read(ledger):
    ledger.claim("g", "t", 0, Claim(0, 1, (held(0, 11),)))
    again = held(0, 21, attempt=2)
    assert ledger.claim("g", "t", 0, Claim(1, 1, (again,), replaced={0: 11}))
    assert not ledger.claim("g", "t", 0, Claim(1, 1, (held(0, 31, attempt=2),), replaced={0: 11}))
    assert not ledger.claim("g", "t", 0, Claim(1, 1, dropped=(again,), replaced={0: 11}))
    assert ledger.read("g", "t", 0).entries == (again,)
    assert ledger.claim("g", "t", 0, Claim(1, 1, dropped=(again,), replaced={0: 21}))  # dead-lettered, say
    assert ledger.read("g", "t", 0) == QueueLedger(1)


def test_settlements_name_one_delivery(ledger):
    ledger.claim("g", "t", 0, Claim(0, 4, (held(0, 11), held(1, 12), held(3, 13))))
    changed = held(1, 22, visible_at_ms=50_000)
    outcomes = ledger.settle(
        "g",
        "t",
        [
            Settlement(Receipt(0, 0, 11)),  # ack
            Settlement(Receipt(0, 0, 11)),  # the same ack again, in the same call
            Settlement(Receipt(0, 1, 12), changed),  # a change of invisible time: a new nonce
            Settlement(Receipt(0, 3, 99)),  # forged
            Settlement(Receipt(0, 2, 12)),  # filtered out: below the cursor, never an entry
            Settlement(Receipt(0, 9, 12)),  # past the cursor
        ],
    )
    assert outcomes == [
        Settled.DONE,
        Settled.ALREADY_ACKED,
        Settled.DONE,
        Settled.STALE,
        Settled.ALREADY_ACKED,
        Settled.STALE,
    ]
    assert ledger.read("g", "t", 0) == QueueLedger(4, (changed, held(3, 13)))
    assert ledger.settle("g", "t", [Settlement(Receipt(0, 1, 12))]) == [Settled.STALE]  # the handle before
    assert ledger.settle("g", "t", [Settlement(Receipt(0, 0, 11), held(0, 5))]) == [Settled.STALE]  # acked
    assert ledger.settle("g", "t", [Settlement(Receipt(0, 1, 22))]) == [Settled.DONE]
    assert ledger.read("g", "t", 0) == QueueLedger(4, (held(3, 13),))


def test_a_dead_lettering_marks_its_offset_until_a_message_mark_slots_further_takes_the_slot(ledger):
    far = MARK_SLOTS  # its mark's slot is offset 0's
    ledger.claim("g", "t", 0, Claim(0, 2, (held(0, 11), held(1, 12))))
    ledger.claim("g", "t", 0, Claim(2, far + 1, (held(far, 13),)))  # 2 .. far - 1 filtered out
    lettered = Settlement(Receipt(0, 0, 11), dead_lettered=True)
    acks = [Settlement(Receipt(0, 0, 11)), Settlement(Receipt(0, 1, 12))]
    assert ledger.settle("g", "t", [lettered, *acks]) == [Settled.DONE, Settled.DEAD_LETTERED, Settled.DONE]
    assert ledger.read("g", "t", 0) == QueueLedger(far + 1, (held(far, 13),))  # a mark is no entry
    assert ledger.was_dead_lettered("g", "t", 0, 0) and not ledger.was_dead_lettered("g", "t", 0, 1)
    assert not ledger.was_dead_lettered("h", "t", 0, 0) and not ledger.was_dead_lettered("g", "t", 1, 0)
    after = [Settlement(Receipt(0, 0, 99)), Settlement(Receipt(0, 0, 5), held(0, 6)), Settlement(Receipt(0, 1, 12))]
    assert ledger.settle("g", "t", after) == [Settled.DEAD_LETTERED, Settled.DEAD_LETTERED, Settled.ALREADY_ACKED]
    assert ledger.settle("g", "t", [Settlement(Receipt(0, far, 13), dead_lettered=True)]) == [Settled.DONE]
    acks = [Settlement(Receipt(0, 0, 11)), Settlement(Receipt(0, far, 13))]
    assert ledger.settle("g", "t", acks) == [Settled.ALREADY_ACKED, Settled.DEAD_LETTERED]  # offset 0 forgotten
    assert ledger.read("g", "t", 0) == QueueLedger(far + 1)


def test_marks_are_there_after_reopening_and_go_with_their_group_or_topic(open_ledger):
    ledger = open_ledger()
    ledgers = [("g", "t"), ("g", "t2"), ("h", "t")]
    for group, topic in ledgers:
        ledger.claim(group, topic, 1, Claim(0, 1, (held(0, 1),)))
        ledger.settle(group, topic, [Settlement(Receipt(1, 0, 1), dead_lettered=True)])
    ledger.close()
    ledger = open_ledger()
    assert all(ledger.was_dead_lettered(group, topic, 1, 0) for group, topic in ledgers)
    ledger.forget_topic("t")
    assert [ledger.was_dead_lettered(group, topic, 1, 0) for group, topic in ledgers] == [False, True, False]
    ledger.forget_group("g")
    assert not ledger.was_dead_lettered("g", "t2", 1, 0)
    ledger.close()


def test_a_rocksdb_ledger_written_before_there_were_marks_reads_and_settles_as_it_did(tmp_path):
    """Its cursor and entry as an older version wrote them, byte for byte (pop ledgers have no golden file)."""
    rocks = Families(tmp_path / "pop", ("ledger",))
    key = b"g\x00t\x00" + struct.pack(">I", 0)
    rocks.views["ledger"][key] = struct.pack("<Q", 2)
    rocks.views["ledger"][key + struct.pack(">Q", 1)] = struct.pack("<IQQ", 1, 12, 10_000)
    rocks.close()
    ledger = RocksPopLedger(tmp_path / "pop", sync=False)
    assert ledger.read("g", "t", 0) == QueueLedger(2, (held(1, 12),))
    acks = [Settlement(Receipt(0, 0, 11)), Settlement(Receipt(0, 1, 12))]
    assert ledger.settle("g", "t", acks) == [Settled.ALREADY_ACKED, Settled.DONE]
    assert not ledger.was_dead_lettered("g", "t", 0, 0)
    ledger.close()


def test_receipt_handles_round_trip_and_anything_else_is_refused():
    receipt = Receipt(7, 2**40 + 3, 2**62 + 5)
    assert Receipt.of(receipt.handle()) == receipt
    assert len(receipt.handle()) == 28
    for handle in ["", "x", "é", receipt.handle()[:-4], receipt.handle() + "AAAA", Receipt(1, 2, 0).handle()]:
        with pytest.raises(InvalidReceiptHandle):
            Receipt.of(handle)


@pytest.fixture
def claimed_through(request) -> int:
    """How far the concurrent receivers claim: each read returns every entry claimed so far, and a moto server
    answers a few hundred requests a second, so the serverless run stops sooner (it still takes many rounds); reads
    answered from what the ledger knows are quick enough for one thread to run far ahead, so those go further."""
    return {"embedded": 2000, "embedded, known": 5000}.get(request.node.callspec.params["open_ledger"], 300)


def test_concurrent_receivers_claim_each_offset_once(ledger, claimed_through):
    claimed: list[list[int]] = [[] for _ in range(8)]

    def receiver(index: int) -> None:
        nonce = index << 32
        while True:
            ledger_now = ledger.read("g", "t", 0)
            if ledger_now.cursor >= claimed_through:
                return
            nonce += 1
            new = [held(offset, nonce) for offset in range(ledger_now.cursor, ledger_now.cursor + 7)]
            if ledger.claim("g", "t", 0, Claim(ledger_now.cursor, ledger_now.cursor + 7, tuple(new))):
                claimed[index] += [entry.offset for entry in new]

    threads = [threading.Thread(target=receiver, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = sorted(offset for offsets in claimed for offset in offsets)
    assert every == list(range(len(every))) and len(every) >= claimed_through
    assert sum(1 for offsets in claimed if offsets) > 1  # they did run at once
    assert len(ledger.read("g", "t", 0).entries) == len(every)


def test_the_ledger_is_there_after_reopening_and_groups_and_topics_are_forgotten(open_ledger):
    ledger = open_ledger()
    for group in ("g", "h"):
        for topic in ("t", "t2"):
            ledger.claim(group, topic, 1, Claim(0, 2, (held(0, 1), held(1, 2))))
    ledger.settle("g", "t", [Settlement(Receipt(1, 0, 1))])
    ledger.close()
    ledger = open_ledger()
    assert ledger.read("g", "t", 1) == QueueLedger(2, (held(1, 2),))
    ledger.forget_topic("t")
    assert ledger.read("g", "t", 1) == QueueLedger(0) and ledger.read("h", "t", 1) == QueueLedger(0)
    assert ledger.read("g", "t2", 1).cursor == 2
    ledger.forget_group("g")
    assert ledger.read("g", "t2", 1) == QueueLedger(0)
    assert ledger.read("h", "t2", 1).cursor == 2
    ledger.close()


def test_a_claim_drops_any_number_of_entries(ledger):
    for start in (0, 75):
        assert ledger.claim(
            "g", "t", 0, Claim(start, start + 75, tuple(held(o, o + 1) for o in range(start, start + 75)))
        )
    gone = tuple(held(o, o + 1) for o in range(150))  # retention took their messages, say
    assert ledger.claim("g", "t", 0, Claim(150, 150, dropped=gone, replaced={o: o + 1 for o in range(150)}))
    assert ledger.read("g", "t", 0) == QueueLedger(150)


@pytest.mark.local_aws
def test_a_serverless_claim_delivering_more_than_a_transaction_holds_is_refused(open_test_store, tmp_path, aws_env):

    store = open_test_store(
        backend="serverless", efs_path=tmp_path / "efs", dynamodb_prefix=f"pop{uuid.uuid4().hex[:8]}"
    )
    many = tuple(held(o, o + 1) for o in range(MOST_DELIVERED + 1))
    with pytest.raises(InvalidArgument, match="at most 99"):
        store.pop_ledger.claim("g", "t", 0, Claim(0, len(many), many))
    assert store.pop_ledger.read("g", "t", 0) == QueueLedger(0)
