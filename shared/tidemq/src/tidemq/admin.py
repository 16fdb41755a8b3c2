"""Admin: topics, consumer groups and message queries over the HTTP API, as `tidemq_protocol.api` values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal

from tidemq_protocol.acl import AclEntry, UserType
from tidemq_protocol.api.dead_letters import DeadLetterList, ResendResponse
from tidemq_protocol.api.groups import CommittedOffsets, GroupChange, GroupDescription, GroupList, GroupView
from tidemq_protocol.api.messages import MessageList, MessageView, OffsetForTime
from tidemq_protocol.api.push import GroupPush, PushSubscribed
from tidemq_protocol.api.topics import TierStatus, TierUpload, TopicChange, TopicDescription, TopicList, TopicView
from tidemq_protocol.api.trace import MessageTrace
from tidemq_protocol.api.users import Caller, UserCreated, UserList, UserView
from tidemq_protocol.errors import NoPushSubscription
from tidemq_protocol.filter import subscription_filter
from tidemq_protocol.limits import HOUR_MS
from tidemq_protocol.message import MessageType
from tidemq_protocol.retry import RetryPolicy

from .api_client import ApiClient, M, every, model_of
from .client import segment

ResetTarget = Literal["earliest", "latest"] | int
"""Where a group's offsets go: the start or end of each queue, or the first message at or after a time (ms)."""


