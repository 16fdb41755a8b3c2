"""The `kv_namespaces` items: one per namespace, holding its settings and its revision (the namespace's last
write), and while a restore or a deletion runs, its hold (`busy`, `busy_token`, `busy_since`: the package's
docstring says why). Deleting a namespace deletes its keys and changes too.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError, UpdateError

from tidemq_protocol import clock
from tidemq_protocol.errors import NamespaceExists, NamespaceNotFound, StoreUnavailable
from tidemq_protocol.kv import NamespaceConfig, NamespaceStatus, check_config, check_limit, check_namespace

from ...model import Page
from ..conditions import is_conditional
from ..tables import Tables

NAMESPACE = "namespace"  # the hash key of every `kv_namespaces` item: one partition, listed in name order
RESTORING, DELETING = "restoring", "deleting"  # what may hold a namespace (`busy`)
BUSY_ABANDONED_MS = 15 * 60_000
"""A hold older than this lost its holder: no Lambda invocation runs longer."""


class Namespaces:
    """The namespaces of one set of tables."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self._namespaces = tables.kv_namespaces

    def create(self, config: NamespaceConfig) -> NamespaceConfig:
        """One conditional PutItem (a namespace whose deletion was abandoned is deleted first)."""
        check_config(config)
        created = dataclasses.replace(config, created_at=clock.now_ms())
        namespaces = self._namespaces
        fresh = namespaces(NAMESPACE, created.name, config=_config_json(created), revision=0)
        try:
            fresh.save(condition=namespaces.name.does_not_exist())
            return created
        except PutError as error:
            if not is_conditional(error):
                raise
        item = self.item(created.name)
        if item is None or item.busy != DELETING or not abandoned(item):
            raise NamespaceExists(created.name)
        token = self.hold(item, DELETING, NamespaceExists(created.name))
        self.purge(created.name)
        try:
            fresh.save(condition=namespaces.busy_token == token)
        except PutError as error:
            if is_conditional(error):
                raise NamespaceExists(created.name) from None
            raise
        return created

    def list(self, after: str | None = None, limit: int = 100) -> Page[NamespaceStatus]:
        """One Query of the namespaces' partition, in name order (namespaces being deleted left out). Safe against
        concurrent deletes: each item holds the namespace's settings and revision, so nothing is read per namespace
        after the Query (where a namespace deleted meanwhile would raise NamespaceNotFound): one deleted during the
        listing is listed as it was or left out, and the next page starts after a name, whether it is still there."""
        check_limit(limit)
        if after is not None:
            check_namespace(after)
        namespaces = self._namespaces
        condition = namespaces.name > after if after is not None else None
        found: list[NamespaceStatus] = []
        for item in namespaces.query(NAMESPACE, condition, consistent_read=True, page_size=limit + 1):
            if item.busy == DELETING:
                continue
            if len(found) == limit:
                return Page(found, found[-1].name)
            found.append(NamespaceStatus(config_of(item), int(item.revision)))
        return Page(found, None)

    def delete(self, name: str) -> None:
        """Hold the namespace (from then on no write lands and it reads as missing), delete its entries and
        changes (Query, BatchWriteItem), then its item."""
        check_namespace(name)
        item = self.item(name)
        if item is None or (item.busy == DELETING and not abandoned(item)):
            raise NamespaceNotFound(name)
        if item.busy == RESTORING and not abandoned(item):
            raise StoreUnavailable(f"KV namespace {name!r} is being restored: delete it once the restore has ended")
        token = self.hold(item, DELETING, NamespaceNotFound(name))
        self.purge(name)
        try:
            self._namespaces(NAMESPACE, name).delete(condition=self._namespaces.busy_token == token)
        except DeleteError as error:
            if not is_conditional(error):  # else a create took the abandoned deletion over: it is done
                raise

    def item(self, name: str):
        """The namespace's item, strongly consistent (None: there is none)."""
        try:
            return self._namespaces.get(NAMESPACE, name, consistent_read=True)
        except DoesNotExist:
            return None

    def live(self, name: str):
        """The namespace's item, or NamespaceNotFound (also while it is being deleted)."""
        check_namespace(name)
        item = self.item(name)
        if item is None or item.busy == DELETING:
            raise NamespaceNotFound(name)
        return item

    # ---- the hold --------------------------------------------------------------------------------

    def hold(self, item, busy: str, refused: Exception, condition=None) -> str:
        """Hold the namespace for a restore or a deletion, if it is still as `item` was read (raise `refused`
        otherwise); returns the hold's token."""
        namespaces, token = self._namespaces, uuid.uuid4().hex
        seen = (
            namespaces.busy_token.does_not_exist()
            if item.busy_token is None
            else namespaces.busy_token == item.busy_token
        )
        if condition is not None:
            seen = seen & condition
        try:
            namespaces(NAMESPACE, item.name).update(
                actions=[
                    namespaces.busy.set(busy),
                    namespaces.busy_token.set(token),
                    namespaces.busy_since.set(clock.now_ms()),
                ],
                condition=namespaces.name.exists() & seen,
            )
        except UpdateError as error:
            if is_conditional(error):
                raise refused from None
            raise
        return token

    def release(self, name: str, token: str, revision: int) -> None:
        namespaces = self._namespaces
        actions = [
            namespaces.revision.set(revision),
            namespaces.busy.remove(),
            namespaces.busy_token.remove(),
            namespaces.busy_since.remove(),
        ]
        try:
            namespaces(NAMESPACE, name).update(actions=actions, condition=namespaces.busy_token == token)
        except UpdateError as error:
            if is_conditional(error):
                raise StoreUnavailable(f"KV namespace {name!r} was taken over while this restore held it") from None
            raise

    def purge(self, name: str) -> None:
        """Delete every entry and change item of the namespace."""
        for model, range_key in ((self.tables.kv_entries, "key"), (self.tables.kv_changes, "revision")):
            items = model.query(name, consistent_read=True, attributes_to_get=["namespace", range_key])
            with model.batch_write() as writer:
                for item in items:
                    writer.delete(item)


def abandoned(item) -> bool:
    """Whether the hold on the namespace's item is old enough that its holder must be gone."""
    return item.busy_since is not None and clock.now_ms() - int(item.busy_since) > BUSY_ABANDONED_MS


def _config_json(config: NamespaceConfig) -> str:
    return json.dumps(dataclasses.asdict(config))


def config_of(item) -> NamespaceConfig:
    """The namespace's settings, from its item."""
    return NamespaceConfig(**json.loads(item.config))


__all__ = ["BUSY_ABANDONED_MS", "DELETING", "NAMESPACE", "RESTORING", "Namespaces", "abandoned", "config_of"]
