"""Metadata at scale: create N topics, report the create rate as the count grows.

Embedded (RIP-66, RocksDB metadata): prints one JSON line per milestone ({"bench": "topics", "topics": M,
"creates_per_s": ...}, the rate over the last max(1000, M/10) creates before M), then
{"bench": "topics_reopen", ...} with the time to reopen the store and to page through every topic, and
{"bench": "topics_summary", ...} with the ratio of the rate at N to the rate at 1k (target: at most 1.5x
slower).

Serverless (`--backend serverless`, DynamoDB on a moto server over HTTP): at each milestone M the table is
first filled to M - 500 topics with BatchWriteItem (25 a request: a fixture, so a million takes minutes, not
hours), then 500 real `create_topic` and 500 `get_topic` calls are timed and their DynamoDB requests
counted: {"bench": "topics", "backend": "serverless", "topics": M, "creates_per_s", "gets_per_s",
"requests_per_create", "requests_per_get", "requests_per_list_page" (up to 100k: see MOTO_QUERY_LIMIT)}, then
{"bench": "topics_summary", ...} with the slowdown of creates and gets from 1k to N.

    python bench/topics.py                 # 1,000,000 topics, embedded
    python bench/topics.py -n 100000
    python bench/topics.py --backend serverless
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from tidemq_store import StoreConfig, TopicConfig, open_store


def milestones(n: int) -> list[int]:
    marks, mark = [], 1000
    while mark < n:
        marks.append(mark)
        mark *= 10
    return [*marks, n]


SERVERLESS_WINDOW = 500
MOTO_QUERY_LIMIT = 100_000
"""moto answers a Query by walking the whole table (moto/dynamodb/models/table.py, Table.query), so a page of
a million topics takes it longer than a client waits; DynamoDB reads only the page. Pages are counted up to here."""


def serverless(args, host: dict, root: Path) -> None:
    from rich.progress import Progress

    from devtools.moto_server import LocalAws

    with LocalAws() as aws:
        os.environ.update(aws.env)
        store = open_store(StoreConfig(home=root / "store", backend="serverless", dynamodb_prefix="topics"))
        topics = store.tables.topics
        rates: dict[int, tuple[float, float]] = {}
        loaded = 0
        with Progress(transient=True) as progress:
            task = progress.add_task("loading topics", total=args.n)
            for mark in milestones(args.n):
                with topics.batch_write() as writer:  # the fixture: fill to just below the milestone
                    while loaded < mark - SERVERLESS_WINDOW:
                        config = TopicConfig(name=f"topic-{loaded:08d}", queues=8, created_at=1)
                        writer.save(topics("topic", config.name, config=config.model_dump_json()))
                        loaded += 1
                        if loaded % 10_000 == 0:
                            progress.update(task, completed=loaded)
                names = [f"topic-{i:08d}" for i in range(loaded, mark)]
                requests, began = store.requests, time.perf_counter()
                for name in names:
                    store.create_topic(TopicConfig(name=name, queues=8))
                create_s, create_requests = time.perf_counter() - began, store.requests - requests
                requests, began = store.requests, time.perf_counter()
                for name in names:
                    store.get_topic(name)
                get_s, get_requests = time.perf_counter() - began, store.requests - requests
                list_requests = None
                if mark <= MOTO_QUERY_LIMIT:
                    requests = store.requests
                    page = store.list_topics(after=names[0], limit=100)
                    assert [t.name for t in page][:3] == names[1:4]
                    list_requests = store.requests - requests
                loaded = mark
                progress.update(task, completed=loaded)
                rates[mark] = (len(names) / create_s, len(names) / get_s)
                emit(
                    {
                        "bench": "topics",
                        "backend": "serverless",
                        "topics": mark,
                        "creates_per_s": round(rates[mark][0]),
                        "gets_per_s": round(rates[mark][1]),
                        "requests_per_create": create_requests / len(names),
                        "requests_per_get": get_requests / len(names),
                        "requests_per_list_page": list_requests,
                        "window": len(names),
                        "dynamodb": "moto server over HTTP",
                        **host,
                    }
                )
        store.close()
    first = min(rates)
    emit(
        {
            "bench": "topics_summary",
            "backend": "serverless",
            "from_topics": first,
            "to_topics": args.n,
            "create_slowdown": round(rates[first][0] / rates[args.n][0], 3),
            "get_slowdown": round(rates[first][1] / rates[args.n][1], 3),
            **host,
        }
    )


def emit(result: dict) -> None:
    """Print one result as one JSON line."""
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1_000_000, help="topics to create (default 1000000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to put data (default: a temp dir)")
    parser.add_argument("--backend", choices=["embedded", "serverless"], default="embedded")
    args = parser.parse_args()
    host = {"python": platform.python_version(), "cpus": os.cpu_count()}
    root = Path(tempfile.mkdtemp(prefix="tidemq-topics-", dir=args.dir))
    if args.backend == "serverless":
        try:
            serverless(args, host, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    config = StoreConfig(home=root / "store")
    rates: dict[int, float] = {}
    try:
        store = open_store(config)
        created = 0
        for mark in milestones(args.n):
            window = max(1000, mark // 10)
            while created < mark - window:
                store.create_topic(TopicConfig(name=f"topic-{created:08d}", queues=8))
                created += 1
            began = time.perf_counter()
            while created < mark:
                store.create_topic(TopicConfig(name=f"topic-{created:08d}", queues=8))
                created += 1
            rates[mark] = window / (time.perf_counter() - began)
            emit({"bench": "topics", "topics": mark, "creates_per_s": round(rates[mark]), "window": window, **host})
        store.close()
        began = time.perf_counter()
        store = open_store(config)
        reopen_s = time.perf_counter() - began
        began, listed, after = time.perf_counter(), 0, None
        while page := store.list_topics(after=after, limit=1000):
            listed += len(page)
            after = page[-1].name
        list_s = time.perf_counter() - began
        store.close()
        assert listed == args.n, f"listed {listed} of {args.n} topics after reopening"
        emit(
            {
                "bench": "topics_reopen",
                "topics": listed,
                "reopen_s": round(reopen_s, 3),
                "list_all_s": round(list_s, 3),
                **host,
            }
        )
        first = min(rates)
        emit(
            {
                "bench": "topics_summary",
                "from_topics": first,
                "to_topics": args.n,
                "slowdown": round(rates[first] / rates[args.n], 3),
                "target": "<= 1.5",
                **host,
            }
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
