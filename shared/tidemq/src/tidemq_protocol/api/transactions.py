"""The HTTP API's bodies for transactional messages (RocketMQ's half messages, EndTransaction and check-back):
send a half message, end it, take a producer group's open checks and answer them, list a topic's outcomes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .common import ApiModel, GroupName
from .messages import MessageIn, MessageView

TransactionStateName = Literal["prepared", "committed", "rolled_back"]
Resolution = Literal["commit", "rollback", "unknown"]
MOST_CHECKS = 32  # open checks one request takes
LISTING_AFTER_PATTERN = r"^\d{13}\.[0-9a-f]{24}$"
"""Where a listing of transactions goes on: a page's `next_after` (the last one's prepared time and id)."""


class HalfMessageRequest(MessageIn):
    """A half message, invisible until its transaction commits: a message as a produce takes one, and the producer
    group its check-backs go to."""

    producer_group: GroupName


class TransactionView(ApiModel):
    msg_id: str = Field(description="The half message's id, which its committed message keeps.")
    topic: str
    queue: int
    producer_group: str
    state: TransactionStateName
    prepared_ms: int = Field(description="When the half message was stored (epoch ms).")
    checks: int = Field(description="Check-backs opened so far.")
    check_at_ms: int | None = Field(description="Prepared: when the next check-back is due (null once ended).")
    answer: str | None = Field(description="The last answer that ended nothing (unknown), if any.")
    ended_ms: int | None = Field(description="When it was committed or rolled back.")
    ended_by: str | None = Field(
        description="What ended it: `producer`, `check N` (an answer to check-back N), `check limit` (no commit "
        "or rollback after the last check-back) or `expired`."
    )
    offset: int | None = Field(description="Committed: the message's offset in its queue.")


class EndTransactionRequest(ApiModel):
    resolution: Resolution = Field(
        description="commit: the message becomes visible (once); rollback: it never does; unknown: nothing changes "
        "(the answer is recorded; check-backs go on)."
    )
    check: int | None = Field(default=None, ge=1, description="The check-back this answers, if it answers one.")


class TransactionCheck(ApiModel):
    check: int = Field(description="Which check-back of the transaction this is (1, 2, ...).")
    transaction: TransactionView
    message: MessageView = Field(description="The half message (its offset is 0: it has none until committed).")


class TransactionChecks(ApiModel):
    checks: list[TransactionCheck]


class TransactionList(ApiModel):
    transactions: list[TransactionView]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")