class Admin(ApiClient):
    """Create, inspect and delete topics and groups; commit and reset group offsets; look messages up.

    Errors are the engine's classes (`TopicNotFound`, `GroupExists`, ...; see `tidemq.errors`).
    """

    # ---- topics ----------------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        *,
        queues: int = 8,
        retention_ms: int | None = 72 * HOUR_MS,
        message_type: MessageType | str = MessageType.NORMAL,
        attributes: Mapping[str, str] | None = None,
    ) -> TopicView:
        """Create a topic (`retention_ms=None` keeps its messages forever); raises TopicExists."""
        spec = {
            "name": name,
            "queues": queues,
            "retention_ms": retention_ms,
            "message_type": str(message_type),
            "attributes": dict(attributes or {}),
        }
        return self._send(TopicView, "POST", "/v1/topics", spec)

    def list_topics(self, *, after: str | None = None, limit: int = 100) -> TopicList:
        """One page of topics in name order, after the name `after`."""
        return self._get(TopicList, "/v1/topics", after=after, limit=limit)

    def iter_topics(self, *, page_size: int = 1000) -> Iterator[TopicView]:
        """Every topic, in name order, fetched a page at a time."""
        return every(lambda after: self.list_topics(after=after, limit=page_size), lambda page: page.topics)

    def describe_topic(self, name: str) -> TopicDescription:
        """The topic's config and each queue's [min_offset, max_offset)."""
        return self._get(TopicDescription, f"/v1/topics/{segment(name)}")

    def change_topic(self, name: str, change: TopicChange) -> TopicView:
        """Apply the fields set in `change` (retention, attributes, more queues); others stay as they are."""
        return self._send(TopicView, "PATCH", f"/v1/topics/{segment(name)}", change.model_dump(exclude_unset=True))

    def set_retention(self, name: str, retention_ms: int | None) -> TopicView:
        """Keep the topic's messages `retention_ms` (None: forever)."""
        return self.change_topic(name, TopicChange(retention_ms=retention_ms))

    def delete_topic(self, name: str) -> None:
        """Delete the topic, its messages and every group's offsets on it."""
        self._client.request("DELETE", f"/v1/topics/{segment(name)}")

    def tier_status(self, name: str) -> TierStatus:
        """Per queue: the hot minimum, the cold tier's range and how far the upload lags."""
        return self._get(TierStatus, f"/v1/topics/{segment(name)}/tier")

    def upload_now(self, name: str) -> TierUpload:
        """Upload the topic's waiting messages to the cold tier now."""
        return model_of(TierUpload, self._client.request("POST", f"/v1/topics/{segment(name)}/tier/upload"))

    # ---- consumer groups -------------------------------------------------------------------------

    def create_group(
        self,
        name: str,
        *,
        attributes: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        fifo: bool = False,
    ) -> GroupView:
        """Create a consumer group, with its retry policy (None, or a field of it None: the server's defaults);
        `fifo`: it consumes FIFO topics in order, per message group. Raises GroupExists."""
        body = {"name": name, "attributes": dict(attributes or {}), "fifo": fifo}
        if retry is not None:
            body["retry"] = retry.model_dump(mode="json")
        return self._send(GroupView, "POST", "/v1/groups", body)

    def change_group(self, name: str, change: GroupChange) -> GroupView:
        """Apply the fields set in `change` (attributes, retry policy); others stay as they are."""
        dumped = change.model_dump(mode="json")  # whole: a backoff's kind is a default its class sets
        body = {field: dumped[field] for field in change.model_fields_set}
        return self._send(GroupView, "PATCH", f"/v1/groups/{segment(name)}", body)

    def set_retry_policy(self, name: str, retry: RetryPolicy | None) -> GroupView:
        """Give the group `retry` as its retry policy (None: the server's defaults)."""
        return self.change_group(name, GroupChange(retry=retry))

    def list_groups(self, *, after: str | None = None, limit: int = 100) -> GroupList:
        """One page of groups in name order, after the name `after`."""
        return self._get(GroupList, "/v1/groups", after=after, limit=limit)

    def iter_groups(self, *, page_size: int = 1000) -> Iterator[GroupView]:
        """Every group, in name order, fetched a page at a time."""
        return every(lambda after: self.list_groups(after=after, limit=page_size), lambda page: page.groups)

    def describe_group(self, name: str, topic: str | None = None) -> GroupDescription:
        """The group with its lag per queue on `topic`, or on every topic it has committed offsets on."""
        return self._get(GroupDescription, f"/v1/groups/{segment(name)}", topic=topic)

    def delete_group(self, name: str) -> None:
        self._client.request("DELETE", f"/v1/groups/{segment(name)}")

    def commit_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> CommittedOffsets:
        """Record the group's next offset to consume per queue; returns every offset it has on `topic`."""
        commit = {"topic": topic, "offsets": {str(queue): offset for queue, offset in offsets.items()}}
        return self._send(CommittedOffsets, "POST", f"/v1/groups/{segment(group)}/offsets", commit)

    def reset_offsets(self, group: str, topic: str, to: ResetTarget) -> CommittedOffsets:
        """Move the group's offsets on every queue of `topic` to `earliest`, `latest` or a timestamp (ms)."""
        reset = (
            {"topic": topic, "to": "timestamp", "timestamp": to} if isinstance(to, int) else {"topic": topic, "to": to}
        )
        return self._send(CommittedOffsets, "POST", f"/v1/groups/{segment(group)}/reset", reset)

    # ---- push delivery ---------------------------------------------------------------------------

    def set_push(
        self,
        group: str,
        topic: str,
        target: str,
        *,
        tag: str | None = None,
        sql: str | None = None,
        batch_size: int | None = None,
    ) -> PushSubscribed:
        """Push `topic`'s new messages to `target` for `group` (`lambda:<function>`, an http(s) webhook URL, or locally
        `python:<module>:<callable>`, one the server's operator allows); options left None take the server's defaults
        (tag `*`, batches of 1); `sql`, a SQL92 filter over message properties, instead of a tag. A failed call is
        retried as the group's retry policy says (`create_group(retry=...)`, `set_retry_policy`). For a webhook,
        `.signing_secret` is the secret its deliveries are signed with, returned this once: the receiver checks them
        with `tidemq.verify_push_signature`. Raises InvalidArgument saying what is wrong with a target (or why the
        server will not push there), InvalidFilterExpression, TopicNotFound, GroupNotFound."""
        subscription_filter(tag, sql)  # raises before any request
        options = {"tag": tag, "sql": sql, "batch_size": batch_size}
        body = {"topic": topic, "target": target, **{k: v for k, v in options.items() if v is not None}}
        return self._send(PushSubscribed, "PUT", f"/v1/groups/{segment(group)}/push", body)

    def push(self, group: str) -> GroupPush | None:
        """The group's push subscription and its dead-letter topic; None if the group has none (it is pulled
        from). Raises GroupNotFound."""
        try:
            return self._get(GroupPush, f"/v1/groups/{segment(group)}/push")
        except NoPushSubscription:
            return None

    def clear_push(self, group: str) -> None:
        """Stop pushing to `group`; its committed offsets stay."""
        self._client.request("DELETE", f"/v1/groups/{segment(group)}/push")

    # ---- dead letters ----------------------------------------------------------------------------

    def dead_letters(self, group: str, *, offset: int = 0, limit: int = 32) -> DeadLetterList:
        """Up to `limit` of the group's dead letters (`%DLQ%<group>`) from `offset`, each with its origin and when
        it was resent, if it was; `.next_offset` pages on."""
        return self._get(DeadLetterList, f"/v1/groups/{segment(group)}/dead-letters", offset=offset, limit=limit)

    def resend_dead_letters(
        self,
        group: str,
        *,
        message_ids: list[str] | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
    ) -> ResendResponse:
        """Resend dead letters to the topics they came from, each as a new message (received with attempt 1): those
        `message_ids` name, or those of [from_offset, to_offset) (its end if None), at most 64 a request:
        `.next_offset` says where the range goes on (`resend_dead_letter_range` goes all the way). A letter resent
        before is answered `already_resent` and not sent again."""
        body = {"message_ids": message_ids, "from_offset": from_offset, "to_offset": to_offset}
        body = {name: value for name, value in body.items() if value is not None}
        return self._send(ResendResponse, "POST", f"/v1/groups/{segment(group)}/dead-letters/resend", body)

    def resend_dead_letter_range(
        self, group: str, from_offset: int = 0, to_offset: int | None = None
    ) -> Iterator[ResendResponse]:
        """Resend the dead letters of [from_offset, to_offset) a request at a time, yielding each answer."""
        offset: int | None = from_offset
        while offset is not None:
            answer = self.resend_dead_letters(group, from_offset=offset, to_offset=to_offset)
            yield answer
            offset = answer.next_offset

    # ---- queries ---------------------------------------------------------------------------------

    def message(self, msg_id: str) -> MessageView:
        """The message with this id; raises MessageNotFound."""
        return self._get(MessageView, f"/v1/messages/{segment(msg_id)}")

    def message_trace(self, msg_id: str) -> MessageTrace:
        """What the broker recorded of the message, oldest event first (docs/trace.md); raises MessageNotFound."""
        return self._get(MessageTrace, f"/v1/messages/{segment(msg_id)}/trace")

    def messages_by_key(self, topic: str, key: str, *, limit: int = 32) -> list[MessageView]:
        """The most recent `limit` messages of `topic` carrying `key`, oldest first."""
        return self._get(MessageList, f"/v1/topics/{segment(topic)}/messages", key=key, limit=limit).messages

    def offset_for_time(self, topic: str, queue: int, timestamp_ms: int) -> OffsetForTime:
        """The first offset of the queue stored at or after `timestamp_ms` (its max_offset if none)."""
        return self._get(OffsetForTime, f"/v1/topics/{segment(topic)}/queues/{queue}/offset", timestamp=timestamp_ms)

    # ---- users and access control (super users; RocketMQ ACL 2.0) -------------------------------

    def create_user(
        self, name: str, *, super_user: bool = False, policies: list[AclEntry] | None = None
    ) -> UserCreated:
        """A new user; its `secret_key` is in the answer, and only there (raises UserExists)."""
        user_type = UserType.SUPER if super_user else UserType.NORMAL
        entries = [entry.model_dump(mode="json") for entry in policies or []]
        return self._send(UserCreated, "POST", "/v1/users", {"name": name, "user_type": user_type, "policies": entries})

    def list_users(self, *, after: str | None = None, limit: int = 100) -> UserList:
        return self._get(UserList, "/v1/users", after=after, limit=limit)

    def iter_users(self, *, page_size: int = 1000) -> Iterator[UserView]:
        """Every user, in name order, fetched a page at a time."""
        return every(lambda after: self.list_users(after=after, limit=page_size), lambda page: page.users)

    def describe_user(self, name: str) -> UserView:
        return self._get(UserView, f"/v1/users/{segment(name)}")

    def delete_user(self, name: str) -> None:
        self._client.request("DELETE", f"/v1/users/{segment(name)}")

    def rotate_secret(self, name: str) -> UserCreated:
        """A new secret key for the user (in the answer, and only there); the old one stops working."""
        return model_of(UserCreated, self._client.request("POST", f"/v1/users/{segment(name)}/rotate"))

    def grant(self, user: str, entry: AclEntry) -> UserView:
        """Add a policy entry to a normal user."""
        return self._send(UserView, "POST", f"/v1/users/{segment(user)}/acl", entry.model_dump(mode="json"))

    def revoke(self, user: str, resource: str) -> UserView:
        """Remove the user's policy entries on `resource` (as granted)."""
        return self._send(UserView, "POST", f"/v1/users/{segment(user)}/acl/revoke", {"resource": resource})

    def whoami(self) -> Caller:
        """The user this client signs as."""
        return self._get(Caller, "/v1/whoami")

    # ---- plumbing --------------------------------------------------------------------------------

    def _send(self, model: type[M], method: str, path: str, body: dict) -> M:
        return model_of(model, self._client.request(method, path, json=body))
