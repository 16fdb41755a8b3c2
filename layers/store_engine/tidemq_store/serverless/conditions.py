"""What a failed DynamoDB write means, for every writer of the serverless backend: a failed condition (the outcome a
conditional write expects), a race with another writer (read again and retry), or neither (a fault: tidemq_store.faults
says which)."""

from __future__ import annotations

from pynamodb.exceptions import TransactWriteError


def raced(error: TransactWriteError) -> bool:
    """Whether a transaction failed because another writer got there first (so reading again and retrying is
    right), not for a fault."""
    reasons = [reason.code for reason in error.cancellation_reasons or [] if reason is not None]
    return any(code in ("ConditionalCheckFailed", "TransactionConflict") for code in reasons) or (
        getattr(error, "cause_response_code", None) == "TransactionConflictException"
    )


def failed_beyond(error: TransactWriteError, first: int) -> bool:
    """Whether the condition of one of a transaction's items from index `first` on failed."""
    reasons = (error.cancellation_reasons or [])[first:]
    return any(reason is not None and reason.code == "ConditionalCheckFailed" for reason in reasons)


def is_conditional_transaction(error: TransactWriteError) -> bool:
    """Whether a transaction was cancelled by a failed condition of one of its items (not a fault, nor a race)."""
    return failed_beyond(error, 0)


def is_conditional(error: Exception) -> bool:
    """Whether a pynamodb error is a failed condition (the outcome a conditional write expects), not a fault."""
    return getattr(error, "cause_response_code", None) == "ConditionalCheckFailedException"
