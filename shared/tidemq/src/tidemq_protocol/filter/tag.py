"""RocketMQ's tag filter (FilterType.TAG): `*` (or empty) selects every message, `TagA || TagB` either tag.

ConsumeQueue entries carry each message's tag code (`message.tag_hash`), so a read chooses by `codes` without
reading a record, and confirms the real tag once a chosen record is decoded (codes can collide).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument
from ..message import StoredMessage, tag_hash


@dataclass(slots=True, frozen=True)
class TagFilter:
    """RocketMQ's tag expression: `*` (or empty) matches everything, `TagA || TagB` matches either tag."""

    tags: frozenset[str]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter | None:
        """Return a filter, or None when the expression matches every message."""
        if expression is None or expression.strip() in ("", "*"):
            return None
        tags = [part.strip() for part in expression.split("||")]
        if any(not tag or tag == "*" for tag in tags):
            raise InvalidArgument(f"tag filter {expression!r} must be '*' or tags joined by '||'")
        return cls(frozenset(tags))

    @property
    def codes(self) -> frozenset[int]:
        return frozenset(tag_hash(tag) for tag in self.tags)

    def matches(self, tag: str | None) -> bool:
        return tag in self.tags

    def accepts(self, message: StoredMessage) -> bool:
        """Whether the filter selects `message` (decoded): by its real tag."""
        return message.tag in self.tags
