"""The clients this proxy holds a Telemetry stream of, keyed by their `x-mq-client-id`: the one per-client state the
proxy keeps, because a stream is the only way the server can speak first.

Nothing a request needs is kept here: each request carries what it acts on (its group, topic, filter, invisible
time and poll), and groups, retry policies and deliveries are in the store, so any proxy over the same store serves
any request of any client, and a client that reconnects to another proxy loses nothing. What the registry is for:
commands the server sends a client (`send`), as a transaction check does (a `recover_orphaned_transaction_command`
to a producer of the topic: `publishers`, checks.py), and the settings the client last said.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as rpc


@dataclass(eq=False)
class Session:
    """One open Telemetry stream of a client: what it last said, and what the server has for it to read."""

    client_id: str
    store: Any = None
    """The store its calls are served from (a BrokerContainer's broker's; None if it could not be had)."""
    settings: pb.Settings | None = None
    outbox: asyncio.Queue[rpc.TelemetryCommand | None] = field(default_factory=asyncio.Queue)

    def end(self) -> None:
        """End the stream (the client said it terminates, or the proxy stops)."""
        self.outbox.put_nowait(None)


class Clients:
    """The open Telemetry streams, by client id (a client may hold more than one: one per endpoint, or a new one
    before the old is gone). Used from the event loop only."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[Session]] = {}

    def open(self, client_id: str, store: Any) -> Session:
        session = Session(client_id, store)
        self._sessions.setdefault(client_id, []).append(session)
        return session

    def close(self, session: Session) -> None:
        sessions = self._sessions.get(session.client_id, [])
        if session in sessions:
            sessions.remove(session)
        if not sessions:
            self._sessions.pop(session.client_id, None)

    def terminated(self, client_id: str) -> None:
        """The client said it shuts down: end its streams."""
        for session in self._sessions.get(client_id, []):
            session.end()

    def send(self, client_id: str, command: rpc.TelemetryCommand) -> bool:
        """Hand `command` to the client's newest stream; False if it has none here."""
        sessions = self._sessions.get(client_id)
        if not sessions:
            return False
        sessions[-1].outbox.put_nowait(command)
        return True

    def publishers(self) -> dict[tuple[Any, str], list[str]]:
        """The clients here by the store and topic they last said they publish to (an `id`-keyed store: one per
        broker of a BrokerContainer)."""
        found: dict[tuple[Any, str], list[str]] = {}
        for client_id, sessions in self._sessions.items():
            for session in sessions:
                if session.settings is None or session.store is None:
                    continue
                for topic in session.settings.publishing.topics:
                    clients = found.setdefault((session.store, topic.name), [])
                    if client_id not in clients:
                        clients.append(client_id)
        return found

    def stop(self) -> None:
        """End every stream (the proxy stops)."""
        for sessions in list(self._sessions.values()):
            for session in sessions:
                session.end()

    def __len__(self) -> int:
        return len(self._sessions)
