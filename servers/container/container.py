"""The BrokerContainer (RIP-31): several brokers in one process, added and removed while it runs.

The brokers share what a process has once: the transport (one HTTP server, one event loop, one pool of handler
threads: server.py), the outbound client their replication uses (one `httpx.Client`), the users who may call
them (the container's own store), one scheduler thread (disk quotas, transaction check-backs) and one log router.
Each has its own name, store directory, config and quota, and is served under its own path prefix,
`/brokers/<brokerName>/...`.

Adding opens the broker's store (recovering it); removing drains and closes it and leaves its files: added again,
it has its data. Updating a config restarts the broker with the new one (a promotion is an update of
`brokerRole`), unless only its quota or its log isolation changed, which take effect at once. Changes made here
last until the container stops: its config file says which brokers it starts with.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import httpx

from tidemq_protocol.errors import BrokerExists, BrokerNotFound, InvalidArgument
from tidemq_store.errors import StoreClosed, StoreLocked

from .broker import Broker
from .config import BrokerConfig, to_properties
from .logs import LogRouter

log = logging.getLogger("tidemq.container")
LIVE_KEYS = frozenset(
    {
        "quotaPercentForDiskPartition",
        "logicalDiskSpaceCleanForciblyThreshold",
        "cleanResourceInterval",
        "isolateLogEnable",
    }
)
TICK_S = 0.05


class BrokerContainer:
    def __init__(self, root: Path, logs: LogRouter) -> None:
        self.root, self.logs = root, logs
        self.client = httpx.Client(limits=httpx.Limits(max_connections=64))
        self._brokers: dict[str, Broker] = {}
        self._changing = threading.RLock()  # one add, remove or update at a time
        self._stop = threading.Event()
        self._scheduler = threading.Thread(target=self._schedule, name="container-scheduler", daemon=True)

    def start(self, broker_files: list[Path]) -> BrokerContainer:
        """Open the brokers its config file names (all or none: a broker that cannot open closes those opened)."""
        try:
            for path in broker_files:
                config, values = BrokerConfig.read(path, self.root)
                self._open(config, values)
        except BaseException:
            self.close()
            raise
        self._scheduler.start()
        return self

    # ---- the brokers ------------------------------------------------------------------------------

    def get(self, name: str) -> Broker:
        broker = self._brokers.get(name)
        if broker is None:
            raise BrokerNotFound(name)
        return broker

    def brokers(self) -> list[Broker]:
        return sorted(self._brokers.values(), key=lambda broker: broker.name)

    def add(self, properties: str) -> Broker:
        """Add a broker from the text of its config file (sent over the API: its store must be under the
        container's directory)."""
        config, values = BrokerConfig.parse(properties, "the broker config", self.root, confined=True)
        return self._open(config, values)

    def _open(self, config: BrokerConfig, values: dict[str, str]) -> Broker:
        with self._changing:
            if config.broker_name in self._brokers:
                raise BrokerExists(f"this container holds a broker {config.broker_name!r} already")
            if config.isolate_log_enable:
                self.logs.isolate(config.identity)
            try:
                broker = Broker(config, values, self.client)
            except StoreLocked:
                self.logs.forget(config.identity)
                raise BrokerExists(f"the store {config.home} is in use by another broker or process") from None
            except BaseException:
                self.logs.forget(config.identity)
                raise
            self._brokers[config.broker_name] = broker
            self._check_quota(broker, due=True)
        log.info("added broker %s (%s)", config.broker_name, config.broker_role.value)
        return broker

    def remove(self, name: str) -> Broker:
        """Stop taking the broker's requests, finish those in flight, stop its replication, flush and close its
        store; its files stay."""
        with self._changing:
            broker = self.get(name)
            try:
                broker.close()
            finally:
                del self._brokers[name]
                self.logs.forget(broker.identity)
        log.info("removed broker %s", name)
        return broker

    def update(self, name: str, changes: dict[str, str]) -> Broker:
        """Change settings of a broker: its quota at once, anything else by restarting it with the new config (the
        old one is restored if the new one cannot open)."""
        with self._changing:
            broker = self.get(name)
            values = {**broker.values, **changes}
            if values.get("brokerName", name) != name:
                raise InvalidArgument("brokerName cannot change: remove the broker and add one")
            # not confined: the store stays where it is, which may be where the container's own file put it
            config, values = BrokerConfig.parse(to_properties(values), "the broker config", self.root, confined=False)
            if config.home != broker.config.home:
                raise InvalidArgument("storePathRootDir cannot change while the broker holds its store")
            if set(changes) <= LIVE_KEYS:
                if config.isolate_log_enable:
                    self.logs.isolate(config.identity)
                else:
                    self.logs.forget(config.identity)
                broker.config, broker.values = config, values
                self._check_quota(broker, due=True)
                log.info("broker %s: %s changed", name, ", ".join(sorted(changes)))
                return broker
            self.remove(name)
            try:
                return self._open(config, values)
            except BaseException:
                log.exception("broker %s did not start with its new config; starting it with its old one", name)
                self._open(broker.config, broker.values)
                raise

    def config_of(self, name: str) -> dict[str, str]:
        return self.get(name).shown_config()

    # ---- lifecycle --------------------------------------------------------------------------------

    def _schedule(self) -> None:
        """The container's one scheduler thread: each broker's disk quota, every `cleanResourceInterval`, and its
        transactional messages' check-backs."""
        while not self._stop.wait(TICK_S):
            for broker in list(self._brokers.values()):
                self._check_quota(broker)
                self._check_transactions(broker)

    @staticmethod
    def _check_transactions(broker: Broker) -> None:
        try:
            broker.check_transactions(time.monotonic())
        except StoreClosed:
            pass  # removed meanwhile
        except Exception:
            log.exception("the transaction check-backs of broker %s failed; they run again", broker.name)

    @staticmethod
    def _check_quota(broker: Broker, due: bool = False) -> None:
        try:
            broker.check_quota(time.monotonic(), due)
        except StoreClosed:
            pass  # removed meanwhile
        except Exception:
            log.exception("the disk quota check of broker %s failed; it runs again", broker.name)

    def close(self) -> None:
        self._stop.set()
        if self._scheduler.is_alive():
            self._scheduler.join()
        with self._changing:
            for name in list(self._brokers):
                try:
                    self.remove(name)
                except Exception:
                    log.exception("broker %s did not close cleanly", name)
        self.client.close()
