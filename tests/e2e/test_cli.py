"""The `tidemq` command line, run as the installed console script against a live local gateway."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from servers.process import free_port
from tidemq import Admin
from tidemq.cli import cli

TIDEMQ = Path(sys.executable).parent / "tidemq"
LINES = 100_000

Run = Callable[..., subprocess.CompletedProcess[str]]


def command(url: str, *args: str | Path) -> list[str]:
    return [str(TIDEMQ), "--url", url, *map(str, args)]


def environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "TIDEMQ_URL"}


@pytest.fixture(scope="module")
def tidemq(gateway) -> Run:
    """Run `tidemq --url <gateway> ARGS...` to completion; stdin from `input`."""

    def run(*args: str | Path, input: str | None = None, url: str = gateway.url) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(url, *args), input=input, capture_output=True, text=True, timeout=60, env=environment()
        )

    return run


@pytest.fixture(scope="module")
def errors_topic(gateway) -> str:
    with Admin(gateway.url) as admin:
        admin.create_topic("cli-errors", queues=2)
    return "cli-errors"


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    return result.stdout


def total_row(table: str) -> list[str]:
    """The cells of a table's `total` row."""
    return next(line.split() for line in table.splitlines() if line.startswith("total"))


@pytest.mark.serverless_long
def test_acceptance_100k_lines_produced_with_two_tags_come_back_once_each_through_a_tag_filtered_group(
    tidemq, gateway, tmp_path
):
    ok(tidemq("topic", "create", "acceptance", "--queues", "4"))
    files = {tag: tmp_path / f"tag-{tag}.txt" for tag in "AB"}
    for tag, first in (("A", 0), ("B", 1)):  # every 2nd line has tag A, the others tag B
        files[tag].write_text(
            "".join(f"{seq:06d} line {seq} of the acceptance run\n" for seq in range(first, LINES, 2))
        )

    # both files at once, so that tag A and tag B messages interleave within the queues
    producers = [
        subprocess.Popen(
            command(
                gateway.url, "produce", "acceptance", "--file", files[tag], "--tag", tag, "--key-prefix", f"{tag}-"
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
        )
        for tag in "AB"
    ]
    for producer in producers:
        stdout, stderr = producer.communicate(timeout=600)  # a hang, not a speed: the serverless run takes ~30 s quiet
        assert (producer.returncode, stderr) == (0, "")
        assert re.fullmatch(r"produced 50000 messages in \d+\.\d\d s \(\d+ msgs/s\)\n", stdout)
    assert total_row(ok(tidemq("topic", "describe", "acceptance"))) == ["total", str(LINES)]

    output = ok(tidemq("consume", "acceptance", "--group", "g", "--tag", "A", "--output", "json"))
    messages = [json.loads(line) for line in output.splitlines()]
    assert {m["tag"] for m in messages} == {"A"}
    sequences = [int(m["body"].split()[0]) for m in messages]
    assert len(sequences) == len(set(sequences)) == LINES // 2  # exactly once each
    assert set(sequences) == set(range(0, LINES, 2))
    for message, seq in zip(messages, sequences, strict=True):
        assert message["body"] == f"{seq:06d} line {seq} of the acceptance run"
        assert message["keys"] == [f"A-{seq // 2 + 1}"]  # --key-prefix: the line's number in its file
        assert message["msg_id"] and message["store_timestamp"] >= message["born_timestamp"] > 0
    offsets = defaultdict(list)
    for message in messages:
        offsets[message["queue"]].append(message["offset"])
    assert set(offsets) == {0, 1, 2, 3}
    assert all(queue == sorted(set(queue)) for queue in offsets.values())  # increasing within each queue

    lag = ok(tidemq("group", "lag", "g", "--topic", "acceptance"))
    assert total_row(lag) == ["total", "0"]  # the B messages the filter skipped are committed too
    assert ok(tidemq("consume", "acceptance", "--group", "g", "--tag", "A")) == ""  # nothing left


def test_produce_reads_stdin_and_consume_prints_raw_bodies_counts_and_picks_queues(tidemq):
    ok(tidemq("topic", "create", "cli-stdin", "--queues", "2"))
    lines = [f"line {i}" for i in range(10)]
    produce = shlex.split("produce cli-stdin --quiet --sharding-key one --property origin=cli --key-prefix k")
    ok(tidemq(*produce, input="\n".join(lines) + "\r\n"))
    assert ok(tidemq("consume", "cli-stdin", "--output", "raw")).splitlines() == lines  # one queue, in order
    assert ok(tidemq("consume", "cli-stdin", "-o", "raw", "--count", "3")).splitlines() == lines[:3]

    found = [json.loads(line) for line in ok(tidemq("message", "by-key", "cli-stdin", "k4")).splitlines()]
    assert [(m["body"], m["properties"]) for m in found] == [("line 3", {"origin": "cli"})]
    by_id = json.loads(ok(tidemq("message", "get", found[0]["msg_id"])))
    assert by_id == found[0]

    queue = found[0]["queue"]
    picked = ok(tidemq("consume", "cli-stdin", "--queue", str(queue), "--offset", "8", "-o", "raw"))
    assert picked.splitlines() == lines[8:]
    assert ok(tidemq("consume", "cli-stdin", "--queue", str(1 - queue))) == ""
    assert ok(tidemq("consume", "cli-stdin", "--from", "latest")) == ""
    assert ok(tidemq("consume", "cli-stdin", "--from", str(int(time.time() * 1000) + 60_000))) == ""


def test_consume_follow_prints_messages_as_they_arrive(tidemq, gateway):
    ok(tidemq("topic", "create", "cli-follow", "--queues", "3"))
    follow = command(gateway.url, "consume", "cli-follow", "--follow", "--output", "raw", "--group", "live")
    follower = subprocess.Popen(follow, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment())
    try:
        for i in range(3):
            ok(tidemq("produce", "cli-follow", "-q", input=f"news {i}\n"))
            assert follower.stdout.readline() == f"news {i}\n"
        deadline = time.monotonic() + 10
        while total_row(ok(tidemq("group", "lag", "live"))) != ["total", "0"]:  # committed as printed
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        follower.terminate()
        follower.wait(timeout=10)


def test_topic_commands_create_list_describe_change_retention_and_delete(tidemq):
    created = ok(tidemq("topic", "create", "cli-topic", "--queues", "3", "--retention", "forever", "--type", "fifo"))
    assert created == "created topic 'cli-topic': 3 queues, retention forever, FIFO\n"
    listed = ok(tidemq("topic", "list"))
    assert re.search(r"^cli-topic\s+3\s+forever\s+FIFO\s", listed, re.MULTILINE)
    described = ok(tidemq("topic", "describe", "cli-topic")).splitlines()
    assert described[0].startswith("topic 'cli-topic': 3 queues, retention forever, FIFO, created ")
    assert [line.split() for line in described[2:5]] == [[str(q), "0", "0", "0"] for q in range(3)]
    assert ok(tidemq("topic", "retention", "cli-topic", "7200000")) == "topic 'cli-topic' now keeps messages 2h\n"
    ok(tidemq("topic", "create", "cli-topic-2", "--retention-ms", "90000"))
    assert "retention 90s" in ok(tidemq("topic", "describe", "cli-topic-2"))
    assert ok(tidemq("topic", "delete", "cli-topic", "--yes")) == "deleted topic 'cli-topic'\n"
    assert tidemq("topic", "describe", "cli-topic").returncode == 1


def test_group_commands_list_lag_reset_and_delete(tidemq):
    ok(tidemq("topic", "create", "cli-groups", "--queues", "2"))
    ok(tidemq("produce", "cli-groups", "-q", "--queue", "1", input="a\nb\nc\n"))
    ok(tidemq("group", "create", "cli-g"))
    assert re.search(r"^cli-g\s", ok(tidemq("group", "list")), re.MULTILINE)
    assert "has committed no offsets yet" in ok(tidemq("group", "lag", "cli-g"))
    ok(tidemq("group", "reset", "cli-g", "--topic", "cli-groups", "--to", "earliest"))
    lag = ok(tidemq("group", "lag", "cli-g", "--topic", "cli-groups"))
    assert re.search(r"^cli-groups\s+1\s+0\s+0\s+3\s+3$", lag, re.MULTILINE) and total_row(lag) == ["total", "3"]
    ok(tidemq("group", "reset", "cli-g", "--topic", "cli-groups", "--to", "latest"))
    assert total_row(ok(tidemq("group", "lag", "cli-g"))) == ["total", "0"]
    ok(tidemq("group", "reset", "cli-g", "--topic", "cli-groups", "--to", "0"))  # a timestamp before everything
    assert total_row(ok(tidemq("group", "lag", "cli-g"))) == ["total", "3"]
    ok(tidemq("group", "delete", "cli-g", "--yes"))
    assert tidemq("group", "lag", "cli-g").returncode == 1


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        (["consume", "no-such-topic"], 1, "topic 'no-such-topic' does not exist"),
        (["produce", "no-such-topic"], 1, "topic 'no-such-topic' does not exist"),
        (["topic", "describe", "no-such-topic"], 1, "topic 'no-such-topic' does not exist"),
        (["group", "lag", "no-such-group"], 1, "consumer group 'no-such-group' does not exist"),
        (["message", "get", "0" * 24], 1, "no message with id 000000000000000000000000"),
        (["topic", "create", "bad name"], 1, "name: topic name 'bad name' has characters outside [A-Za-z0-9_%|-]: ' '"),
        (["consume", "cli-errors", "--tag", "A ||"], 1, "tag filter 'A ||' must be '*' or tags joined by '||'"),
        (["consume", "cli-errors", "--queue", "7"], 1, "queue 7 is out of range for topic 'cli-errors'"),
        (["topic", "create"], 2, "Missing argument 'NAME'. (see 'tidemq topic create --help')"),
        (["topic", "create", "x", "--queues", "0"], 2, "Invalid value for '--queues': 0 is not in the range"),
        (["topic", "create", "x", "--retention-ms", "5000", "--retention", "forever"], 2, "not both"),
        (["consume", "cli-errors", "--from", "yesterday"], 2, "'yesterday' is not 'earliest', 'latest' or a timestamp"),
        (["consume", "cli-errors", "--offset", "3"], 2, "--offset needs --queue"),
        (["produce", "cli-errors", "--file", "/no/such/file"], 2, "'/no/such/file': No such file or directory"),
        (["produce", "cli-errors", "--property", "novalue"], 2, "'novalue' is not NAME=VALUE"),
        (["group", "reset", "g", "--topic", "cli-errors"], 2, "Missing option '--to'."),
        (["topic", "delete", "cli-errors"], 2, "stdin is not a terminal: pass --yes to confirm"),
        (["frobnicate"], 2, "No such command 'frobnicate'."),
        (["--url", "localhost:8080", "topic", "list"], 2, "Invalid value for '--url': 'localhost:8080' is not an http"),
    ],
)
def test_each_error_is_one_line_on_stderr_and_a_non_zero_exit(tidemq, errors_topic, args, code, error):
    result = tidemq(*args, input="")
    assert result.returncode == code
    assert result.stdout == ""
    assert result.stderr.startswith("tidemq: ") and result.stderr.count("\n") == 1, result.stderr
    assert error in result.stderr


@pytest.mark.parametrize("args", [["topic", "list"], ["consume", "t"], ["produce", "t"], ["group", "lag", "g"]])
def test_a_server_that_is_down_is_one_line_not_a_traceback(tidemq, args):
    url = f"http://127.0.0.1:{free_port()}"
    result = tidemq("--retries", "1", *args, input="x\n", url=url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"tidemq: cannot reach {url}: connection refused\n"


def test_every_command_has_help(tidemq):
    assert ok(tidemq("--help")).startswith("Usage: tidemq [OPTIONS] COMMAND [ARGS]...")
    assert ok(tidemq("consume", "--help")).startswith("Usage: tidemq consume [OPTIONS] TOPIC")

    def walk(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
        for name, command in group.commands.items():
            yield f"{path} {name}", command
            if isinstance(command, click.Group):
                yield from walk(command, f"{path} {name}")

    for path, command in walk(cli, "tidemq"):
        assert command.help, f"{path} has no help text"
        assert all(option.help for option in command.params if isinstance(option, click.Option)), path
