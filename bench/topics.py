"""Metadata at scale (RIP-66): create N topics, report the create rate as the count grows, then reopen.

Prints one JSON line per milestone ({"bench": "topics", "topics": M, "creates_per_s": ...}, the rate
over the last max(1000, M/10) creates before M), then {"bench": "topics_reopen", ...} with the time
to reopen the store and to page through every topic, and {"bench": "topics_summary", ...} with the
ratio of the rate at N to the rate at 1k (target: at most 1.5x slower).

    python bench/topics.py                 # 1,000,000 topics
    python bench/topics.py -n 100000
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1_000_000, help="topics to create (default 1000000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to put data (default: a temp dir)")
    args = parser.parse_args()
    host = {"python": platform.python_version(), "cpus": os.cpu_count()}
    root = Path(tempfile.mkdtemp(prefix="tidemq-topics-", dir=args.dir))
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
            print(json.dumps({"bench": "topics", "topics": mark, "creates_per_s": round(rates[mark]),
                              "window": window, **host}), flush=True)  # fmt: skip
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
        print(json.dumps({"bench": "topics_reopen", "topics": listed, "reopen_s": round(reopen_s, 3),
                          "list_all_s": round(list_s, 3), **host}), flush=True)  # fmt: skip
        first = min(rates)
        print(json.dumps({"bench": "topics_summary", "from_topics": first, "to_topics": args.n,
                          "slowdown": round(rates[first] / rates[args.n], 3), "target": "<= 1.5", **host}),
              flush=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
