"""Single-send latency by HTTP client, through a local gateway of its own (SYNC, authentication on).

Each round sends `--count` signed single-message record batches with each transport, one after the other on
one keep-alive connection, and prints one JSON line per transport with the median of each round (the first
50 sends of a round are warm-up):

    .venv/bin/python bench/transport.py                 # 400 sends x 3 rounds
    .venv/bin/python bench/transport.py --count 2000 --rounds 5

The SDK's transport (`tidemq.client`) was chosen with it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import urllib3

from servers.process import running_gateway
from tidemq import Admin, HttpClient
from tidemq.auth import signature_headers
from tidemq.credentials import read_profile
from tidemq_protocol import codec
from tidemq_protocol.message import Message

PATH = "/v1/topics/lat/batch"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=400, help="sends per transport per round (default 400)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--size", type=int, default=1024, help="message bytes (default 1024)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tidemq-transport-"))
    with running_gateway(home) as url:
        credentials = read_profile(home / "credentials")
        Admin(client=HttpClient(url, credentials=credentials)).create_topic("lat", queues=1)
        address = urlsplit(url)
        with_httpx = httpx.Client(base_url=url)
        pool = urllib3.HTTPConnectionPool(address.hostname, address.port, maxsize=1)
        connection = http.client.HTTPConnection(address.hostname, address.port)

        def via_http_client(body: bytes, headers: dict) -> int:
            connection.request("POST", PATH, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status

        transports = {
            "httpx": lambda body, headers: with_httpx.post(PATH, content=body, headers=headers).status_code,
            "urllib3": lambda body, headers: pool.urlopen("POST", PATH, body=body, headers=headers).status,
            "http.client": via_http_client,
        }
        medians: dict[str, list[float]] = {name: [] for name in transports}
        for _ in range(args.rounds):
            for name, send in transports.items():
                times = []
                for _ in range(args.count):
                    began = time.perf_counter()
                    body = codec.encode_records("lat", [Message(b"x" * args.size, 0)])
                    headers = {"content-type": codec.RECORDS_CONTENT_TYPE}
                    headers |= signature_headers(credentials, "POST", PATH, body)
                    status = send(body, headers)
                    times.append(time.perf_counter() - began)
                    assert status == 200, f"{name}: HTTP {status}"
                medians[name].append(round(statistics.median(times[50:]) * 1000, 3))
    host = {"python": platform.python_version()}
    for name, rounds in medians.items():
        print(json.dumps({"bench": "transport", "transport": name, "send_p50_ms_by_round": rounds, **host}))


if __name__ == "__main__":
    main()
