"""One broker in a container: its config, its store, its part in replication, its quota, its requests in flight.

A broker opens its store (recovering it), and then, by its role, either registers as a master
(`MasterReplication`) or starts pulling from its master (`SlaveReplicator`). It is opened and runs in its own
logging context (`logs.as_broker`), so its lines, and its store's threads' lines, are its own.

Closing drains it: it stops taking requests (the container answers 404 for it from then on), waits for those in
flight to finish, stops replicating, then closes the store, which flushes it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

import httpx

from functions.logic import transactions
from functions.store import serving
from shared.settings import get_settings
from tidemq.credentials import Credentials
from tidemq_protocol.errors import BrokerReadOnly, ClientError, DiskQuotaExceeded, StoreUnavailable
from tidemq_store import MessageStore, open_store
from tidemq_store.embedded import EmbeddedMessageStore
from tidemq_store.tiered import TieredMessageStore

from .config import BrokerConfig, BrokerRole, shown
from .logs import as_broker
from .quota import QuotaState, QuotaStatus, check_quota
from .replication import MasterReplication, SlaveReplicator

log = logging.getLogger("tidemq.broker")
DRAIN_TIMEOUT_S = 60.0


class Broker:
    def __init__(self, config: BrokerConfig, values: dict[str, str], client: httpx.Client) -> None:
        self.config, self.values = config, values
        self.name, self.identity = config.broker_name, config.identity
        self._in_flight = 0
        self._accepting = True
        self._drained = threading.Condition()
        self.quota = QuotaStatus(0, None, None, QuotaState.OK)
        self._next_quota_check = 0.0
        self._next_transaction_check = 0.0
        with as_broker(self.identity):
            self.store: MessageStore = open_store(config)
            self.hot: EmbeddedMessageStore = (
                self.store.hot if isinstance(self.store, TieredMessageStore) else self.store
            )
            self.master: MasterReplication | None = None
            self.slave: SlaveReplicator | None = None
            try:
                self._replicate(config, client)
            except BaseException:
                self.store.close()
                raise
            log.info("broker %s started: %s, store %s", self.name, config.broker_role.value, config.home)

    def _replicate(self, config: BrokerConfig, client: httpx.Client) -> None:
        if config.is_slave:
            credentials = Credentials(config.ha_master_access_key, config.ha_master_secret_key.get_secret_value())
            self.slave = SlaveReplicator(self.hot, client, config.ha_master_address, self.name, credentials)
            self.slave.start()
        else:
            synchronous = config.broker_role is BrokerRole.SYNC_MASTER
            self.master = MasterReplication(
                self.hot, synchronous, config.sync_flush_timeout, config.ha_housekeeping_interval
            )

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Serve one request of this broker: its store bound, its logging identity set, counted in flight;
        StoreUnavailable once it is closing."""
        with self._drained:
            if not self._accepting:
                raise StoreUnavailable(f"broker {self.name!r} is being removed or restarted")
            self._in_flight += 1
        try:
            with as_broker(self.identity), serving(self.store):
                yield
        finally:
            with self._drained:
                self._in_flight -= 1
                self._drained.notify_all()

    def refusal(self, master_only: bool, stores_messages: bool) -> ClientError | None:
        """Why the broker does not serve a request now, whichever protocol it came by: a slave serves none that is
        `master_only` (a write); a broker past its disk quota none that `stores_messages`."""
        if self.config.is_slave and master_only:
            return BrokerReadOnly(self.name)
        if self.quota.refusing_writes and stores_messages:
            return DiskQuotaExceeded(f"broker {self.name!r} takes no new messages now: {self.quota.warning}")
        return None

    def check_quota(self, now: float, due: bool = False) -> None:
        """Check the disk quota if it is `due` or its time has come (every `cleanResourceInterval`), logging a change
        of state."""
        if now < self._next_quota_check and not due:
            return
        self._next_quota_check = now + self.config.clean_resource_interval / 1000
        with as_broker(self.identity):
            status = check_quota(self.config, self.store, self.hot)
            if status.segments_released:
                log.warning(
                    "past its disk quota's threshold: removed %d of its oldest segments, safe in the cold tier",
                    status.segments_released,
                )
            if status.state is not self.quota.state and status.warning:
                log.warning("%s", status.warning)
            elif status.state is QuotaState.OK and self.quota.refusing_writes:
                log.info("back under its disk quota's threshold: takes writes again")
            self.quota = status

    def check_transactions(self, now: float) -> None:
        """A master's transactional messages: open due check-backs, roll back at the check limit (the maintenance
        function's job "transactions"), every min(timeout, check interval)."""
        settings = get_settings()
        if self.config.is_slave or now < self._next_transaction_check:
            return
        self._next_transaction_check = (
            now + min(settings.transaction_timeout_ms, settings.transaction_check_interval_ms) / 1000
        )
        with as_broker(self.identity):
            transactions.sweep(self.store, settings)

    def close(self) -> None:
        """Drain and close (see the module docstring)."""
        with self._drained:
            self._accepting = False
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            while self._in_flight and (left := deadline - time.monotonic()) > 0:
                self._drained.wait(left)
        with as_broker(self.identity):
            if self.slave is not None:
                self.slave.stop()
            self.store.close()
            log.info("broker %s closed", self.name)

    def describe(self) -> dict:
        config = self.config
        return {
            "name": self.name,
            "cluster": config.broker_cluster_name,
            "id": config.broker_id,
            "identity": self.identity,
            "role": config.broker_role.value,
            "store": str(config.home),
            "tier": config.tier.value,
            "in_flight": self._in_flight,
            "quota": asdict(self.quota),
            "replication": self.master.describe() if self.master else self.slave.describe() if self.slave else None,
            "isolated_log": config.isolate_log_enable,
        }

    def shown_config(self) -> dict[str, str]:
        return shown(self.values)
