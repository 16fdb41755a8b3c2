"""Write the golden files of TideMQ's on-disk formats with the real writers: run once per new format version.

    .venv/bin/python -m tests.golden.make_golden            # writes the golden files that do not exist yet

Each writer below is given fixed inputs (the same few messages, fixed born and store timestamps, a fixed segment
key) so that it writes the same bytes every time; README.md beside this file says what each file holds. The
script never overwrites a file: a golden file is what readers of that format must read for ever, so a change of
format is a new version with a new file (add its writer here, run the script, check the file in), and the old
file stays, with its tests. The golden tests (tests/unit/test_golden_formats.py,
tests/integration/test_golden_serverless.py) call these writers again and compare their bytes with the files.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from devtools.moto_server import LocalAws
from tidemq_protocol import kv_snapshot as snapshot
from tidemq_protocol.kv import NamespaceConfig
from tidemq_protocol.message import Message
from tidemq_protocol.record import ANY_QUEUE, PendingRecord, encode_properties, encode_record
from tidemq_store import StoreConfig, TopicConfig, open_store
from tidemq_store.serverless import segments

from ..legacy_records import encode_v1_batch

GOLDEN = Path(__file__).parent
TOPIC = "orders"
QUEUES = 2
TOPIC_CREATED_AT = 1_500_000_000_000
"""When the readers' stores make the topic: before every store timestamp below, so each record is the topic's."""

COMMITLOG_V1 = "commitlog_v1.bin"
COMMITLOG_V2 = "commitlog_v2.bin"
TIER_COMMITLOG = "tier_commitlog_v2_queue0.bin"
TIER_CONSUMEQUEUE = "tier_consumequeue_queue0.bin"
SERVERLESS_SEGMENT = "serverless_segment_v2.bin"
KV_SNAPSHOT = "kv_snapshot_1.jsonl"

PUTS = [  # (store timestamp, messages): three puts of messages with and without keys, tag, properties and body
    (
        1_700_000_001_000,
        [
            Message(b"first order", 0, ("order-1",), "TagA", {"color": "blue"}, 1_700_000_000_001),
            Message(b"", 1, born_timestamp=1_700_000_000_002),
            Message(b"\x00\x01\x02\xfe\xff", 0, ("order-2", "order-3"), "TagB", born_timestamp=1_700_000_000_003),
        ],
    ),
    (
        1_700_000_002_000,
        [
            Message("héllo wörld ✓".encode(), 1, (), "TagA", {"note": "ünïcode ✓", "empty": ""}, 1_700_000_000_004),
            Message(b"", 0, ("order-4",), None, {"a b": "c d"}, 1_700_000_000_005),
        ],
    ),
]
PRODUCED = (  # a put of records a producer encoded (`put_records`, default queue 0), stored as sent
    1_700_000_003_000,
    [
        encode_record(TOPIC.encode(), ANY_QUEUE, 1_700_000_000_006, encode_properties(("order-5",), "TagC", {}), b"p"),
        encode_record(TOPIC.encode(), 1, 1_700_000_000_007, b"", b"x" * 40),
    ],
)
V1_PUTS = [  # the version 1 commit log: the first two puts as the code before version 2 wrote them, years earlier
    (1_600_000_001_000, [(0, 0), (1, 0), (0, 1)]),  # (queue, queue offset) of each message of PUTS[0]
    (1_600_000_002_000, [(1, 1), (0, 2)]),
]
SERVERLESS_KEY = 0x5EED01
"""The serverless writer's file key (random in a real writer): its file is named 5eed01."""
KV_NAMESPACE = "golden"
KV_WRITES_AT = 1_700_000_004_000


@contextmanager
def fixed_clock(at_ms: int) -> Iterator[list[int]]:
    """`tidemq_protocol.clock.now_ms` returns `now[0]` meanwhile (set it to move the clock)."""
    now = [at_ms]
    with mock.patch("tidemq_protocol.clock.now_ms", lambda: now[0]):
        yield now


class _FixedKey:
    """Stands in for the `random` module of segments.py: every new file gets SERVERLESS_KEY."""

    @staticmethod
    def getrandbits(bits: int) -> int:
        return SERVERLESS_KEY


def commitlog_v1() -> bytes:
    """A commit-log segment of version 1 records, starting at position 0: PUTS' first two puts."""
    parts: list[bytes] = []
    for (stored, placed), (_, messages) in zip(V1_PUTS, PUTS, strict=True):
        records = [
            PendingRecord(queue, offset, m.born_timestamp, encode_properties(m.keys, m.tag, m.properties), m.body)
            for (queue, offset), m in zip(placed, messages, strict=True)
        ]
        parts.append(encode_v1_batch(TOPIC.encode(), records, sum(map(len, parts)), stored))
    return b"".join(parts)


