"""The embedded store's metadata operations: topics, groups with their consumer offsets, users, as `MessageStore`
defines them, kept in RocksDB (metadata.py).

Every change takes the store's write lock, so it is serialized with puts and with every other change: a topic is
created after every message stored so far, a group deleted stays deleted, and a compare-and-set commit checks and
writes as one step. Reads take no lock.
"""

from __future__ import annotations

from collections.abc import Mapping

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    GroupExists,
    GroupNotFound,
    OffsetConflict,
    OffsetOutOfRange,
    TopicExists,
    TopicNotFound,
    UserExists,
    UserNotFound,
)
from tidemq_protocol.names import check_name

from ..acl import UserRecord
from ..api import UNSET, updated_topic
from ..model import GroupConfig, Page, TopicConfig, check_page_limit, check_queue, validated
from .parts import StoreParts


def topic_now(config: TopicConfig) -> int:
    """Now, as a record of `config`'s topic that is not a message (a half message's transaction, a put's timers) is
    stamped: never before the topic was made. `created_at` runs ahead of the wall clock when the topic was made in a
    millisecond something else was stamped in (or after the clock stepped back: `create_topic`), and a record stamped
    before it reads as one of a deleted namesake (a commit answered TransactionNotFound, a due timer dropped)."""
    return max(clock.now_ms(), config.created_at)


class MetadataOperations(StoreParts):
    """Topics, groups and users of `EmbeddedMessageStore` (which gives `max_offset`)."""

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        check_name("topic", config.name)
        with self._write_lock:
            self._check_open()
            if self.meta.get_topic(config.name) is not None:
                raise TopicExists(config.name)
            created_at = max(clock.now_ms(), self._last_store_timestamp + 1)
            self._last_store_timestamp = created_at  # its first messages are stamped no earlier (puts take the max)
            config = validated(TopicConfig, {**config.model_dump(), "created_at": created_at})
            self.meta.put_topic(config)
        return config

    def get_topic(self, name: str) -> TopicConfig:
        config = self.meta.get_topic(check_name("topic", name))
        if config is None:
            raise TopicNotFound(name)
        return config

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self.meta.list_topics(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        with self._write_lock:
            self._check_open()
            current = self.get_topic(name)
            updated = updated_topic(current, retention_ms, queues, attributes)
            self.meta.put_topic(updated, previous=current)
        return updated

    def delete_topic(self, name: str) -> None:
        with self._write_lock:
            self._check_open()
            config = self.get_topic(name)
            self.meta.delete_topic(config)
            self.pop_ledger.forget_topic(name)  # a topic made again under the name starts every group afresh
            self.transactions.forget_topic(name)  # its half messages are never committed (transactions.py)
            self.cq.drop_topic(name)
            self.cq.flush()  # the ConsumeQueue has no WAL: make the drop durable before anyone reuses the name
            for key in [key for key in self._next_offsets if key[0] == name]:
                del self._next_offsets[key]

    # ---- groups and consumer offsets -------------------------------------------------------------

    def create_group(self, config: GroupConfig) -> GroupConfig:
        check_name("group", config.name)
        with self._write_lock:
            self._check_open()
            if self.meta.get_group(config.name) is not None:
                raise GroupExists(config.name)
            config = validated(GroupConfig, {**config.model_dump(), "created_at": clock.now_ms()})
            self.meta.put_group(config)
        return config

    def get_group(self, name: str) -> GroupConfig:
        config = self.meta.get_group(check_name("group", name))
        if config is None:
            raise GroupNotFound(name)
        return config

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self.meta.list_groups(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        with self._write_lock:
            self._check_open()
            current = self.get_group(config.name)
            config = validated(GroupConfig, {**config.model_dump(), "created_at": current.created_at})
            self.meta.put_group(config)
        return config

    def delete_group(self, name: str) -> None:
        with self._write_lock:  # serialized with update_group and commit_offsets: nothing brings the group back
            self._check_open()
            self.get_group(name)
            self.meta.delete_group(name)
            self.pop_ledger.forget_group(name)

    def commit_offsets(
        self, group: str, topic: str, offsets: Mapping[int, int], expected: Mapping[int, int | None] | None = None
    ) -> None:
        with self._write_lock:  # the group's existence and `expected` hold until the write is made
            self._check_open()
            self.get_group(group)
            config = self.get_topic(topic)
            for queue, offset in offsets.items():
                check_queue(config, queue)
                max_offset = self.max_offset(topic, queue)
                if not isinstance(offset, int) or not 0 <= offset <= max_offset:
                    raise OffsetOutOfRange(topic, queue, offset, self.cq.min_offset(topic, queue), max_offset)
            if expected:
                committed = self.meta.committed_offsets(group, topic)
                for queue, offset in expected.items():
                    if committed.get(queue) != offset:
                        raise OffsetConflict(group, topic, queue, offset, committed.get(queue))
            self.meta.commit_offsets(group, topic, dict(offsets))

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        self.get_group(group)
        self.get_topic(topic)
        return self.meta.committed_offsets(group, topic)

    def group_topics(self, group: str) -> list[str]:
        self.get_group(group)
        return self.meta.group_topics(group)

    # ---- users -----------------------------------------------------------------------------------

    def create_user(self, user: UserRecord) -> UserRecord:
        with self._write_lock:
            self._check_open()
            if self.meta.get_user(user.name) is not None:
                raise UserExists(user.name)
            user = validated(UserRecord, {**user.model_dump(), "created_at": clock.now_ms()})
            self.meta.put_user(user)
        return user

    def get_user(self, name: str) -> UserRecord:
        user = self.meta.get_user(name) if isinstance(name, str) else None
        if user is None:
            raise UserNotFound(name)
        return user

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self.meta.list_users(after, check_page_limit(limit), self.config.max_page_bytes)

    def update_user(self, user: UserRecord) -> UserRecord:
        with self._write_lock:
            self._check_open()
            current = self.get_user(user.name)
            user = validated(UserRecord, {**user.model_dump(), "created_at": current.created_at})
            self.meta.put_user(user)
        return user

    def delete_user(self, name: str) -> None:
        with self._write_lock:
            self._check_open()
            self.get_user(name)
            self.meta.delete_user(name)
