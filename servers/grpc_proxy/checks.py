"""Transaction check-backs for RocketMQ 5 producers: the broker asks a producer how its transaction ended with a
Telemetry `recover_orphaned_transaction_command`, and the producer's checker answers with
`EndTransaction(source=SOURCE_SERVER_CHECK)` (service.py).

RocketMQ 5's gRPC protocol has no producer group: a transactional producer is one that publishes to the topic. So
every transaction sent through gRPC has one producer group, GRPC_PRODUCERS, and its checks go to the producers of its
topic. The proxy holds no transaction state: each pass takes the due checks of the topics its connected producers
publish to, in the store each producer's stream was opened on (a BrokerContainer's broker's:
servers/container/grpc_routing.py), with functions/logic/transactions.py `claim_checks` (the same conditional claim a
producer's long poll over HTTP makes), so a check is taken by one proxy and handed to one of its producers of that
topic, round-robin. A check whose producer went away before answering is asked again an interval later
(TIDEMQ_TRANSACTION_CHECK_INTERVAL_MS), and a transaction past the most checks is rolled back, as for every producer.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable

from functions.logic import transactions
from shared.settings import Settings
from tidemq_protocol.errors import TopicNotFound
from tidemq_protocol.message import MessageType, StoredMessage
from tidemq_protocol.names import check_name
from tidemq_store import MessageStore
from tidemq_store.transactions.api import Transaction

from . import messages
from .clients import Clients
from .protocol import service_pb2 as rpc

log = logging.getLogger("tidemq.grpc")

GRPC_PRODUCERS = "%GRPC%"
"""The producer group of every transaction a RocketMQ 5 client sends (its protocol names none)."""
CHECK_EVERY_S = 1.0
"""How often the proxy looks for due checks of its producers' topics."""
CHECKS_PER_PASS = 32
"""The most checks of one topic one pass takes."""

check_name("group", GRPC_PRODUCERS)


class CheckBacks:
    """Hands due transaction checks to the producers connected to this proxy (see the module docstring)."""

    def __init__(
        self,
        clients: Clients,
        settings: Settings,
        run: Callable,
        broker: str,
    ) -> None:
        self.clients, self.settings, self.run, self.broker = clients, settings, run, broker
        self._turn = itertools.count()

    async def forever(self) -> None:
        """Pass after pass until cancelled (the proxy stops); a failed pass is logged, and the next one comes."""
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            try:
                await self.once()
            except Exception:  # an outage of the store: the next pass tries again
                log.exception("handing transaction checks to producers failed")

    async def once(self) -> int:
        """One pass: every due check of the producers' topics handed to one of them; how many were handed."""
        handed = 0
        for (store, topic), producers in self.clients.publishers().items():
            for transaction, message in await self.run(functools.partial(self._claim, store, topic)):
                client_id = producers[next(self._turn) % len(producers)]
                handed += self.clients.send(client_id, self.command(transaction, message))
        return handed

    def _claim(self, store: MessageStore, topic: str) -> list[tuple[Transaction, StoredMessage]]:
        try:
            if store.cached_topic(topic).message_type is not MessageType.TRANSACTION:
                return []
        except TopicNotFound:  # a producer of a topic deleted since
            return []
        return transactions.claim_checks(store, self.settings, topic, GRPC_PRODUCERS, CHECKS_PER_PASS)

    def command(self, transaction: Transaction, message: StoredMessage) -> rpc.TelemetryCommand:
        """The command asking a producer how `transaction` ended; its answer's transaction id is the half message's."""
        half = messages.stored(message, MessageType.TRANSACTION, "", self.broker)
        return rpc.TelemetryCommand(
            recover_orphaned_transaction_command=rpc.RecoverOrphanedTransactionCommand(
                message=half, transaction_id=transaction.msg_id
            )
        )
