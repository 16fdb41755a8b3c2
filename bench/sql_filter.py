"""A SQL92 property filter evaluated by the broker against the same filter evaluated by the client.

Produces N messages (S-byte bodies) to a topic of Q queues, each with properties `region` (r0..r99, in turn),
`amount` (0..999, in turn) and `n` (its number, 0..N-1), then reads the whole topic twice per expression, timing
each:

- broker-side: a `Consumer(sql=...)`, which receives only the messages the expression selects (the broker
  evaluates it on each record's encoded properties and passes over the rest);
- client-side: a `Consumer` with no filter, which receives every message and keeps those the same expression
  (`SqlFilter.accepts`, the same evaluator) selects.

Both must find the same messages. Each expression selects 1% of the messages: `region = 'r7'` (an equality, which
the broker finds with its needles without evaluating the other 99%), `amount < 10` (a range: every record's amount
is read, and evaluated once per distinct value of a read) and `n < N/100` (a range over values that never repeat:
every record is evaluated). Prints one JSON line per expression and run, and one with the
medians per expression ("run": "median"):
  {"bench": "sql_filter", "expression": ..., "messages": N, "selected": ..., "broker_side_s": ...,
   "client_side_s": ..., "filter_vs_client_side": client_side_s / broker_side_s, ...}

    python bench/sql_filter.py                        # 1,000,000 messages, its own gateway (embedded) in a temp dir
    python bench/sql_filter.py -n 100000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from servers.process import running_gateway
from tidemq import Admin, Consumer, Producer
from tidemq_protocol.filter import SqlFilter

TOPIC = "sql-bench"


def expressions(n: int) -> tuple[str, ...]:
    """Three expressions, each selecting 1% of `n` messages (the docstring says how each is evaluated)."""
    return ("region = 'r7'", "amount < 10", f"n < {n // 100}")


def produce(url: str, n: int, size: int, queues: int, batch: int) -> float:
    """N messages, one producer thread per queue; seconds taken."""
    body = b"x" * size

    def producer(queue: int) -> None:
        with Producer(TOPIC, url=url, batch_size=batch) as sender:
            for i in range(queue, n, queues):
                properties = {"region": f"r{i % 100}", "amount": str(i % 1000), "n": str(i)}
                sender.add(body, queue=queue, properties=properties)

    began = time.perf_counter()
    with ThreadPoolExecutor(queues) as pool:
        list(pool.map(producer, range(queues)))
    return time.perf_counter() - began


def drain(consumer: Consumer, keep=None) -> tuple[int, float]:
    """Read every queue to its end: (messages kept, seconds)."""
    kept = 0
    began = time.perf_counter()
    while batch := consumer.poll(max_messages=1000):
        kept += len(batch) if keep is None else sum(1 for message in batch if keep(message))
    return kept, time.perf_counter() - began


def run_once(url: str, expression: str, n: int) -> dict:
    with Consumer(TOPIC, sql=expression, url=url) as broker_side:
        selected, broker_s = drain(broker_side)
    sql = SqlFilter.parse(expression)
    with Consumer(TOPIC, url=url) as client_side:
        kept, client_s = drain(client_side, sql.accepts)
    assert selected == kept, (expression, selected, kept)
    return {
        "bench": "sql_filter",
        "expression": expression,
        "messages": n,
        "selected": selected,
        "broker_side_s": round(broker_s, 3),
        "client_side_s": round(client_s, 3),
        "broker_side_msgs_per_s": round(n / broker_s),
        "client_side_msgs_per_s": round(n / client_s),
        "filter_vs_client_side": round(client_s / broker_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--messages", type=int, default=1_000_000)
    parser.add_argument("-s", "--size", type=int, default=100, help="body bytes")
    parser.add_argument("-q", "--queues", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000, help="messages per produce request")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    settings = {
        "messages": args.messages,
        "size": args.size,
        "queues": args.queues,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
    }
    with (
        tempfile.TemporaryDirectory(prefix="tidemq-sql-bench-") as home,
        running_gateway(Path(home), TIDEMQ_FLUSH_DISK_TYPE="ASYNC", TIDEMQ_AUTH="off", TIDEMQ_TIER="off") as url,
    ):
        with Admin(url) as admin:
            admin.create_topic(TOPIC, queues=args.queues)
        produce_s = produce(url, args.messages, args.size, args.queues, args.batch)
        print(json.dumps({"bench": "sql_filter_produce", "seconds": round(produce_s, 2), **settings}), flush=True)
        runs: dict[str, list[dict]] = {expression: [] for expression in expressions(args.messages)}
        for run in range(1, args.repeat + 1):
            for expression in runs:
                result = run_once(url, expression, args.messages)
                runs[expression].append(result)
                print(json.dumps({**result, "run": run}), flush=True)
        for expression, results in runs.items():
            median = {
                key: statistics.median(r[key] for r in results)
                for key in ("broker_side_s", "client_side_s", "filter_vs_client_side")
            }
            line = {"bench": "sql_filter", "expression": expression, "run": "median", **median, **settings}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
