"""RocketMQ 5's MessagingService over TideMQ: each RPC a thin translation into the logic the HTTP handlers use
(functions/logic: produce, pop, groups) and of its result into RocketMQ's response, checked by the same ACLs
(functions/api/auth.py `require`). No RPC implements produce, pop, ack, filters or ACLs of its own.

    QueryRoute                 the topic's queues (routes.py); Pub, Sub or Get on the topic
    Heartbeat                  authenticated; nothing to keep (the proxy is stateless)
    Telemetry                  the client's settings answered with the server's (client_settings.py), at once;
                               transaction checks handed to producers (checks.py)
    SendMessage                produce: Pub on the topic; the produce logic routes (a FIFO message by its group);
                               stored once for its message ids (tidemq_store/sends.py: a client's resend); a
                               delay message kept for later answers the id and recall handle the store gave it; a
                               TRANSACTION topic's message is a half message (functions/logic/transactions.py),
                               its transaction id the half message's id
    EndTransaction             commit, roll back, or (no resolution) note that the producer does not know yet: Pub
                               on the topic; any proxy ends any transaction (the state is the store's)
    RecallMessage              recall a delay message before it is due: Pub on the topic
    ReceiveMessage             pop receive, long-polled without holding a thread; Sub on group and topic
    AckMessage                 pop ack, one status per entry
    ChangeInvisibleDuration    pop change of invisible time (0 .. the longest: a push consumer's nack), new handle
    ForwardMessageToDeadLetterQueue   the delivery's message to the group's dead letters, the delivery settled
    QueryAssignment            the topic as a whole (routes.py); Sub on group and topic
    NotifyClientTermination    the client's Telemetry streams ended
Every other method (the pull RPCs, lite topics) answers UNSUPPORTED.

Store calls run on the proxy's own threads (TIDEMQ_GRPC_THREADS) under the caller's identity (or inline on the
event loop, when the proxy has nothing else in hand: MessagingService `call`); a waiting receive
sleeps on the event loop between its looks (`pop.pauses`), so a long poll or an idle stream holds no thread. The
poll is clipped as the Apache proxy clips it: to TIDEMQ_GRPC_MIN/MAX_LONG_POLLING_MS, and to the time the client's
deadline leaves (ILLEGAL_POLLING_TIME if that is shorter than the shortest poll).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

from functions.api.auth import Caller, calling_as, require, require_any
from functions.logic import pop, produce, transactions
from functions.push.trigger import push_notifier
from functions.store import get_store
from shared.settings import Settings
from tidemq_protocol import acl
from tidemq_protocol.acl import Action
from tidemq_protocol.api.common import MSG_ID_PATTERN
from tidemq_protocol.errors import InvalidArgument, Overloaded
from tidemq_protocol.filter import subscription_filter
from tidemq_protocol.message import Message, MessageType
from tidemq_protocol.names import check_name
from tidemq_store import MessageStore
from tidemq_store.sends import grpc_send_key

from . import client_settings, messages, routes
from .auth import CLIENT_ID, caller_of
from .checks import GRPC_PRODUCERS, CheckBacks
from .clients import Clients
from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as rpc
from .status import OK, Code, Refused, about, status, status_of

R = TypeVar("R")
ANSWER_MARGIN_MS = 500
"""Time kept from a receive's deadline to answer in after its poll."""
ACK_CODES = {
    "acked": Code.OK,
    "already_acked": Code.OK,
    "invalid_receipt_handle": Code.INVALID_RECEIPT_HANDLE,
    "dead_lettered": Code.INVALID_RECEIPT_HANDLE,  # a RocketMQ proxy's answer to a handle no longer ackable
}
"""An ack's outcome (functions/logic/pop.py) -> its entry's code; the status message is the outcome's name."""
TOGETHER_S = 1.0
"""How long after calls were last in hand together the proxy serves none inline (`inline_when_idle`)."""
RESOLUTIONS = {pb.COMMIT: "commit", pb.ROLLBACK: "rollback", pb.TRANSACTION_RESOLUTION_UNSPECIFIED: "unknown"}


