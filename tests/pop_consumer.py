"""A pop consumer process for the stress tests: receives a topic over HTTP until a stop file appears, acks what it
receives (all but those it lets time out on purpose), and writes one record of each delivery (tests/pop_deliveries.py)
to its file once it is settled. `ConsumerProcesses` runs a few of them for a test.

    python -m tests.pop_consumer URL TOPIC GROUP NUMBER OUT STOP [--time-out-one-in 10] [--through-restarts] ...

It signs as the credentials the environment names (TIDEMQ_CREDENTIALS_FILE). A 503 (a dependency or the gateway busy:
the moto server under a loaded machine can take longer than the store waits) is sent again after its Retry-After, as
the docs tell clients to. Without `--through-restarts`, any other answer but a 2xx ends it with the error (the test
fails); with it, a request that gets no answer is sent again until
one comes (the gateway is being killed and restarted), except an ack that no attempt could even connect for: nothing
was sent, so its messages are `abandoned` (held at a crash: they must come back once their invisible time ends). An
ack goes on a new connection, so that one to a gateway killed meanwhile is refused (not sent), not cut (maybe sent).
"""

from __future__ import annotations

import argparse
import http.client
import random
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from tests.pop_deliveries import Delivery, append, now_ms, read
from tidemq.client import HttpClient, Response, retry_after_s
from tidemq_protocol.api.pop import AckResponse, ReceivedMessage, ReceiveResponse

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root, where the consumer runs (`python -m tests.pop_consumer`)."""
RECONNECT_S = 0.05
NO_ANSWER = (OSError, http.client.HTTPException)


class Unsent(Exception):
    """No attempt of a request reached a server: it was never sent."""


class PopConsumer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.client = HttpClient(args.url, timeout_s=120, retries=0)
        self.path = f"/v1/groups/{args.group}/topics/{args.topic}"
        self.rng = random.Random(args.number)

    def post(self, route: str, body: dict, abandon_unsent: bool = False) -> tuple[Response, int]:
        """POST until answered (one try without --through-restarts; a 503 again after its Retry-After): the answer
        and how many tries it took; any other answer but a 2xx ends the process."""
        tries, reached = 0, False
        while True:
            tries += 1
            try:
                response = self.client.send("POST", f"{self.path}/{route}", json=body)
            except ConnectionRefusedError:
                if not self.args.through_restarts:
                    raise
                if abandon_unsent and not reached:
                    raise Unsent() from None
            except NO_ANSWER:
                if not self.args.through_restarts:
                    raise
                reached = True  # it may have been applied, its answer lost: only an answer settles it
            else:
                if response.status_code == 503:
                    time.sleep(max(RECONNECT_S, retry_after_s(response.headers)))
                    continue
                if not response.is_success:
                    sys.exit(f"consumer {self.args.number}: {route} answered {response.status_code}: {response.text}")
                return response, tries
            time.sleep(RECONNECT_S)

    def times_out(self, message: ReceivedMessage) -> bool:
        """Whether to leave this delivery unacked: one in `--time-out-one-in` by its message and attempt."""
        every = self.args.time_out_one_in
        return bool(every) and zlib.crc32(f"{message.msg_id}:{message.attempt}".encode()) % every == 0

    def record(
        self, message: ReceivedMessage, received_ms: int, ack: str, acked_ms: int | None = None, tries: int = 0
    ) -> Delivery:
        return Delivery.of(self.args.number, message, received_ms, ack, acked_ms, tries)

    def run(self) -> None:
        out, stop = Path(self.args.out), Path(self.args.stop)
        receive = {"max_messages": 32, "wait_ms": self.args.wait_ms, "invisible_ms": self.args.invisible_ms}
        while not stop.exists():
            response, _ = self.post("receive", receive)
            received_ms = now_ms()
            kept = []
            for message in ReceiveResponse.model_validate_json(response.content).messages:
                if self.times_out(message):
                    append(out, [self.record(message, received_ms, "timed_out")])
                else:
                    kept.append(message)
            if not kept:
                continue
            if self.args.hold_ms:  # "processing": the consumer holds its messages a while
                time.sleep(self.rng.uniform(0, self.args.hold_ms) / 1000)
            append(out, self.settle(kept, received_ms))

    def settle(self, kept: list[ReceivedMessage], received_ms: int) -> list[Delivery]:
        handles = {"receipt_handles": [message.receipt_handle for message in kept]}
        if self.args.through_restarts:
            self.client.close()  # a new connection: refused if the gateway is down, so surely not sent
        try:
            response, tries = self.post("ack", handles, abandon_unsent=True)
        except Unsent:
            return [self.record(message, received_ms, "abandoned") for message in kept]
        acked_ms = now_ms()
        results = AckResponse.model_validate_json(response.content).results
        return [
            self.record(message, received_ms, result.status, acked_ms, tries)
            for message, result in zip(kept, results, strict=True)
        ]


class ConsumerProcesses:
    """`count` consumer processes of `topic` for `group`, started at once (`options`: this script's options), their
    files in `directory`."""

    def __init__(self, url: str, topic: str, group: str, directory: Path, count: int, *options: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.stop_file = directory / "stop"
        self.files = [directory / f"consumer-{number}.jsonl" for number in range(count)]
        self.processes = []
        for number, out in enumerate(self.files):
            arguments = [url, topic, group, str(number), str(out), str(self.stop_file), *options]
            with (directory / f"consumer-{number}.log").open("ab") as log:
                command = [sys.executable, "-m", "tests.pop_consumer", *arguments]
                self.processes.append(subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))

    def deliveries(self) -> list[Delivery]:
        """Every delivery the consumers have recorded so far."""
        return read(self.files)

    def wait_until(self, done: Callable[[list[Delivery]], bool], timeout_s: float, what: str) -> None:
        """Return once `done(deliveries so far)`; fail if a consumer ends first or `timeout_s` passes (a deadline
        for a machine however busy, not a timing)."""
        deadline = time.monotonic() + timeout_s
        while not done(self.deliveries()):
            self.assert_running()
            assert time.monotonic() < deadline, f"not {what} after {timeout_s} s"
            time.sleep(0.5)

    def assert_running(self) -> None:
        for number, process in enumerate(self.processes):
            assert process.poll() is None, f"consumer {number} ended: {self.log(number)}"

    def log(self, number: int) -> str:
        return (self.files[number].parent / f"consumer-{number}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> list[Delivery]:
        """Stop them (each ends after its current batch) and return every delivery they recorded."""
        self.stop_file.touch()
        for number, process in enumerate(self.processes):
            assert process.wait(timeout=300) == 0, f"consumer {number} failed: {self.log(number)}"
        return self.deliveries()

    def __enter__(self) -> ConsumerProcesses:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """End any still running (a test that failed)."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("url", "topic", "group"):
        parser.add_argument(name)
    parser.add_argument("number", type=int, help="this consumer's number, in its records")
    parser.add_argument("out", help="the file its deliveries are written to")
    parser.add_argument("stop", help="it stops once this file exists")
    parser.add_argument("--invisible-ms", type=int, required=True)
    parser.add_argument("--wait-ms", type=int, default=1000)
    parser.add_argument("--time-out-one-in", type=int, default=0, help="leave 1 delivery in N unacked (0: none)")
    parser.add_argument("--hold-ms", type=int, default=0, help="hold each batch up to this long before its ack")
    parser.add_argument("--through-restarts", action="store_true")
    PopConsumer(parser.parse_args()).run()


if __name__ == "__main__":
    main()
