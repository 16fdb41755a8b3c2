"""A producer process for the pop SIGKILL test: sends batches of messages over HTTP until a stop file appears, each
batch again and again until a gateway answers it (the gateway is being killed and restarted; a batch sent again
after a lost answer may be stored twice, at least once as the API promises), and writes the bodies of each answered
batch to its file, one a line. `ProducerProcess` runs it for a test.

    python tests/pop_producer.py URL TOPIC OUT STOP
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import subprocess
import sys
import time
from pathlib import Path

from tidemq.client import HttpClient

BATCH = 10
PAUSE_S = 0.05  # between batches: a steady stream the consumers keep up with, not a flood
RECONNECT_S = 0.05


def produce(url: str, topic: str, out: Path, stop: Path) -> None:
    client = HttpClient(url, timeout_s=120, retries=0)
    for start in itertools.count(0, BATCH):
        if stop.exists():
            return
        bodies = [f"p{seq}" for seq in range(start, start + BATCH)]
        batch = {"messages": [{"body": body} for body in bodies]}
        while True:
            try:
                response = client.send("POST", f"/v1/topics/{topic}/messages", json=batch)
            except (OSError, http.client.HTTPException):
                time.sleep(RECONNECT_S)
                continue
            if not response.is_success:
                sys.exit(f"produce answered {response.status_code}: {response.text}")
            break
        with out.open("a") as file:
            file.write("".join(body + "\n" for body in bodies))
        time.sleep(PAUSE_S)


class ProducerProcess:
    """The producer, started at once; its file and log in `directory`."""

    def __init__(self, url: str, topic: str, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.out, self.stop_file, self.log = directory / "produced.txt", directory / "stop", directory / "producer.log"
        with self.log.open("ab") as log:
            command = [sys.executable, __file__, url, topic, str(self.out), str(self.stop_file)]
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def produced(self) -> list[str]:
        """The bodies of every batch answered so far."""
        return self.out.read_text().splitlines() if self.out.exists() else []

    def stop(self) -> list[str]:
        """Stop it (after the batch it is sending is answered) and return the bodies of every batch answered."""
        self.stop_file.touch()
        assert self.process.wait(timeout=300) == 0, self.log.read_text(errors="replace")[-3000:]
        return self.produced()

    def __enter__(self) -> ProducerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("url", "topic", "out", "stop"):
        parser.add_argument(name)
    args = parser.parse_args()
    produce(args.url, args.topic, Path(args.out), Path(args.stop))
