"""Faults of the services under the store (DynamoDB, S3, the disk), told apart from the store's own errors and from
bugs.

botocore retries each AWS call itself (`RETRIES`: "standard" mode, exponential backoff with full jitter, and a
retry quota that stops retrying when most calls fail) on throttling, 5xx, timeouts and dropped connections. What
still fails after that reaches the store's callers as the library raised it; `dependency_fault` says whether it is
such a fault, as `DependencyUnavailable` (a 503 with Retry-After over HTTP, RocketMQ's retryable code over gRPC),
or something else (a bug: a 500). Every protocol's one error mapping asks it, so a fault of a dependency is never
answered as a bug, whichever door the request came in by.

A fault is: a throttling or transient error code (below), any 5xx, a transaction cancelled only for a conflict with
another transaction or for throttling, no answer at all (a connection refused, reset or cut, a timeout), or a disk
that is full, over quota, failing or read-only. A failed condition, a validation error or an access denial is not:
the store decides what those mean, and one that escapes it is a bug. DynamoDB is reached through pynamodb alone, so
a botocore error that pynamodb did not wrap is S3's.

botocore and pynamodb are looked at only once loaded: a store with no AWS service under it (an embedded one with no
tier or a tier on a directory) never loads them, and none of their errors can reach it.
"""

from __future__ import annotations

import errno
import os
import sys

from tidemq_protocol.errors import DependencyUnavailable

RETRIES = {"mode": "standard", "total_max_attempts": 3}
"""How every AWS client of the store retries a call before its caller sees the fault (docs/reliability.md)."""
CONNECT_TIMEOUT_S = 2
"""How long a connection to DynamoDB or S3 may take to open before the attempt counts as failed."""

PASSING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "SlowDown",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
"""Error codes DynamoDB and S3 answer for a fault that passes (throttling, a conflict with a transaction, their own
failure): the same request may succeed later."""
PASSING_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
"""Why DynamoDB cancels a transaction when the transaction itself is fine (its conditions held)."""
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
"""A write failing with one of these is the disk's fault (full, over quota, failing, read-only), not the store's."""
ROCKSDB_DISK_FULL = "IO error: No space left on device"
"""How a RocksDB write (rocksdict) that found the disk full fails. The embedded engine keeps `disk_reserve_bytes` free
so that its RocksDB files never meet it; a disk another process fills meets it all the same."""


def dependency_fault(error: BaseException) -> DependencyUnavailable | None:
    """`error` as the DependencyUnavailable it stands for, if it is a fault of DynamoDB, S3 or the disk (module
    docstring); None if it is anything else."""
    if isinstance(error, DependencyUnavailable):
        return error
    if _is_pynamodb(error):
        reason = _passing(error.cause) or _passing_cancellation(error)
        return DependencyUnavailable("dynamodb", reason) if reason else None
    if _is_botocore(error):
        reason = _passing(error)
        return DependencyUnavailable("s3", reason) if reason else None
    if isinstance(error, OSError) and error.errno in DISK_ERRORS:
        return DependencyUnavailable("disk", os.strerror(error.errno).lower(), retry_after_s=5)
    if type(error) is Exception and str(error).startswith(ROCKSDB_DISK_FULL):  # rocksdict raises no class of its own
        return DependencyUnavailable("disk", "no space left on device (RocksDB)", retry_after_s=5)
    return None


def reason_of(error: BaseException) -> str:
    """A short account of what went wrong (a probe's answer): the fault's reason, an AWS error code, an OS error."""
    if isinstance(error, DependencyUnavailable):
        return error.reason
    cause = error.cause if _is_pynamodb(error) and error.cause is not None else error
    if _is_botocore(cause):
        code = (getattr(cause, "response", None) or {}).get("Error", {}).get("Code", "")
        return _passing(cause) or code or type(cause).__name__
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__


def _is_pynamodb(error: BaseException | None) -> bool:
    exceptions = sys.modules.get("pynamodb.exceptions")
    return exceptions is not None and isinstance(error, exceptions.PynamoDBException)


def _is_botocore(error: BaseException | None) -> bool:
    exceptions = sys.modules.get("botocore.exceptions")
    return exceptions is not None and isinstance(error, exceptions.BotoCoreError | exceptions.ClientError)


def _passing(error: BaseException | None) -> str | None:
    """What went wrong, if `error` (a botocore error) is a passing fault; else None."""
    if not _is_botocore(error):
        return None
    from botocore import exceptions  # loaded already: _is_botocore said so

    if isinstance(error, exceptions.ReadTimeoutError):
        return "no answer in time"
    if isinstance(error, exceptions.ConnectionError | exceptions.HTTPClientError | exceptions.IncompleteReadError):
        return "the connection failed"
    if isinstance(error, exceptions.ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in PASSING_CODES or status >= 500:
            return f"HTTP {status}" if not code or code.isdigit() else code  # a HEAD's error has a status, no code
    return None


def _passing_cancellation(error: BaseException) -> str | None:
    """Why a transaction was cancelled, if only for conflicts or throttling (none of its conditions failed)."""
    reasons = [reason.code for reason in getattr(error, "cancellation_reasons", None) or () if reason is not None]
    if reasons and all(code in PASSING_REASONS for code in reasons):
        return f"transaction cancelled: {', '.join(sorted(set(reasons)))}"
    return None
