"""The `%TRACE%` record format (functions/logic/trace_records.py): what a flush writes reads back as each
message's events, runs across bucket boundaries and records cut at KEYS_MOST buckets included."""

from __future__ import annotations

from array import array

from functions.logic import trace, trace_records
from functions.logic.trace_writer import Pending
from tidemq_protocol.api.trace import TraceEventKind
from tidemq_protocol.message import StoredMessage
from tidemq_store import PutResult


def stored_pending(results: list[PutResult], at: int, topic: str, common: dict) -> Pending:
    """What `trace.stored` hands the writer for `results`."""
    return Pending("stored", at, topic, None, trace.stored_runs(results), len(results), common)


def stored_as(message, offset: int) -> StoredMessage:
    """A record as `%TRACE%` would give it back."""
    return StoredMessage(trace.TRACE_TOPIC, 0, offset, "t", 0, 0, message.body, message.keys, message.tag, {})


def looked_up(topic: str, queue: int, offset: int) -> StoredMessage:
    return StoredMessage(topic, queue, offset, f"id-{queue}-{offset}", 0, 0, b"", (), None, {})


def events(records, topic: str, queue: int, offset: int):
    found = looked_up(topic, queue, offset)
    return [event for i, m in enumerate(records) for event in trace_records.events_of(stored_as(m, i), found)]


def test_a_batch_s_consecutive_offsets_are_one_run_keyed_by_every_bucket_it_touches():
    bucket = trace_records.BUCKET_OFFSETS
    results = [PutResult(f"m{o}", 3, o, 1000) for o in range(bucket - 2, bucket + 3)]  # across a bucket boundary
    (record,) = trace_records.encode([stored_pending(results, 7, "orders", {trace_records.USER: "alice"})])
    assert record.tag == "stored" and record.keys[1:] == ("orders@3@0", "orders@3@1")
    (event,) = events([record], "orders", 3, bucket)
    assert (event.event, event.time_unix_nano) == (TraceEventKind.STORED, 7)
    assert event.attributes[trace_records.USER] == "alice" and event.attributes[trace_records.STORE_TIME] == 1000
    assert (event.attributes[trace_records.OFFSET], event.attributes[trace_records.PARTITION]) == (bucket, "3")
    assert events([record], "orders", 3, bucket + 3) == [] and events([record], "orders", 2, bucket) == []
    assert events([record], "other", 3, bucket) == []


def test_deliveries_of_one_flush_share_a_record_and_keep_their_own_attempts_and_times():
    first = Pending("pop", 10, "orders", "g", array("q", [0, 5, 1, 0, 6, 1, 0, 7, 2]), 3, {trace_records.METHOD: "pop"})
    again = Pending("pop", 20, "orders", "g", array("q", [0, 5, 2]), 1, {trace_records.METHOD: "pop"})
    records = trace_records.encode([first, again])
    assert sorted(r.tag for r in records) == ["delivered", "retried"]  # one record per event, both batches in it
    shown = sorted(events(records, "orders", 0, 5), key=lambda e: e.time_unix_nano)
    assert [(e.event, e.time_unix_nano, e.attributes[trace_records.ATTEMPT]) for e in shown] == [
        (TraceEventKind.DELIVERED, 10, 1),
        (TraceEventKind.RETRIED, 20, 2),
    ]
    assert {e.attributes[trace_records.GROUP] for e in shown} == {"g"} and len({e.identity for e in shown}) == 2


def test_a_record_is_cut_at_keys_most_buckets_and_every_part_reads_back():
    bucket, most = trace_records.BUCKET_OFFSETS, trace_records.KEYS_MOST
    spread = [PutResult(f"m{i}", 0, i * bucket, 1) for i in range(most + 5)]  # one run per bucket
    records = trace_records.encode([stored_pending(spread, 1, "t", {})])
    assert len(records) == 2 and all(len(r.keys) - 1 <= most for r in records)
    assert len({r.keys[0] for r in records}) == 2
    assert len(events(records, "t", 0, (most + 4) * bucket)) == 1


def test_a_record_of_another_version_or_damaged_holds_no_event():
    (record,) = trace_records.encode([stored_pending([PutResult("m", 0, 0, 1)], 1, "t", {})])
    newer = type(record)(record.body.replace(b'"v":1', b'"v":2'), 0, record.keys, record.tag)
    assert events([newer], "t", 0, 0) == [] and events([type(record)(b"{", 0, record.keys)], "t", 0, 0) == []


def test_a_put_over_several_queues_keeps_each_message_s_place_and_a_timer_s_is_not_recorded():
    mixed = [PutResult("m1", 1, 4, 9), PutResult("m2", 2, 0, 9), PutResult("m3", 1, 5, 9)]
    records = trace_records.encode([stored_pending(mixed, 3, "t", {})])
    assert [len(events(records, "t", queue, offset)) for queue, offset in [(1, 4), (1, 5), (2, 0)]] == [1, 1, 1]
    assert events(records, "t", 2, 1) == [] and events(records, "t", 1, 6) == []
    assert trace_records.encode([stored_pending([PutResult("timer", 0, -1, 9)], 3, "t", {})]) == []
