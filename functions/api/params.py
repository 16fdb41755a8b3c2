"""The resources a route's path names (topic, group, queue, message id), with what the server enforces of each,
so that docs/openapi.json declares it and a request that breaks it is a 422 naming the parameter."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Header, Path

from functions.logic.push import DLQ_PREFIX
from tidemq_protocol import acl, names
from tidemq_protocol.api.common import GroupName, MessageId, TopicName, name_schema
from tidemq_protocol.limits import MAX_QUEUES, MAX_SEND_KEY

TopicInPath = Annotated[TopicName, Path()]
GroupInPath = Annotated[GroupName, Path()]
PUSH_GROUP_LENGTH = 127 - len(DLQ_PREFIX)
"""A group that pushes has a dead-letter topic, `%DLQ%<group>`, whose name must be a topic name too."""
PushGroupInPath = Annotated[
    names.GroupName, name_schema("group", PUSH_GROUP_LENGTH), Path(max_length=PUSH_GROUP_LENGTH)
]
QueueInPath = Annotated[int, Path(ge=0, le=MAX_QUEUES - 1, description="One of the topic's queues (else 404).")]
MessageIdInPath = Annotated[MessageId, Path()]
UserInPath = Annotated[acl.UserName, Path()]
IdempotencyKey = Annotated[
    str | None,
    Header(
        min_length=1,
        max_length=MAX_SEND_KEY,
        pattern=r"^[ -~]+$",
        description="Names this batch (printable ASCII): a batch the topic stored under the key within the "
        "deduplication window (TIDEMQ_SEND_DEDUP_WINDOW_MS) is answered as it was and not stored again; the same key "
        "with other messages is a 409. Make one per batch and send it again with the batch's retries.",
    ),
]
"""The `Idempotency-Key` header of a produce (tidemq_protocol.codec.IDEMPOTENCY_KEY_HEADER)."""