def answering(response: type[Any]) -> Callable:
    """A unary RPC whose every error is answered as `response` with the error's status (status.py)."""

    def wrap(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(handler)
        async def handle(self: MessagingService, request: Any, context: Any) -> Any:
            try:
                return await handler(self, request, context)
            except Exception as error:  # answered with a status, never a gRPC error (clients read only the status)
                return response(status=status_of(error))

        return handle

    return wrap


def topic_name(resource: pb.Resource) -> str:
    with about(Code.ILLEGAL_TOPIC):
        return check_name("topic", resource.name)


def group_name(resource: pb.Resource) -> str:
    with about(Code.ILLEGAL_CONSUMER_GROUP):
        return check_name("group", resource.name)


def sub(group: str, topic: str) -> None:
    """What every consuming RPC needs, as the HTTP API's pop routes do: Sub on the group and on the topic."""
    require((acl.group(group), Action.SUB), (acl.topic(topic), Action.SUB))


def check_transaction_id(text: str) -> str:
    """`text` if it can be a transaction's id (its half message's id), else InvalidArgument."""
    if not re.fullmatch(MSG_ID_PATTERN, text):
        raise InvalidArgument(f"transaction_id must be a half message's id (24 hexadecimal digits), got {text[:64]!r}")
    return text


def millis(span: Any) -> int:
    return span.seconds * 1000 + span.nanos // 1_000_000


class MessagingService:
    """The service's RPCs (server.py serves them under RocketMQ's service name); see the module docstring.

    `inline_when_idle`: a call's store work (`call`) is done on the event loop itself when no other call is in hand,
    instead of on the proxy's threads: the hop to a thread and back is the part of a single send the proxy can save
    (docs/performance.md: ~0.1 ms and a fifth of its CPU). A call looks after one turn of the loop, so that calls
    that came together (while the loop was busy) see each other and go to threads, and for TOGETHER_S after calls
    were last seen together every call does: concurrent clients are not served one by one on the loop. Only for a
    loop that is the proxy's alone (server.py `ProxyThread`) and a local store (the embedded engine): a network store
    call, or an HTTP server on the same loop, must never wait behind it. Waiting receives stay coroutines either
    way."""

    def __init__(
        self,
        settings: Settings,
        threads: Executor,
        broker: str,
        address: tuple[str, int],
        store: Callable[[], MessageStore] = get_store,
        inline_when_idle: bool = False,
    ) -> None:
        self.settings, self.threads, self.broker, self.address = settings, threads, broker, address
        self.store, self.inline_when_idle = store, inline_when_idle
        self._in_hand = 0  # calls whose store work is running (changed on the event loop only)
        self._together_at = -TOGETHER_S  # when calls were last seen in hand together (time.monotonic)
        self.clients = Clients()
        self.checks = CheckBacks(self.clients, settings, self.run, broker)

    # ---- plumbing --------------------------------------------------------------------------------------------

    async def run(self, work: Callable[[], R], who: Caller | None = None) -> R:
        """`work()` on the proxy's threads (as `who`, if given), in a copy of this context."""
        if who is not None:
            work = functools.partial(_as, who, work)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.threads, contextvars.copy_context().run, work)

    async def call(self, context: Any, work: Callable[[], R]) -> R:
        """`work()` as the request's caller (authenticated there: it may read the store), on the proxy's threads, or
        inline when the proxy is idle (`inline_when_idle`: the class docstring)."""
        metadata, peer = _metadata(context), context.peer()
        if self._in_hand >= self.settings.grpc_threads + self.settings.gateway_queue:  # as adapter.Threads: bounded
            raise Overloaded(f"{self._in_hand} calls are being served or waiting in this proxy already; send it again")
        self._in_hand += 1
        try:
            if self.inline_when_idle:
                await asyncio.sleep(0)  # calls the loop has in hand too get counted first
                now = time.monotonic()
                if self._in_hand > 1:
                    self._together_at = now
                elif now - self._together_at > TOGETHER_S:
                    return _as(caller_of(metadata, peer), work)
            return await self.run(lambda: _as(caller_of(metadata, peer), work))
        finally:
            self._in_hand -= 1

    # ---- routes and clients ----------------------------------------------------------------------------------

    @answering(rpc.QueryRouteResponse)
    async def QueryRoute(self, request: rpc.QueryRouteRequest, context: Any) -> rpc.QueryRouteResponse:
        topic = topic_name(request.topic)

        def route() -> list[pb.MessageQueue]:
            require_any(acl.topic(topic), Action.PUB, Action.SUB, Action.GET)
            config = self.store().cached_topic(topic)
            return routes.message_queues(config, request.topic.resource_namespace, self._broker(request.endpoints))

        return rpc.QueryRouteResponse(status=OK, message_queues=await self.call(context, route))

    @answering(rpc.QueryAssignmentResponse)
    async def QueryAssignment(self, request: rpc.QueryAssignmentRequest, context: Any) -> rpc.QueryAssignmentResponse:
        topic, group = topic_name(request.topic), group_name(request.group)

        def assign() -> list[pb.Assignment]:
            sub(group, topic)
            self.store().cached_group(group)  # CONSUMER_GROUP_NOT_FOUND: groups are made first
            config = self.store().cached_topic(topic)
            return routes.assignments(config, request.topic.resource_namespace, self._broker(request.endpoints))

        return rpc.QueryAssignmentResponse(status=OK, assignments=await self.call(context, assign))

    @answering(rpc.HeartbeatResponse)
    async def Heartbeat(self, request: rpc.HeartbeatRequest, context: Any) -> rpc.HeartbeatResponse:
        await self.call(context, lambda: None)
        return rpc.HeartbeatResponse(status=OK)

    @answering(rpc.NotifyClientTerminationResponse)
    async def NotifyClientTermination(
        self, request: rpc.NotifyClientTerminationRequest, context: Any
    ) -> rpc.NotifyClientTerminationResponse:
        await self.call(context, lambda: None)
        self.clients.terminated(_metadata(context).get(CLIENT_ID, ""))
        return rpc.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(
        self, requests: AsyncIterator[rpc.TelemetryCommand], context: Any
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        """Answer each settings the client writes with the server's (signed once, at the stream's open; a refusal
        answers every settings with its status). The stream is also where the server speaks first (clients.py)."""
        metadata, peer = _metadata(context), context.peer()
        who: Caller | None = None
        refusal: BaseException | None = None
        try:
            if not metadata.get(CLIENT_ID):
                raise Refused(Code.CLIENT_ID_REQUIRED, f"a Telemetry stream needs the {CLIENT_ID} header")
            who = await self.run(lambda: caller_of(metadata, peer))
        except Exception as error:  # answered on the stream, to each settings
            refusal = error
        session = self.clients.open(metadata.get(CLIENT_ID, ""), self._store_or_none())

        async def read() -> None:
            try:
                async for command in requests:
                    if command.HasField("settings"):
                        session.settings = command.settings
                        await session.outbox.put(await self._settings(command.settings, who, refusal))
            finally:
                session.end()

        reader = asyncio.create_task(read())
        try:
            while (command := await session.outbox.get()) is not None:
                yield command
        finally:
            reader.cancel()
            self.clients.close(session)

    async def _settings(
        self, asked: pb.Settings, who: Caller | None, refusal: BaseException | None
    ) -> rpc.TelemetryCommand:
        if who is None:  # refused at the stream's open
            return rpc.TelemetryCommand(status=status_of(refusal or Exception()), settings=asked)

        def answer() -> pb.Settings:
            if asked.HasField("subscription"):  # the group's settings are the group's: Sub or Get on it
                require_any(acl.group(group_name(asked.subscription.group)), Action.SUB, Action.GET)
            return client_settings.answer(asked, self.store(), self.settings)

        try:
            answered = await self.run(answer, who)
        except Exception as error:  # a consumer of a group the store does not have, ...
            return rpc.TelemetryCommand(status=status_of(error), settings=asked)
        return rpc.TelemetryCommand(status=OK, settings=answered)

    # ---- producing -------------------------------------------------------------------------------------------

    @answering(rpc.SendMessageResponse)
    async def SendMessage(self, request: rpc.SendMessageRequest, context: Any) -> rpc.SendMessageResponse:
        if not request.messages:
            raise Refused(Code.BAD_REQUEST, "a SendMessage needs at least one message")
        topics = {message.topic.name for message in request.messages}
        if len(topics) > 1:
            raise Refused(Code.BAD_REQUEST, f"the messages of one SendMessage go to one topic, not {sorted(topics)}")
        topic = topic_name(request.messages[0].topic)

        def send() -> list[rpc.SendResultEntry]:
            require((acl.topic(topic), Action.PUB))
            store = self.store()
            config = store.cached_topic(topic)
            most = self.settings.max_message_bytes
            frames = [messages.to_store(m, config.message_type, most) for m in request.messages]
            if config.message_type is MessageType.TRANSACTION:
                return [
                    self._half(store, topic, config.queues, frame.message, m.system_properties.message_id)
                    for frame, m in zip(frames, request.messages, strict=True)
                ]
            ids = [m.system_properties.message_id for m in request.messages]  # a client's resend keeps them
            results = produce.produce_frames(store, topic, frames, push_notifier(), grpc_send_key(ids))
            return [
                rpc.SendResultEntry(
                    status=OK,
                    # a delay message kept for later has the id the store gave it (tidemq_store/timer)
                    message_id=m.system_properties.message_id if r.recall_handle is None else r.msg_id,
                    offset=r.queue_offset,
                    recall_handle=r.recall_handle or "",
                )
                for m, r in zip(request.messages, results, strict=True)
            ]

        return rpc.SendMessageResponse(status=OK, entries=await self.call(context, send))

    def _half(self, store: MessageStore, topic: str, queues: int, half: Message, sent_as: str) -> rpc.SendResultEntry:
        """A half message sent: its transaction's id is the half message's, which its committed message keeps. It is
        prepared once for the client's message id `sent_as` (a resend keeps it): sent again, the same transaction."""
        half.queue, half.msg_id = transactions.next_queue(queues), None
        sent = transactions.prepare(store, self.settings, topic, GRPC_PRODUCERS, half, grpc_send_key([sent_as]))
        return rpc.SendResultEntry(status=OK, message_id=sent.msg_id, transaction_id=sent.msg_id)

    @answering(rpc.EndTransactionResponse)
    async def EndTransaction(self, request: rpc.EndTransactionRequest, context: Any) -> rpc.EndTransactionResponse:
        topic = topic_name(request.topic)
        resolution = RESOLUTIONS.get(request.resolution)
        if resolution is None:
            raise Refused(Code.BAD_REQUEST, f"resolution {request.resolution} is not one RocketMQ defines")
        with about(Code.INVALID_TRANSACTION_ID):
            transaction_id = check_transaction_id(request.transaction_id)

        def end() -> None:
            require((acl.topic(topic), Action.PUB))
            transactions.end(self.store(), push_notifier(), topic, transaction_id, resolution, None)

        await self.call(context, end)
        return rpc.EndTransactionResponse(status=OK)

    @answering(rpc.RecallMessageResponse)
    async def RecallMessage(self, request: rpc.RecallMessageRequest, context: Any) -> rpc.RecallMessageResponse:
        topic = topic_name(request.topic)

        def recall() -> str:
            require((acl.topic(topic), Action.PUB))
            return produce.recall(self.store(), topic, request.recall_handle).msg_id

        return rpc.RecallMessageResponse(status=OK, message_id=await self.call(context, recall))

    # ---- consuming -------------------------------------------------------------------------------------------

    async def ReceiveMessage(
        self, request: rpc.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        """Status, then one message a response, then the delivery time; MESSAGE_NOT_FOUND when the poll ended empty."""
        try:
            wait_ms = self._poll_ms(request, context)
            receiving = await self.call(context, lambda: self._receiving(request, wait_ms))
            found = await self._poll(receiving, wait_ms)
        except Exception as error:  # answered with a status (status.py)
            yield rpc.ReceiveMessageResponse(status=status_of(error))
            return
        if not found:
            yield rpc.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield rpc.ReceiveMessageResponse(status=OK)
        for message in found:
            yield rpc.ReceiveMessageResponse(message=message)
        yield rpc.ReceiveMessageResponse(delivery_timestamp=messages.timestamp(time.time_ns() // 1_000_000))

    def _poll_ms(self, request: rpc.ReceiveMessageRequest, context: Any) -> int:
        shortest, longest = self.settings.grpc_min_long_polling_ms, self.settings.grpc_max_long_polling_ms
        remaining_s = context.time_remaining()
        left = None if remaining_s is None else int(remaining_s * 1000) - ANSWER_MARGIN_MS
        wanted = millis(request.long_polling_timeout) if request.HasField("long_polling_timeout") else left
        wait_ms = min(max(longest if wanted is None else wanted, shortest), longest)
        if left is not None and wait_ms > left:
            if left < shortest:
                raise Refused(
                    Code.ILLEGAL_POLLING_TIME,
                    f"the deadline leaves {max(left, 0)} ms to poll; the shortest poll is {shortest} ms",
                )
            wait_ms = left
        return wait_ms

    def _receiving(self, request: rpc.ReceiveMessageRequest, wait_ms: int) -> tuple[pop.Receiving, Callable]:
        """The checked receive, and how each of its deliveries is answered."""
        topic, group = topic_name(request.message_queue.topic), group_name(request.group)
        sub(group, topic)
        expression = request.filter_expression
        with about(Code.ILLEGAL_FILTER_EXPRESSION):  # RocketMQ's FilterType: TAG (the default) or SQL92
            if expression.type == pb.SQL:
                chosen_by = subscription_filter(sql=expression.expression)
            else:
                chosen_by = subscription_filter(tag=expression.expression or None)
        if request.auto_renew:  # a push consumer: the proxy holds each message for a set time (it renews none)
            invisible_ms = self.settings.grpc_push_invisible_ms
        else:
            given = millis(request.invisible_duration) if request.HasField("invisible_duration") else None
            with about(Code.ILLEGAL_INVISIBLE_TIME):
                invisible_ms = pop.invisible_time(self.settings, given)
        if request.batch_size < 1:
            raise InvalidArgument(f"batch_size must be at least 1, got {request.batch_size}")
        store = self.store()
        receiving = pop.receiving(
            store,
            self.settings,
            group,
            topic,
            min(request.batch_size, self.settings.pop_max_messages),
            invisible_ms,
            wait_ms,
            chosen_by,
        )
        topic_type = store.cached_topic(topic).message_type
        namespace = request.message_queue.topic.resource_namespace

        def answer(popped: pop.Popped) -> pb.Message:
            return messages.delivered(popped, invisible_ms, topic_type, namespace, self.broker)

        return receiving, answer

    async def _poll(self, asked: tuple[pop.Receiving, Callable], wait_ms: int) -> list[pb.Message]:
        """Look until a delivery comes or the poll ends, sleeping between looks on the event loop."""
        receiving, answer = asked
        waits = pop.pauses(wait_ms)
        while True:
            found = await self.run(lambda: [answer(popped) for popped in receiving.look()])
            pause = next(waits, None) if not found else None
            if pause is None:
                return found
            await asyncio.sleep(pause)

    @answering(rpc.AckMessageResponse)
    async def AckMessage(self, request: rpc.AckMessageRequest, context: Any) -> rpc.AckMessageResponse:
        topic, group = topic_name(request.topic), group_name(request.group)
        handles = [entry.receipt_handle for entry in request.entries]

        def ack() -> list[str]:
            sub(group, topic)
            return pop.ack(self.store(), self.settings, group, topic, handles)

        outcomes = await self.call(context, ack) if handles else []
        entries = [
            rpc.AckMessageResultEntry(
                message_id=entry.message_id,
                receipt_handle=entry.receipt_handle,
                status=status(ACK_CODES[outcome], outcome),
            )
            for entry, outcome in zip(request.entries, outcomes, strict=True)
        ]
        codes = {entry.status.code for entry in entries}
        overall = OK if codes <= {Code.OK} else entries[0].status if len(codes) == 1 else status(Code.MULTIPLE_RESULTS)
        return rpc.AckMessageResponse(status=overall, entries=entries)

    @answering(rpc.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: rpc.ChangeInvisibleDurationRequest, context: Any
    ) -> rpc.ChangeInvisibleDurationResponse:
        topic, group = topic_name(request.topic), group_name(request.group)
        invisible_ms = millis(request.invisible_duration)

        def change() -> pop.Held:
            sub(group, topic)
            with about(Code.ILLEGAL_INVISIBLE_TIME):
                return pop.change_invisible(
                    self.store(), self.settings, group, topic, request.receipt_handle, invisible_ms, shortest_ms=1
                )

        held = await self.call(context, change)
        return rpc.ChangeInvisibleDurationResponse(status=OK, receipt_handle=held.receipt_handle)

    @answering(rpc.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(
        self, request: rpc.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        topic, group = topic_name(request.topic), group_name(request.group)

        def forward() -> None:
            sub(group, topic)
            pop.forward_to_dead_letters(self.store(), self.settings, group, topic, request.receipt_handle)

        await self.call(context, forward)
        return rpc.ForwardMessageToDeadLetterQueueResponse(status=OK)

    def _store_or_none(self) -> MessageStore | None:
        """The store this call is served from (a stream's producers are checked there: checks.py), if it can be had."""
        try:
            return self.store()
        except Exception:  # refused at once to what the client asks; a stream without a store hands out no checks
            return None

    def _broker(self, endpoints: pb.Endpoints) -> pb.Broker:
        return routes.broker(self.broker, routes.endpoints_of(endpoints, *self.address))


def _as(who: Caller, work: Callable[[], R]) -> R:
    with calling_as(who):
        return work()


def _metadata(context: Any) -> Mapping[str, str]:
    return {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}
