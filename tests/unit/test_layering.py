"""The engine's seams hold: the cold tier touches no private name of another module (import-linter, run by
`make test`, checks which packages import which; this checks what it cannot)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import tidemq_store.tiered

TIERED = Path(tidemq_store.tiered.__file__).parent
NAMED_TUPLE_API = {"_make", "_replace", "_asdict", "_fields"}  # public, underscored so as not to clash with fields


def private_names_used(path: Path) -> list[str]:
    """`obj._name` on anything but self/cls, and `from x import _name`, in one module."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr not in NAMED_TUPLE_API:
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in ("self", "cls") and not node.attr.startswith("__"):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_no_module_of_the_tier_touches_a_private_name_of_another_module():
    modules = sorted(TIERED.glob("*.py"))
    assert len(modules) >= 6
    assert [use for module in modules for use in private_names_used(module)] == []


def test_the_check_would_catch_a_reach_into_the_hot_stores_internals(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(hot):\n    return hot._max_offset('t', 0), hot.cq._db\nfrom x import _private\n")
    assert sorted(private_names_used(bad)) == ["bad.py:2: ._db", "bad.py:2: ._max_offset", "bad.py:3: import _private"]


PROBE_404 = """
import json, sys
from functions.produce.handler import lambda_handler
from servers.adapter import LocalContext
event = {
    "version": "2.0", "routeKey": "$default", "rawPath": "/v1/no/such/path", "rawQueryString": "", "headers": {},
    "requestContext": {"http": {"method": "GET", "path": "/v1/no/such/path", "sourceIp": "127.0.0.1"},
                       "requestId": "probe", "stage": "$default"},
    "isBase64Encoded": False,
}
response = lambda_handler(event, LocalContext("tidemq-produce"))
loaded = sorted(name for name in sys.modules if name.startswith("functions.") and name.endswith(".handler"))
print(json.dumps({"status": response["statusCode"], "handlers": loaded}))
"""


def test_a_404_inside_one_function_imports_no_other_handler(tmp_path):
    """A function answers a path it has no route for from its own routes: it does not import the whole API."""
    env = {**os.environ, "TIDEMQ_HOME": str(tmp_path), "TIDEMQ_AUTH": "off", "POWERTOOLS_METRICS_DISABLED": "true"}
    ran = subprocess.run([sys.executable, "-c", PROBE_404], env=env, capture_output=True, text=True, check=True)
    assert json.loads(ran.stdout.splitlines()[-1]) == {"status": 404, "handlers": ["functions.produce.handler"]}


PROBE_POSIX_TIER = """
import json, sys
from tidemq_store import Message, StoreConfig, TopicConfig, open_store
home = sys.argv[1]
config = StoreConfig(home=f"{home}/home", tier="posix", tier_path=f"{home}/tier", tier_level="FORCE")
with open_store(config) as store:
    store.create_topic(TopicConfig(name="t", queues=1))
    store.put("t", [Message(b"cold")])
    uploaded = store.upload_now("t")
    read = [message.body.decode() for message in store.get("t", 0, 0).messages]
aws = sorted(name for name in sys.modules if name.partition(".")[0] in ("boto3", "botocore", "s3transfer"))
print(json.dumps({"uploaded": uploaded, "read": read, "aws_sdk": aws}))
"""


def test_a_posix_tier_never_imports_the_aws_sdk(tmp_path):
    """A tier on a directory opens, uploads and reads cold without boto3 or botocore (only the S3 driver needs them)."""
    ran = subprocess.run(
        [sys.executable, "-c", PROBE_POSIX_TIER, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert json.loads(ran.stdout.splitlines()[-1]) == {"uploaded": 1, "read": ["cold"], "aws_sdk": []}