def put_golden_messages(store) -> None:
    """PUTS and PRODUCED into `store` (a topic TOPIC of QUEUES queues), each at its store timestamp."""
    with fixed_clock(TOPIC_CREATED_AT) as now:
        store.create_topic(TopicConfig(name=TOPIC, queues=QUEUES, retention_ms=None))
        for stored, messages in PUTS:
            now[0] = stored
            store.put(TOPIC, messages)
        now[0], records = PRODUCED
        store.put_records(TOPIC, b"".join(records), 0)


def embedded_files(scratch: Path) -> dict[str, bytes]:
    """The embedded engine's commit log (version 2) and its posix cold tier's files of queue 0, after the golden
    puts: the engine writes each put with one append, the tier uploads each queue's records as the log holds them."""
    home, tier = scratch / "embedded", scratch / "tier"
    config = StoreConfig(home=home, tier="posix", tier_path=tier, tier_upload_age_ms=3_600_000)
    store = open_store(config)
    try:
        put_golden_messages(store)
        store.upload_now(TOPIC)
    finally:
        store.close()
    (segment,) = (home / "commitlog").iterdir()
    return {
        COMMITLOG_V2: segment.read_bytes(),
        TIER_COMMITLOG: _only_file(tier / TOPIC / "0" / "commitlog").read_bytes(),
        TIER_CONSUMEQUEUE: _only_file(tier / TOPIC / "0" / "consumequeue").read_bytes(),
    }


def serverless_segment(scratch: Path, tables: str = "golden") -> bytes:
    """The serverless backend's one segment file after the golden puts (its DynamoDB tables named from `tables`:
    AWS_ENDPOINT_URL says where)."""
    config = StoreConfig(home=scratch, backend="serverless", efs_path=scratch / "efs", dynamodb_prefix=tables)
    with mock.patch.object(segments, "random", _FixedKey()):
        store = open_store(config)
        try:
            put_golden_messages(store)
        finally:
            store.close()
    return _only_file(scratch / "efs" / "segments").read_bytes()


def kv_snapshot(scratch: Path) -> bytes:
    """A KV snapshot file as `tidemq kv export` writes it: the embedded engine's export of a namespace with a
    key overwritten, one deleted, one with a TTL and one with an empty value."""
    store = open_store(StoreConfig(home=scratch / "store"))
    try:
        with fixed_clock(KV_WRITES_AT):
            kv = store.kv
            kv.create_namespace(NamespaceConfig(KV_NAMESPACE, history_ms=86_400_000))
            kv.put(KV_NAMESPACE, "config/color", b"red")
            kv.put(KV_NAMESPACE, "config/color", b"blue")
            kv.put(KV_NAMESPACE, "config/size", "größe ✓".encode())
            kv.put(KV_NAMESPACE, "empty", b"")
            kv.put(KV_NAMESPACE, "gone", b"soon deleted")
            kv.delete(KV_NAMESPACE, "gone")
            kv.put(KV_NAMESPACE, "session/1", bytes(range(8)), ttl_ms=3_600_000)
            exported = kv.export(KV_NAMESPACE)
        path = scratch / KV_SNAPSHOT
        snapshot.write(exported, str(path))
        return path.read_bytes()
    finally:
        store.close()


def _only_file(directory: Path) -> Path:
    (file,) = (path for path in directory.iterdir() if not path.name.startswith("."))
    return file


def golden_files(scratch: Path) -> dict[str, bytes]:
    """Every golden file's name and bytes, written in `scratch` by the real writers."""
    files = {COMMITLOG_V1: commitlog_v1(), **embedded_files(scratch)}
    files[KV_SNAPSHOT] = kv_snapshot(scratch)
    with LocalAws() as aws, mock.patch.dict("os.environ", aws.env):
        files[SERVERLESS_SEGMENT] = serverless_segment(scratch / "serverless")
    return files


def main() -> int:
    """Write the golden files that do not exist yet; 1 if a writer no longer writes an existing one's bytes."""
    written, changed = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for name, data in golden_files(Path(scratch)).items():
            target = GOLDEN / name
            if not target.exists():
                target.write_bytes(data)
                written.append(name)
            elif target.read_bytes() != data:
                changed.append(name)
    print("written:", ", ".join(written) or "nothing (every golden file exists)")
    for name in changed:
        print(f"{name}: its writer no longer writes these bytes; the file is left as it is", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
