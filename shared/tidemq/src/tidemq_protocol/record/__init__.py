"""Commit-log records: the format every commit log, tier segment and serverless segment file holds, one module per
version behind one reader.

A commit log is a sequence of records; a put of N messages writes N consecutive records with one write(), the
last one flagged END_OF_BATCH. All integers are little-endian. Every record starts with its total size and a magic
byte naming its version; everything since version 2 writes version 2, and every reader reads both, so old commit
logs, tier segments and serverless files stay readable.

    v2.py          version 2 (magic 0xD2), the one written: its layout, what the producer and the broker write
    v1.py          version 1 (magic 0xD1), read only: its layout
    reader.py      every read, of either version: the version told by the magic byte once, every record checked
                   once (magic, sizes, CRCs), then decoded; recovery's scan
    produced.py    the broker's check of what a producer sends
    properties.py  a record's properties: keys, tag, message group and user properties, and a view of them
                   read where a record lies (what a SQL92 filter reads)
    ids.py         message ids: a record's position and size; timer ids
    view.py        a message read where its record lies, its fields decoded as they are read (consumers)

Importers use this package's names (`tidemq_protocol.record.decode_records`); version 1's constants are here with
the suffix _V1 (MAGIC_V1, HEADER_SIZE_V1, ...), version 2's without.
"""

from __future__ import annotations

from .ids import is_timer_id, message_id, new_timer_id, parse_message_id, timer_due_ms
from .produced import ProducedRecords, check_produced
from .properties import (
    KEYS,
    MAX_MESSAGE_GROUP,
    MAX_PROPERTIES,
    MAX_PROPERTIES_BYTES,
    MESSAGE_GROUP,
    MESSAGE_ID,
    RESENT_FOR_GROUP,
    RESERVED_PROPERTIES,
    TAGS,
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    CheckedProperties,
    PropertiesView,
    addressed_to,
    check_message_group,
    check_properties,
    decode_properties,
    encode_properties,
    message_group_of,
    property_map,
    with_message_id,
)
from .reader import (
    SHORTEST_HEADER,
    RecordHeader,
    VerifiedRecords,
    decode_message,
    decode_records,
    decode_run,
    properties_at,
    queue_offset_at,
    read_by_id,
    read_header,
    rebase,
    record_starts,
    scan_batches,
    size_at,
    store_timestamp_at,
    unwritten_at,
    verify_records,
    view_records,
)
from .v1 import CRC_START as CRC_START_V1
from .v1 import HEADER as HEADER_V1
from .v1 import HEADER_SIZE as HEADER_SIZE_V1
from .v1 import MAGIC as MAGIC_V1
from .v2 import (
    ANY_QUEUE,
    BROKER_CRC_AT,
    CRC_AT,
    CRC_START,
    END_OF_BATCH,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    MAX_TOPIC_BYTES,
    PHYSICAL_AT,
    QUEUE_AT,
    QUEUE_OFFSET_AT,
    SEND_KEY,
    SEND_KEY_HEAD,
    STORE_TIMESTAMP_AT,
    TOPIC_LENGTH_AT,
    PendingRecord,
    encode_batch,
    encode_record,
    encode_stored,
    flag_record,
    is_send_key,
    max_record_size,
    record_size,
    stamp,
)
from .view import RecordView

__all__ = [
    "ANY_QUEUE",
    "BROKER_CRC_AT",
    "CRC_AT",
    "CRC_START",
    "CRC_START_V1",
    "END_OF_BATCH",
    "HEADER",
    "HEADER_SIZE",
    "HEADER_SIZE_V1",
    "HEADER_V1",
    "KEYS",
    "MAGIC",
    "MAGIC_V1",
    "MAX_MESSAGE_GROUP",
    "MAX_PROPERTIES",
    "MAX_PROPERTIES_BYTES",
    "MAX_TOPIC_BYTES",
    "MESSAGE_GROUP",
    "MESSAGE_ID",
    "PHYSICAL_AT",
    "QUEUE_AT",
    "QUEUE_OFFSET_AT",
    "RESENT_FOR_GROUP",
    "RESERVED_PROPERTIES",
    "SEND_KEY",
    "SEND_KEY_HEAD",
    "SHORTEST_HEADER",
    "STORE_TIMESTAMP_AT",
    "TAGS",
    "TIMER_DELAY_MS",
    "TIMER_DELIVER_MS",
    "TOPIC_LENGTH_AT",
    "CheckedProperties",
    "PendingRecord",
    "ProducedRecords",
    "PropertiesView",
    "RecordHeader",
    "RecordView",
    "VerifiedRecords",
    "addressed_to",
    "check_message_group",
    "check_produced",
    "check_properties",
    "decode_message",
    "decode_properties",
    "decode_records",
    "decode_run",
    "encode_batch",
    "encode_properties",
    "encode_record",
    "encode_stored",
    "flag_record",
    "is_send_key",
    "is_timer_id",
    "max_record_size",
    "message_group_of",
    "message_id",
    "new_timer_id",
    "parse_message_id",
    "properties_at",
    "property_map",
    "queue_offset_at",
    "read_by_id",
    "read_header",
    "rebase",
    "record_size",
    "record_starts",
    "scan_batches",
    "size_at",
    "stamp",
    "store_timestamp_at",
    "timer_due_ms",
    "unwritten_at",
    "verify_records",
    "view_records",
    "with_message_id",
]
