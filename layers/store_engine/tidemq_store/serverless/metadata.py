"""The serverless backend's metadata: topics, consumer groups and users, one DynamoDB item each (tables.py).

Each item holds its whole config as JSON, so creating, reading or listing them costs the same with a million
as with ten, and a listing reads nothing per entry after its one Query. Puts and reads see a topic through a
per-process cache (`cached_topic`) rather than a read of its item each.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError

from tidemq_protocol import clock
from tidemq_protocol.errors import (
    GroupExists,
    GroupNotFound,
    TopicExists,
    TopicNotFound,
    UserExists,
    UserNotFound,
)
from tidemq_protocol.names import check_name

from ..acl import UserRecord
from ..api import UNSET, updated_topic
from ..model import GroupConfig, Page, TopicConfig, check_page_limit, take_page, validated
from .conditions import is_conditional
from .tables import Tables

CONFIG_CACHE_S = 5.0
"""How long a process trusts a topic's or a group's config it read for the data path (`cached_topic`,
`cached_group`): neither puts, reads nor pops should cost a read of it. A topic or group deleted by another process
is served for that long still (as a deleted topic stays readable); the deleting process forgets it at once."""


class Metadata:
    """The `topics`, `groups` and `users` items of one set of tables; pages are cut at `max_page_bytes`."""

    def __init__(self, tables: Tables, max_page_bytes: int) -> None:
        self.tables = tables
        self.max_page_bytes = max_page_bytes
        self._topics: dict[str, tuple[float, TopicConfig]] = {}
        self._groups: dict[str, tuple[float, GroupConfig]] = {}

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(self, config: TopicConfig) -> TopicConfig:
        """One conditional PutItem; each queue's item is made by its first put."""
        check_name("topic", config.name)
        created = validated(TopicConfig, {**config.model_dump(), "created_at": clock.now_ms()})
        topics = self.tables.topics
        return _save_config(topics, "topic", created, topics.name.does_not_exist(), TopicExists(config.name))

    def get_topic(self, name: str) -> TopicConfig:
        check_name("topic", name)
        try:
            item = self.tables.topics.get("topic", name, consistent_read=True)
        except DoesNotExist:
            raise TopicNotFound(name) from None
        return TopicConfig.model_validate_json(item.config)

    def cached_topic(self, topic: str, fresh: bool = False) -> TopicConfig:
        """The topic's config, read at most every CONFIG_CACHE_S per process, for puts and reads (neither should
        cost a read of the topic; a deleted topic stays readable for that long). A queue beyond the cached count
        is looked up again before it is refused, so a topic that grew is seen at once."""
        cached = self._topics.get(topic)
        if fresh or cached is None or time.monotonic() - cached[0] > CONFIG_CACHE_S:
            cached = self._topics[topic] = (time.monotonic(), self._again(self._topics, topic, self.get_topic))
        return cached[1]

    def list_topics(self, after: str | None = None, limit: int = 100) -> Page[TopicConfig]:
        return self._list(self.tables.topics, "topic", TopicConfig, after, limit)

    def all_topics(self) -> Iterator[TopicConfig]:
        """Every topic, a page of 1,000 at a time."""
        after = None
        while page := self.list_topics(after, 1000):
            yield from page
            after = page[-1].name

    def update_topic(
        self,
        name: str,
        *,
        retention_ms: int | object | None = UNSET,
        queues: int | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicConfig:
        updated = updated_topic(self.get_topic(name), retention_ms, queues, attributes)
        self.tables.topics("topic", name, config=updated.model_dump_json()).save()
        return updated

    def delete_topic(self, name: str) -> TopicConfig:
        """Delete the topic's item (what it owns elsewhere is the caller's to delete); the config it held."""
        config = self.get_topic(name)
        self.tables.topics("topic", name).delete()
        self._topics.pop(name, None)
        return config

    # ---- users -----------------------------------------------------------------------------------

    def create_user(self, user: UserRecord) -> UserRecord:
        created = validated(UserRecord, {**user.model_dump(), "created_at": clock.now_ms()})
        users = self.tables.users
        return _save_config(users, "user", created, users.name.does_not_exist(), UserExists(user.name))

    def get_user(self, name: str) -> UserRecord:
        try:
            return UserRecord.model_validate_json(self.tables.users.get("user", name, consistent_read=True).config)
        except (DoesNotExist, ValueError):
            raise UserNotFound(name) from None

    def list_users(self, after: str | None = None, limit: int = 100) -> Page[UserRecord]:
        return self._list(self.tables.users, "user", UserRecord, after, limit)

    def update_user(self, user: UserRecord) -> UserRecord:
        current = self.get_user(user.name)
        updated = validated(UserRecord, {**user.model_dump(), "created_at": current.created_at})
        users = self.tables.users
        return _save_config(users, "user", updated, users.name.exists(), UserNotFound(user.name))

    def delete_user(self, name: str) -> None:
        users = self.tables.users
        try:
            users("user", name).delete(condition=users.name.exists())
        except DeleteError as error:
            if is_conditional(error):
                raise UserNotFound(name) from None
            raise

    # ---- groups ----------------------------------------------------------------------------------

    def create_group(self, config: GroupConfig) -> GroupConfig:
        check_name("group", config.name)
        created = validated(GroupConfig, {**config.model_dump(), "created_at": clock.now_ms()})
        groups = self.tables.groups
        return _save_config(groups, "group", created, groups.name.does_not_exist(), GroupExists(config.name))

    def cached_group(self, name: str) -> GroupConfig:
        """The group's config, read at most every CONFIG_CACHE_S per process (pop's check that it exists)."""
        cached = self._groups.get(name)
        if cached is None or time.monotonic() - cached[0] > CONFIG_CACHE_S:
            cached = self._groups[name] = (time.monotonic(), self._again(self._groups, name, self.get_group))
        return cached[1]

    @staticmethod
    def _again(cache: dict, name: str, get):
        """Read a cached config again: meanwhile the other threads go on with the one cached (one read, not one a
        thread); if it is gone, it is gone from the cache too."""
        if name in cache:
            cache[name] = (time.monotonic(), cache[name][1])
        try:
            return get(name)
        except Exception:
            cache.pop(name, None)
            raise

    def get_group(self, name: str) -> GroupConfig:
        check_name("group", name)
        try:
            return GroupConfig.model_validate_json(self.tables.groups.get("group", name, consistent_read=True).config)
        except DoesNotExist:
            raise GroupNotFound(name) from None

    def list_groups(self, after: str | None = None, limit: int = 100) -> Page[GroupConfig]:
        return self._list(self.tables.groups, "group", GroupConfig, after, limit)

    def update_group(self, config: GroupConfig) -> GroupConfig:
        current = self.get_group(config.name)
        updated = validated(GroupConfig, {**config.model_dump(), "created_at": current.created_at})
        groups = self.tables.groups
        saved = _save_config(groups, "group", updated, groups.name.exists(), GroupNotFound(config.name))
        self._groups.pop(config.name, None)  # this process sees its own change at once; others within CONFIG_CACHE_S
        return saved

    def delete_group(self, name: str) -> None:
        """Delete the group's item (its committed offsets are the caller's to delete, after it)."""
        self.get_group(name)
        self._groups.pop(name, None)
        self.tables.groups("group", name).delete()

    # ---- pages -----------------------------------------------------------------------------------

    def _list(self, model, kind: str, config_type, after: str | None, limit: int) -> Page:
        """A page of configs in name order (`model.take_page`): one Query, of one item more than the page when
        the page is cut by bytes. Safe against concurrent deletes: each item holds the whole config, so nothing is
        read per entry after the Query; an item deleted meanwhile is listed as it was or not at all, and the next
        page is a Query for the names after `after`, whether that one is still there, so none is listed twice."""
        check_page_limit(limit)
        condition = model.name > after if after else None
        items = model.query(kind, condition, limit=limit, consistent_read=True)
        return take_page((item.config for item in items), config_type, limit, self.max_page_bytes)


def _save_config(model, kind: str, config, condition, refused: Exception):
    """Put a topic's, group's or user's config item on `condition`; raise `refused` when the condition fails."""
    try:
        model(kind, config.name, config=config.model_dump_json()).save(condition=condition)
    except PutError as error:
        if is_conditional(error):
            raise refused from None
        raise
    return config


__all__ = ["Metadata"]
