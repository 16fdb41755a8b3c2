"""Each request's log lines carry its own Lambda context, however many run at once (the local gateway runs them in
threads); work started meanwhile (the push worker's threads) carries none; no event or message body is logged.

The requests run in a child process, so that Powertools' logger writes its JSON lines to a stdout of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REQUESTS = 8

SCENARIO = textwrap.dedent(
    f"""
    import threading

    from functions.observability import instrumented, logger
    from servers.adapter import LocalContext

    everyone_in = threading.Barrier({REQUESTS})  # every request is in flight before any goes on

    def handler(event, context):
        logger.info("handling", extra={{"marker": event["marker"]}})
        everyone_in.wait()
        if event["marker"] == "0":  # as a push worker thread started by a produce
            worker = threading.Thread(target=logger.info, args=("background work",))
            worker.start()
            worker.join()
        everyone_in.wait()
        logger.info("handled", extra={{"marker": event["marker"]}})
        return {{"statusCode": 200, "body": ""}}

    entry = instrumented(handler)
    requests = [
        threading.Thread(
            target=entry,
            args=({{"marker": str(i), "body": f"SECRET-BODY-{{i}}"}}, LocalContext("tidemq-produce", f"request-{{i}}")),
        )
        for i in range({REQUESTS})
    ]
    for request in requests:
        request.start()
    for request in requests:
        request.join()
    logger.info("after every request")
    """
)


def run_requests(**env: str) -> str:
    """What the requests of SCENARIO log (`env`: more variables)."""
    root = Path(__file__).parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(root / part) for part in ("", "layers/store_engine", "shared")),
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        **env,
    }
    done = subprocess.run([sys.executable, "-c", SCENARIO], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_request_logs_its_own_context_and_background_work_none():
    by_message: dict[str, list[dict]] = {}
    for line in map(json.loads, run_requests().splitlines()):
        by_message.setdefault(line["message"], []).append(line)
    for message in ("handling", "handled"):
        assert sorted((line["marker"], line["function_request_id"]) for line in by_message[message]) == [
            (str(i), f"request-{i}") for i in range(REQUESTS)
        ]
        assert {line["function_name"] for line in by_message[message]} == {"tidemq-produce"}
    for message in ("background work", "after every request"):
        (line,) = by_message[message]
        assert "function_request_id" not in line and "function_name" not in line


def test_no_event_and_no_message_body_is_logged_even_when_powertools_is_told_to_log_events():
    output = run_requests(POWERTOOLS_LOGGER_LOG_EVENT="true")
    assert output.count("function_request_id") == 2 * REQUESTS and "SECRET-BODY" not in output
