"""The web console's pages at scale: server time per page with many topics and groups, and the message browser's
bounded scan.

Seeds an embedded store (through the store and the logic, as fast as they go): `--topics` topics (10,000) and
`--groups` groups (1,000), each group with committed offsets on one topic, a browsed topic of `--messages` messages
(30,000 in one queue, tagged so a filter selects few), dead letters of one group, and a sample of the overview's
series (its time printed too: the maintenance schedule's job, never a page's). Then requests every page `--repeat`
times through the console function's Lambda entry point, logged in as the super user, and prints one JSON line per
page: {"bench": "console", "page": ..., "page_server_ms_p50", "page_server_ms_p95", ...}; then a line showing the
browser's scan stopping at its bound ({"bench": "console_scan", "scanned", "queue_size", "bound",
"stopped_at_bound"}). Target: every page's p95 <= 300 ms.

    python bench/console.py
    python bench/console.py --topics 100 --groups 10 --messages 500 --repeat 3 --scan-limit 200   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--scan-limit", type=int, default=10_000)
    return parser.parse_args()


def event(path: str, query: str = "", cookie: str = "") -> dict:
    """A GET of a console page as API Gateway sends it."""
    route = "GET /console" if path == "/console" else "GET /console/{proxy+}"
    return {
        "version": "2.0",
        "routeKey": route,
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"host": "bench", "cookie": cookie},
        "requestContext": {"apiId": "bench", "http": {"method": "GET", "path": path, "sourceIp": "127.0.0.1"}},
        "isBase64Encoded": False,
    }


def seed(args: argparse.Namespace) -> dict:
    """The store's contents; what the pages are asked about."""
    from functions.api.auth import secret_box
    from functions.logic import users
    from functions.logic.push import dead_letter
    from functions.store import get_store
    from tidemq_protocol.acl import UserType
    from tidemq_protocol.api.users import UserSpec
    from tidemq_protocol.message import Message
    from tidemq_store import GroupConfig, TopicConfig

    store = get_store()
    started = time.perf_counter()
    for n in range(args.topics):
        store.create_topic(TopicConfig(name=f"topic-{n:06d}", queues=4))
    for n in range(args.groups):
        store.create_group(GroupConfig(name=f"group-{n:05d}"))
        store.commit_offsets(f"group-{n:05d}", f"topic-{n % args.topics:06d}", {0: 0})
    store.create_topic(TopicConfig(name="browsed", queues=1))
    batch = 1000
    for start in range(0, args.messages, batch):
        messages = [
            Message(json.dumps({"n": n}).encode(), keys=(f"key-{n % 100}",), tag="rare" if n % 5000 == 4999 else "bulk")
            for n in range(start, min(args.messages, start + batch))
        ]
        store.put("browsed", messages)
    store.commit_offsets("group-00000", "browsed", {0: args.messages // 2})
    letters = store.get("browsed", 0, 0, 20).messages
    dead_letter(store, "group-00000", letters, 16, "bench")
    users.create_user(store, secret_box(), UserSpec(name="bench-admin", user_type=UserType.SUPER))
    seconds = time.perf_counter() - started
    first = store.get("browsed", 0, 0, 1).messages[0]
    return {"seed_s": round(seconds, 1), "msg_id": first.msg_id}


def main() -> None:
    args = parse()
    home = Path(tempfile.mkdtemp(prefix="tidemq-console-bench-"))
    os.environ.update(
        TIDEMQ_HOME=str(home),
        TIDEMQ_CONSOLE_SCAN_LIMIT=str(args.scan_limit),
        POWERTOOLS_METRICS_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="ERROR",  # the dead letters the seed makes are logged as warnings: not bench lines
        TIDEMQ_GRPC_ENABLED="false",
    )
    from functions.console import handler
    from functions.console.session import COOKIE
    from functions.logic import console_series
    from functions.store import get_store
    from servers.adapter import LocalContext

    seeded = seed(args)
    started = time.perf_counter()
    console_series.record_sample(get_store())
    console_series.record_sample(get_store())
    sample_ms = (time.perf_counter() - started) * 1000 / 2
    settings = {"topics": args.topics, "groups": args.groups, "messages": args.messages, "repeat": args.repeat}
    print(json.dumps({"bench": "console_seed", **settings, **seeded, "series_sample_ms": round(sample_ms, 1)}))
    session = handler.sessions().start("bench-admin")
    cookie = f"{COOKIE}={handler.sessions().cookie(session, False).split(';')[0].split('=', 1)[1]}"
    middle = f"topic-{args.topics // 2:06d}"
    pages = {
        "overview": ("/console", ""),
        "overview_series": ("/console/overview/series.json", ""),
        "topics": ("/console/topics", ""),
        "topics_page_2": ("/console/topics", f"after={middle}"),
        "topics_prefix": ("/console/topics", f"prefix=topic-00{args.topics // 200 % 10}"),
        "topic": ("/console/topic", f"name={middle}"),
        "groups": ("/console/groups", ""),
        "group": ("/console/group", "name=group-00000"),
        "messages_offset": ("/console/messages", "topic=browsed&queue=0&offset=0"),
        "messages_tag_filter": ("/console/messages", "topic=browsed&queue=0&tag=rare"),
        "messages_sql_filter": ("/console/messages", "topic=browsed&queue=0&sql=TAGS%20%3D%20%27rare%27"),
        "messages_key": ("/console/messages", "topic=browsed&key=key-7"),
        "messages_id": ("/console/messages", f"id={seeded['msg_id']}"),
        "message": ("/console/message", f"id={seeded['msg_id']}&view=hex"),
        "trace": ("/console/trace", f"id={seeded['msg_id']}"),
        "messages_export": ("/console/messages/export", "topic=browsed&queue=0&format=csv"),
        "dead_letters": ("/console/dead-letters", "group=group-00000"),
        "users": ("/console/users", ""),
        "health": ("/console/health", ""),
        "container": ("/console/container", ""),
    }
    context = LocalContext("tidemq-console")
    for page, (path, query) in pages.items():
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            answer = handler.lambda_handler(event(path, query, cookie), context)
            times.append((time.perf_counter() - started) * 1000)
            if answer["statusCode"] != 200:
                raise SystemExit(f"{page}: {answer['statusCode']} {answer['body'][-500:]}")
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        line = {"bench": "console", "page": page, **settings, "page_server_ms_p50": round(statistics.median(times), 1)}
        print(json.dumps({**line, "page_server_ms_p95": round(p95, 1), "bytes": len(answer["body"])}), flush=True)
    scan_probe(args)


def scan_probe(args: argparse.Namespace) -> None:
    """The browser's scan of the whole browsed queue with a filter nothing matches: it stops at its bound."""
    from functions.logic.browse import scan_queue
    from functions.store import get_store
    from tidemq_protocol.filter import subscription_filter

    started = time.perf_counter()
    scan = scan_queue(get_store(), "browsed", 0, 0, subscription_filter("absent"), 50, args.scan_limit)
    line = {
        "bench": "console_scan",
        "scanned": scan.scanned,
        "queue_size": scan.queue_size,
        "bound": scan.bound,
        "found": len(scan.messages),
        "stopped_at_bound": scan.stopped_at_bound,
        "continue_from": scan.next_offset,
        "scan_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
