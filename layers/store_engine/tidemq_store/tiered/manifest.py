"""A queue's manifest: which large segments replace the front of its tier files (written by compaction).

Uploads only ever add small objects at the end of a queue's files (container.py). Compaction rewrites the front,
offsets [start, boundary), into large segments, and a manifest says which ones:

    <topic>/<queue>/manifest/<generation:020d>      this file's JSON: generation, segments of each kind, and
                                                    where the plain files take over (`consumequeue_from`,
                                                    `commitlog_from`: byte positions in them)
    <topic>/<queue>/<kind>/<base:020d>.g<generation>.<attempt>   a segment it lists

A reader lists the plain segments first, then takes the highest generation's manifest: its segments, then the
plain ones from its boundary on. The manifest is written last and only if no manifest of that generation exists
(S3's create-only `If-None-Match: *`, a hard link on POSIX), so the switch is one atomic write and two writers
cannot both win. Segment compaction copies bytes as they are (positions unchanged); key compaction keeps only
survivors (their commit-log positions packed from the region's start, a removed offset's entry of size 0), so its
two files must switch together, which the single manifest gives. Listing the plain files before reading the
manifest means a reader never pairs a manifest with a listing that lacks what the manifest leaves to it.

What a manifest replaces is deleted only after a grace period (`garbage`): a reader that listed before the switch
reads the old objects meanwhile; one that finds an object gone (`SegmentGone`) lists again and retries.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from tidemq_protocol.errors import CorruptStore

from .segment import NAME_DIGITS, StoredObject, TierDriver, segment_name

FORMAT = 1
KINDS = ("commitlog", "consumequeue")


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """One segment a manifest lists: object `name` in its kind's directory, holding bytes [base, base + size)."""

    name: str
    base: int
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size


@dataclass(frozen=True, slots=True)
class Manifest:
    generation: int
    consumequeue: tuple[SegmentRef, ...]
    commitlog: tuple[SegmentRef, ...]
    consumequeue_from: int
    """Where the plain ConsumeQueue takes over (a byte position: offset * 24)."""
    commitlog_from: int
    """Where the plain commit log takes over."""
    key_compacted: bool = False

    def segments(self, kind: str) -> tuple[SegmentRef, ...]:
        return self.consumequeue if kind == "consumequeue" else self.commitlog

    def boundary(self, kind: str) -> int:
        return self.consumequeue_from if kind == "consumequeue" else self.commitlog_from

    def encode(self) -> bytes:
        body = asdict(self)
        for kind in KINDS:
            body[kind] = [[s.name, s.base, s.size] for s in self.segments(kind)]
        return json.dumps({"format": FORMAT, **body}, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, key: str) -> Manifest:
        try:
            body = json.loads(data)
            if body.pop("format") != FORMAT:
                raise ValueError("unknown format")
            for kind in KINDS:
                body[kind] = tuple(SegmentRef(str(n), int(b), int(s)) for n, b, s in body[kind])
            return cls(**body)
        except (ValueError, TypeError, KeyError) as error:
            raise CorruptStore(f"tier manifest {key} is damaged: {error}") from None


def manifest_prefix(queue_path: str) -> str:
    return f"{queue_path}/manifest/"


def generation_of(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    return int(name) if name.isdigit() and len(name) == NAME_DIGITS else None


def load_manifest(driver: TierDriver, queue_path: str) -> Manifest | None:
    """The queue's newest manifest (None: it was never compacted)."""
    keys = [o.key for o in driver.objects(manifest_prefix(queue_path)) if generation_of(o.key) is not None]
    for key in reversed(keys):  # newest first; one deleted meanwhile is passed over
        data = driver.read_object(key)
        if data is not None:
            return Manifest.decode(data, key)
    return None


def write_manifest(driver: TierDriver, queue_path: str, manifest: Manifest) -> bool:
    """Switch the queue to `manifest`; False when another writer took its generation first."""
    key = manifest_prefix(queue_path) + segment_name(manifest.generation)
    return driver.create_object(key, manifest.encode())


def compacted_name(base: int, generation: int, attempt: str) -> str:
    return f"{segment_name(base)}.g{generation}.{attempt}"


def _generation_of_segment(name: str) -> int | None:
    parts = name.split(".")
    if len(parts) == 3 and parts[1].startswith("g") and parts[1][1:].isdigit():
        return int(parts[1][1:])
    return None


def garbage(
    driver: TierDriver, queue_path: str, manifest: Manifest, now_s: float, grace_s: float
) -> list[StoredObject]:
    """The queue's objects that `manifest` replaced and no reader needs after the grace period: older manifests,
    plain segments wholly before its boundaries, and segments of earlier generations (or of attempts that lost)
    it does not list, each once its replacement is `grace_s` old."""
    objects = driver.objects(f"{queue_path}/")
    current = manifest_prefix(queue_path) + segment_name(manifest.generation)
    switched = next((o.modified_s for o in objects if o.key == current), None)
    if switched is None or now_s - switched < grace_s:
        return []
    listed = {f"{queue_path}/{kind}/{s.name}" for kind in KINDS for s in manifest.segments(kind)}
    found = []
    for item in objects:
        directory, _, name = item.key[len(queue_path) + 1 :].partition("/")
        if directory == "manifest":
            generation = generation_of(item.key)
            if generation is not None and generation < manifest.generation:
                found.append(item)
        elif directory in KINDS and item.key not in listed:
            generation = _generation_of_segment(name)
            if generation is not None:
                if generation <= manifest.generation and now_s - item.modified_s >= grace_s:
                    found.append(item)
            elif name.isdigit() and int(name) + item.size <= manifest.boundary(directory):
                found.append(item)
    return found
