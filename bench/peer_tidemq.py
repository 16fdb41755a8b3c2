"""TideMQ as a peer in the broker benchmark of `../shared/bench/peers` (run it with `bench/peers.sh`).

The harness starts the local gateway (`python -m servers.gateway`, what `make run` starts) in its
temp dir with the default flush policy, SYNC: every produce is acknowledged only after its fsync, which none
of the other peers does. The workload, as for every peer:

- produce: batches of B sent one after the other through the SDK's binary batch (`Producer.send_batch`),
  each acknowledged before the next, to a topic of one queue (the harness checks the order of all N);
- consume: the queue from offset 0 in batches of up to 4 MiB, the next request sent while the previous
  batch is decoded (and CRC-checked), as a RocketMQ consumer pulls ahead of its listener;
- latency: single `Producer.send` calls (JSON), each waiting for its acknowledgement;
- e2e (end-to-end latency, as the OpenMessaging Benchmark measures it): the SDK's `Consumer` reads a fresh
  topic on its own connection (a stream where the server offers it, as the gateway does: docs/http-api.md,
  Streaming reads; else long polls) while batches go out on the harness's schedule, several in flight on
  threads (`E2E_SENDERS`), none awaited before the next is due. Before the first send the consumer's stream is
  open and each sender thread has its connection, as the other peers' clients are connected in their setup.
  `TIDEMQ_BENCH_E2E_STREAM=0` makes the consumer long-poll instead (`Consumer(stream=False)`), to compare the two
  on one machine.

Authentication is on, as it is by default: the client signs as the super user the gateway writes to
`<TIDEMQ_HOME>/credentials` on its first start.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bench_peers
from bench_peers import BenchError, E2ERun, Peer, ServerProc, free_port, remaining, stop_task

from tidemq import Admin, Consumer, OutgoingMessage, Producer
from tidemq.client import HttpClient
from tidemq.credentials import read_profile
from tidemq_protocol import codec

CONSUME_MAX_BYTES = 4 * 1024 * 1024
E2E_SENDERS = 8
"""Batches in flight at once in the end-to-end phase: the SDK is synchronous, so each waits on a thread. A batch
due while all are busy waits for one, so that a producer that cannot keep up shows it (`e2e_kept_up`, the send
lag) rather than hiding a queue in the sender."""
E2E_WAIT_MS = 200
E2E_STREAM = os.environ.get("TIDEMQ_BENCH_E2E_STREAM", "1") != "0"


class TideMQPeer(Peer):
    name = "tidemq"
    notes = "local gateway (uvicorn -> API Gateway v2 events -> Lambda handlers), SYNC: fsync before every ack"

    def launch(self, tmp):
        self.port = free_port()
        self.url = f"http://{bench_peers.HOST}:{self.port}"
        self.home = Path(tmp) / "data"
        env = {
            **os.environ,
            "TIDEMQ_HOST": bench_peers.HOST,
            "TIDEMQ_PORT": str(self.port),
            "TIDEMQ_HOME": str(self.home),
            "TIDEMQ_FLUSH_DISK_TYPE": "SYNC",
            "TIDEMQ_GRPC_ENABLED": "false",  # the peers are measured over HTTP; 8081 may be a running make run's
        }
        return [ServerProc("tidemq", [sys.executable, "-m", "servers.gateway"], tmp, env)]

    def versions(self):
        version = importlib.metadata.version("tidemq")
        return {"server": f"tidemq {version} (SYNC)", "client": f"tidemq SDK {version} (http.client)"}

    def new_client(self) -> HttpClient:
        """A client (a connection pool of its own) signing as the gateway's first super user."""
        return HttpClient(self.url, timeout_s=30, credentials=read_profile(self.home / "credentials"))

    async def setup(self):
        self.client = self.new_client()
        with Admin(client=self.client) as admin:
            admin.create_topic("bench", queues=1, retention_ms=None)
            admin.create_topic("lat", queues=1, retention_ms=None)
        self.producer = Producer("bench", client=self.client)

    async def produce(self, payloads, batch, deadline):
        for first in range(0, len(payloads), batch):
            remaining(deadline)
            results = self.producer.send_batch([OutgoingMessage(body) for body in payloads[first : first + batch]])
            if results[-1].offset != first + len(results) - 1:
                raise BenchError(f"batch at {first} stored at offset {results[-1].offset - len(results) + 1}")

    async def consume(self, n, deadline):
        batches: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=2)

        def fetch() -> None:  # pulls ahead: the next request goes out while the caller decodes
            offset = 0
            try:
                while offset < n:
                    remaining(deadline)
                    wanted = {"offset": offset, "max_messages": min(n - offset, 10_000), "max_bytes": CONSUME_MAX_BYTES}
                    data = self.client.request("GET", "/v1/topics/bench/queues/0/batch", params=wanted).content
                    batches.put(data)
                    offset = codec.consume_header(data)[0]
            except BaseException as error:
                batches.put(error)

        puller = threading.Thread(target=fetch, daemon=True)
        puller.start()
        out: list[bytes] = []
        while len(out) < n:
            data = batches.get(timeout=remaining(deadline))
            if isinstance(data, BaseException):
                raise data
            messages = codec.decode_consume(data)[0]
            if not messages:
                raise BenchError(f"consume returned nothing after {len(out)} messages")
            out += [message.body for message in messages]
        puller.join()
        return out

    async def latency(self, payload, count, warmup, deadline):
        latencies = []
        with Producer("lat", client=self.client) as sender:
            for i in range(warmup + count):
                remaining(deadline)
                began = time.perf_counter_ns()
                sender.send(payload)
                if i >= warmup:
                    latencies.append(time.perf_counter_ns() - began)
        return latencies

    async def info(self):
        with Admin(client=self.client) as admin:
            ranges = admin.describe_topic("bench").queue_offsets[0]
        return {"stream_msgs": ranges.max_offset - ranges.min_offset}

    async def e2e(self, payload_size, rate, batch, duration_s, deadline):
        run = E2ERun(payload_size, rate, batch, duration_s, deadline)
        with Admin(client=self.client) as admin:
            admin.create_topic("e2e", queues=1, retention_ms=None)
        consumer_client, sender_client = self.new_client(), self.new_client()

        # subscribed before the first send: from offset 0
        consumer = Consumer("e2e", client=consumer_client, stream=E2E_STREAM)

        async def consume() -> None:
            while not run.finished and time.monotonic() < deadline:
                for message in await asyncio.to_thread(consumer.poll, 1000, E2E_WAIT_MS):
                    run.received(message.body)

        loop = asyncio.get_running_loop()
        senders = ThreadPoolExecutor(E2E_SENDERS, thread_name_prefix="e2e-send")
        producer = Producer("e2e", client=sender_client)
        free_senders = asyncio.Semaphore(E2E_SENDERS)

        def sent(outcome: asyncio.Future) -> None:
            # counted here, not kept: holding every batch's send results (75,000 objects in a 15 s run) made the
            # harness's own garbage collections long enough to show in its latencies
            free_senders.release()
            if outcome.cancelled() or outcome.exception() is not None:
                run.publish_errors += 1

        async def send(payloads: list[bytes]) -> None:  # hands the batch over; its acknowledgement is not awaited
            await free_senders.acquire()
            batch = [OutgoingMessage(body) for body in payloads]
            loop.run_in_executor(senders, producer.send_batch, batch).add_done_callback(sent)

        # ready before the first send, as the other peers' clients are (connected in setup): the consumer's stream
        # open, and each sender thread's keep-alive connection made (the SDK keeps one a thread)
        await asyncio.to_thread(consumer.poll, 1000, 1)
        all_senders = threading.Barrier(E2E_SENDERS)

        def connect() -> None:
            all_senders.wait(30)  # each thread of the pool takes one: none is done before all have started
            sender_client.request("GET", "/health")

        await asyncio.gather(*(loop.run_in_executor(senders, connect) for _ in range(E2E_SENDERS)))
        consuming = asyncio.create_task(consume())
        try:
            await run.send_and_wait(send, watch=[consuming])
            for _ in range(E2E_SENDERS):  # every send answered (each holds a sender until then)
                await free_senders.acquire()
        finally:
            await stop_task(consuming)
            senders.shutdown(wait=True, cancel_futures=True)
            consumer.close()
            consumer_client.close()
            sender_client.close()
        return run.result()

    async def close(self):
        self.client.close()


PEER = TideMQPeer
