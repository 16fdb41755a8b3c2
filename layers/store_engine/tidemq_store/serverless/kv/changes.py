"""The `kv_changes` items: a namespace's history, one item per revision (the change that made it), kept for the
namespace's history_ms, and the watches that read it. A missing change below the namespace's revision is one
gone, never one on its way (the package's docstring says why), so a watch raises RevisionCompacted there.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pynamodb.exceptions import DoesNotExist

from tidemq_protocol import clock
from tidemq_protocol.errors import InvalidArgument, RevisionCompacted
from tidemq_protocol.kv import (
    MAX_PAGE,
    MAX_PAGE_BYTES,
    Change,
    ChangeKind,
    ChangePage,
    check_key,
    check_limit,
    check_namespace,
)

from ..tables import Tables
from .namespaces import Namespaces

WAIT_POLL_S = 0.1
"""How often a waiting watch reads its namespace's revision."""
EXAMINED_PER_WATCH = 5 * MAX_PAGE
"""Changes a filtered watch reads per call at most, matching or not (the next call goes on from there)."""


class Changes:
    """The history of the namespaces of one set of tables."""

    def __init__(self, tables: Tables, namespaces: Namespaces) -> None:
        self.namespaces = namespaces
        self._changes = tables.kv_changes

    def watch(
        self,
        namespace: str,
        from_revision: int,
        *,
        key: str | None = None,
        prefix: str | None = None,
        limit: int = 100,
        wait_s: float = 0.0,
    ) -> ChangePage:
        """The namespace's revision R, then one Query of its change items from `from_revision` to R; with nothing
        there yet (or only changes the filter leaves out), the revision again every WAIT_POLL_S until `wait_s`
        has passed."""
        check_limit(limit)
        if isinstance(from_revision, bool) or not isinstance(from_revision, int) or from_revision < 1:
            raise InvalidArgument(f"a watch starts at revision 1 or later, not {from_revision!r}")
        if key is not None:
            check_key(key)
        if prefix:
            check_key(prefix)
        check_namespace(namespace)
        deadline = time.monotonic() + max(wait_s, 0.0)
        while True:
            revision = int(self.namespaces.live(namespace).revision)
            changes, next_revision = [], from_revision
            if from_revision <= revision:
                changes, next_revision = self._changes_from(namespace, from_revision, revision, key, prefix, limit)
            remaining = deadline - time.monotonic()
            if changes or remaining <= 0:
                return ChangePage(changes, revision, next_revision)
            if next_revision <= revision:  # stopped before the end (a gap, or enough read): go on at once
                from_revision = next_revision
                continue
            from_revision = next_revision
            time.sleep(min(WAIT_POLL_S, remaining))

    def _changes_from(
        self, namespace: str, first: int, last: int, key: str | None, prefix: str | None, limit: int
    ) -> tuple[list[Change], int]:
        """The changes [first, last] that match, in revision order, and the revision after the last one read.
        RevisionCompacted when the first change there is not the first after `first` - 1, or there is none. A
        later gap (a change expired before an older one) ends the page, so the next call reports it."""
        filtered = key is not None or prefix is not None
        page_size = MAX_PAGE if filtered else limit
        condition = self._changes.revision.between(first, last)
        now, changes, size, examined, previous = clock.now_ms(), [], 0, 0, None
        for item in self._changes.query(namespace, condition, consistent_read=True, page_size=page_size):
            if item.purge_at.timestamp() * 1000 <= now:
                continue  # past the namespace's history: gone, as if DynamoDB had deleted it already
            change = _change_of(item)
            if previous is None and change.previous >= first:
                raise RevisionCompacted(namespace, first, change.revision)
            if previous is not None and change.previous != previous:
                break
            if changes and size + len(change.value) > MAX_PAGE_BYTES:
                break
            if examined == EXAMINED_PER_WATCH:
                break
            examined, previous = examined + 1, change.revision
            if (key is None or change.key == key) and (prefix is None or change.key.startswith(prefix)):
                changes.append(change)
                size += len(change.value)
                if len(changes) == limit:  # full: no need to read (maybe a page more) to find so
                    break
        if previous is None:
            raise RevisionCompacted(namespace, first, last + 1)
        return changes, previous + 1

    def made_by(self, namespace: str, revision: int, writer: str) -> bool:
        """Whether the namespace's change at `revision` was made by the write whose token is `writer` (strongly
        consistent): a write whose answer was lost, and that botocore sent again, finds it landed so."""
        try:
            return self._changes.get(namespace, revision, consistent_read=True).writer == writer
        except DoesNotExist:
            return False

    def item(self, namespace: str, change: Change, purge_at: datetime, writer: str | None = None):
        """The change's item, to be written (the write's transaction, with its token, or a restore's batch)."""
        return self._changes(
            namespace,
            change.revision,
            writer=writer,
            previous=change.previous,
            kind=change.kind.value,
            key=change.key,
            value=change.value if change.kind is ChangeKind.PUT else None,
            version=change.version,
            expires_at_ms=change.expires_at_ms,
            purge_at=purge_at,
        )


def _change_of(item) -> Change:
    expires = item.expires_at_ms
    return Change(
        revision=int(item.revision),
        previous=int(item.previous),
        kind=ChangeKind(item.kind),
        key=item.key,
        value=item.value or b"",
        version=int(item.version),
        expires_at_ms=None if expires is None else int(expires),
    )


LATEST_PURGE_S = int(datetime(9999, 12, 31, tzinfo=UTC).timestamp())
"""The latest `purge_at` a datetime holds (an imported key may expire later: DynamoDB's TTL ignores times that far
out anyway, and the key reads as absent from `expires_at_ms` on whatever its purge time)."""


def purge_time(at_ms: int) -> datetime:
    """A `purge_at` (DynamoDB TTL, whole seconds): the second `at_ms` falls in, rounded up."""
    return datetime.fromtimestamp(min(-(-at_ms // 1000), LATEST_PURGE_S), tz=UTC)


__all__ = ["Changes", "purge_time"]
