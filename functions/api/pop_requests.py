"""The bodies of pop requests, bounded by this server's settings (TIDEMQ_POP_*, TIDEMQ_MAX_GET_WAIT_MS), so that
the OpenAPI document says what the server accepts: a value outside is refused by the schema (422)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from shared.settings import get_settings
from tidemq_protocol.api.common import ONE_FILTER, ApiModel, SqlFilterText, TagFilterText
from tidemq_protocol.api.pop import MOST_ACKED, ReceiptHandle
from tidemq_protocol.filter import one_filter

LIMITS = get_settings()
InvisibleMs = Annotated[int, Field(ge=LIMITS.pop_min_invisible_ms, le=LIMITS.pop_max_invisible_ms)]


class ReceiveRequest(ApiModel):
    """What to receive: of the messages its filter selects (`tag` or `sql`, not both), if it has one."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=ONE_FILTER)

    max_messages: int = Field(default=min(32, LIMITS.pop_max_messages), ge=1, le=LIMITS.pop_max_messages)
    invisible_ms: InvisibleMs = Field(
        default=LIMITS.pop_invisible_ms, description="How long each message is held for this consumer."
    )
    wait_ms: int = Field(default=0, ge=0, le=LIMITS.max_get_wait_ms, description="Long polling: wait up to this long.")
    tag: TagFilterText | None = Field(default=None, description="Tag filter: `*`, or tags joined by `||`.")
    sql: SqlFilterText | None = Field(
        default=None,
        description="SQL92 filter over message properties, instead of `tag` (docs/filters.md): one that does not "
        "parse is a 400 (InvalidFilterExpression) naming its `position`.",
    )
    ack: list[ReceiptHandle] = Field(
        default_factory=list,
        max_length=MOST_ACKED,
        description="Deliveries to ack first, as the ack route does (a consumer acks its last batch as it asks for "
        "the next: one request instead of two); what each became comes back in `acks`.",
    )

    @model_validator(mode="after")
    def _one_filter(self) -> ReceiveRequest:
        one_filter(self.tag, self.sql)
        return self


class ChangeInvisibleRequest(ApiModel):
    receipt_handle: ReceiptHandle
    invisible_ms: InvisibleMs = Field(description="Held for this long from now.")


class ReleaseRequest(ApiModel):
    receipt_handle: ReceiptHandle
    delay_ms: int | None = Field(
        default=None,
        ge=0,
        le=LIMITS.pop_max_invisible_ms,
        description="Visible again after this long, its next attempt (absent or null: after the group's backoff for "
        "the delivery's attempt, a nack).",
    )
