"""The one place that maps TideMQ's errors to RocketMQ 5 status codes (`apache.rocketmq.v2.Code`).

RocketMQ's proxy answers an error as gRPC OK with the status in the response body, and its clients read only that
status (a gRPC error status becomes a generic exception, and a missing status "response is illegal"). So every
response carries one: OK (20000), or the code here for the error the logic raised, with its message.

A TideMQ class maps to one code (`CODES`; the nearest class in its MRO). `InvalidArgument` means "a value is wrong",
and which value is the request's business: RocketMQ names it (ILLEGAL_TOPIC, ILLEGAL_INVISIBLE_TIME,
ILLEGAL_FILTER_EXPRESSION, ...), so a translation says what a check is about with `about(code)`, and an
InvalidArgument raised inside is answered with that code. A `Refused` carries its code from where the proxy itself
refuses (a missing client id, a receive without time left to poll). A fault of DynamoDB or S3 that outlasted the
store's retries (`tidemq_store.faults`) is a StoreUnavailable, PROXY_TIMEOUT, which clients retry. Anything else is
a bug: INTERNAL_SERVER_ERROR, logged with its traceback, its details not sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from tidemq_protocol.errors import (
    AccessDenied,
    BrokerNotFound,
    BrokerReadOnly,
    ClientError,
    DiskQuotaExceeded,
    GroupNotFound,
    InvalidArgument,
    InvalidBatch,
    InvalidName,
    InvalidReceiptHandle,
    MessageDeadLettered,
    MessageNotFound,
    MessageTooLarge,
    MessageTypeMismatch,
    NotADeadLetter,
    OffsetOutOfRange,
    Overloaded,
    QueueOutOfRange,
    RequestTooLarge,
    SendConflict,
    StoreFailed,
    StoreUnavailable,
    TimerDelivered,
    TimerNotFound,
    TopicNotFound,
    TransactionConflict,
    TransactionNotFound,
    Unauthenticated,
    UserNotFound,
)
from tidemq_store.faults import dependency_fault

from .protocol import definition_pb2 as pb

log = logging.getLogger("tidemq.grpc")

Code = pb.Code
CODES: dict[type[Exception], int] = {
    InvalidArgument: Code.BAD_REQUEST,
    InvalidBatch: Code.BAD_REQUEST,
    NotADeadLetter: Code.BAD_REQUEST,
    MessageTypeMismatch: Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    SendConflict: Code.ILLEGAL_MESSAGE_ID,  # the id was sent before with another message: not retried by clients
    InvalidReceiptHandle: Code.INVALID_RECEIPT_HANDLE,
    MessageDeadLettered: Code.INVALID_RECEIPT_HANDLE,  # as a RocketMQ proxy answers a handle past its hold
    OffsetOutOfRange: Code.ILLEGAL_OFFSET,
    Unauthenticated: Code.UNAUTHORIZED,
    UserNotFound: Code.UNAUTHORIZED,
    AccessDenied: Code.FORBIDDEN,
    TopicNotFound: Code.TOPIC_NOT_FOUND,
    GroupNotFound: Code.CONSUMER_GROUP_NOT_FOUND,
    QueueOutOfRange: Code.NOT_FOUND,
    BrokerNotFound: Code.NOT_FOUND,  # a BrokerContainer's: the client's namespace names no broker there
    BrokerReadOnly: Code.FORBIDDEN,  # a write to a slave (RocketMQ: NO_PERMISSION, which its proxy answers so)
    MessageNotFound: Code.NOT_FOUND,
    MessageTooLarge: Code.MESSAGE_BODY_TOO_LARGE,
    TransactionNotFound: Code.INVALID_TRANSACTION_ID,
    TransactionConflict: Code.PRECONDITION_FAILED,  # it ended the other way; nothing changed (HTTP: 409)
    TimerNotFound: Code.NOT_FOUND,
    TimerDelivered: Code.PRECONDITION_FAILED,  # too late to recall: delivered (HTTP: 409)
    RequestTooLarge: Code.PAYLOAD_TOO_LARGE,
    Overloaded: Code.TOO_MANY_REQUESTS,  # ends a producer's retries: this proxy is busy, not the message wrong
    DiskQuotaExceeded: Code.TOO_MANY_REQUESTS,
    StoreUnavailable: Code.PROXY_TIMEOUT,  # nothing changed; a retry may succeed (HTTP: 503)
    StoreFailed: Code.HA_NOT_AVAILABLE,  # the store takes no writes until restarted (HTTP: 503)
    ClientError: Code.BAD_REQUEST,
}
"""TideMQ's error classes -> RocketMQ codes (the HTTP API's statuses are functions/api/errors.py)."""


class Refused(Exception):
    """A request the proxy refuses with a RocketMQ code of its own choosing (`about` makes these)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@contextmanager
def about(code: int) -> Iterator[None]:
    """An InvalidArgument raised inside is refused with `code` (what the checked value was: ILLEGAL_TOPIC, ...)."""
    try:
        yield
    except InvalidArgument as error:
        raise Refused(code, str(error)) from error


def status(code: int = Code.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)


OK = status()


def status_of(error: BaseException) -> pb.Status:
    """The status answering `error` (see the module docstring)."""
    if isinstance(error, Refused):
        return status(error.code, str(error))
    if isinstance(error, InvalidName):
        return status(Code.BAD_REQUEST, str(error))
    error = dependency_fault(error) or error  # DynamoDB or S3 failing through the store's retries: retryable
    code = next((CODES[cls] for cls in type(error).__mro__ if cls in CODES), None)
    if code is not None:
        return status(code, str(error))
    log.error("gRPC request failed", exc_info=error)
    return status(Code.INTERNAL_SERVER_ERROR, "internal error (a bug or an outage: see the proxy's log)")
