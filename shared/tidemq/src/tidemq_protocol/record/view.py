"""A message read where its record lies: a `StoredMessage` whose fields are decoded from the record when they are
first read, for a consumer that reads a batch's bodies and seldom its properties or id (`codec.decode_consume`).

Decoding every field of every record (its id as hex, its properties into a dict, a 10-field dataclass) cost a
consumer of 1 KiB messages about as much as checking the records' CRCs; a view holds the record's checked header
(reader.py checks every record before it makes a view of it, as for any read) and a copy of its topic and
properties (a few bytes: a view kept must not keep the 4 MiB batch it came in), and decodes a field when it is
asked for: the header's fields from the header, the topic, the properties (and with them the keys, the tag and an
id the record carries, MESSAGE_ID) once, the first time one of them is read.

The body alone is taken when the view is made, as StoredMessage's own field: the record has just been checked and
is still in the CPU's cache (reader.WINDOW). Taken later, a batch of 4 MiB after its check, it cost more than the
decoding the view saves (measured: docs/performance.md, "Consume without per-record objects").

A view is a StoredMessage (isinstance, equality with one holding the same fields, repr); its decoded fields are
read-only: a consumer that changes them builds a StoredMessage of its own (`to_message`).
"""

from __future__ import annotations

from types import ModuleType

from ..message import StoredMessage
from .ids import ID
from .properties import MESSAGE_ID, decode_properties

# The header's fields as reader.Header lays them out, by index
_SIZE, _QUEUE, _QUEUE_OFFSET, _PHYSICAL, _STORED, _BORN = 0, 3, 4, 5, 6, 9
_TOPIC_LENGTH, _PROPERTIES_LENGTH, _BODY_LENGTH = 10, 11, 12


def _header_field(index: int, name: str) -> property:
    """A view's read-only field that is the header's field at `index`."""
    return property(lambda view: view._header[index], doc=f"The record header's {name}.")


class RecordView(StoredMessage):
    """The message of the checked record at `at` of `data` (`header`: its fields, reader.Header; `version`: the
    module of its layout), decoded field by field as they are read."""

    __slots__ = ("_decoded", "_header", "_named")

    def __init__(self, data: bytes, at: int, header: tuple, version: ModuleType) -> None:
        # the decoded fields' properties have no setters: assigning one raises AttributeError
        start = at + version.HEADER_SIZE
        body_at = start + header[_TOPIC_LENGTH] + header[_PROPERTIES_LENGTH]
        # the topic and properties copied, not the batch referred to: a message kept must not keep its batch
        self._header, self._named, self._decoded = header, data[start:body_at], None
        # the body now, as the record has just been checked: still in the CPU's cache (see the module docstring)
        self.body = data[body_at : body_at + header[_BODY_LENGTH]]

    @property  # type: ignore[override]
    def topic(self) -> str:
        return self._named[: self._header[_TOPIC_LENGTH]].decode()

    queue = _header_field(_QUEUE, "queue")  # type: ignore[assignment]
    queue_offset = _header_field(_QUEUE_OFFSET, "queue_offset")  # type: ignore[assignment]
    born_timestamp = _header_field(_BORN, "born_timestamp")  # type: ignore[assignment]
    store_timestamp = _header_field(_STORED, "store_timestamp")  # type: ignore[assignment]

    @property  # type: ignore[override]
    def msg_id(self) -> str:
        return self._properties()[0]

    @property  # type: ignore[override]
    def keys(self) -> tuple[str, ...]:
        return self._properties()[1]

    @property  # type: ignore[override]
    def tag(self) -> str | None:
        return self._properties()[2]

    @property  # type: ignore[override]
    def properties(self) -> dict[str, str]:
        return self._properties()[3]

    def _properties(self) -> tuple[str, tuple[str, ...], str | None, dict[str, str]]:
        """(msg_id, keys, tag, user properties), decoded the first time one of them is read."""
        if self._decoded is None:
            header = self._header
            keys, tag, properties = decode_properties(self._named[header[_TOPIC_LENGTH] :])
            # a moved message keeps its id (properties.py); any other's is where its record is (ids.py)
            msg_id = properties.pop(MESSAGE_ID, None) or ID.pack(header[_PHYSICAL], header[_SIZE]).hex()
            self._decoded = (msg_id, keys, tag, properties)
        return self._decoded

    def to_message(self) -> StoredMessage:
        """A StoredMessage of this view's fields, every one decoded: one that may be changed."""
        msg_id, keys, tag, properties = self._properties()
        return StoredMessage(
            self.topic,
            self.queue,
            self.queue_offset,
            msg_id,
            self.born_timestamp,
            self.store_timestamp,
            self.body,
            keys,
            tag,
            dict(properties),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StoredMessage):
            return NotImplemented
        return _fields(self) == _fields(other)

    __hash__ = None  # type: ignore[assignment]  # as StoredMessage's (a mutable dataclass's)

    def __reduce__(self) -> tuple:
        return StoredMessage, _fields(self)  # a copy or a pickle is the message itself, not the batch it lies in


def _fields(message: StoredMessage) -> tuple:
    return (
        message.topic,
        message.queue,
        message.queue_offset,
        message.msg_id,
        message.born_timestamp,
        message.store_timestamp,
        message.body,
        message.keys,
        message.tag,
        message.properties,
    )
