"""Schemathesis hooks for TideMQ's API (`SCHEMATHESIS_HOOKS=tests.schemathesis_hooks st run ...`): how to sign a
request, as the credentials this process finds (`tidemq.auth.find_credentials`), how to send a body in the
binary batch encoding, which the document describes by what it holds (the messages of a JSON produce), and the
world outside the API that a generated request assumes:

- a webhook that answers: a subscription is set only once its webhook answers a ping, so every webhook URL a
  request names becomes the test's own receiver (`TIDEMQ_CONTRACT_WEBHOOK`), one valid target for another;
- a signer that keeps its own secret: when a request rotates the secret of the user Schemathesis signs as, the
  hooks sign with the new one from then on, as a client would (deleting itself is refused).

A signature covers the body as sent, which exists only once the request is prepared: the auth provider marks a case
as carrying credentials (Schemathesis then knows them for explicit ones, removes them for its no-auth probes and
negative cases), and `before_call` has each marked request signed as it is prepared (`tests.gateways.RequestsSigner`).
"""

from __future__ import annotations

import os
import re
from typing import Any

import schemathesis
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.gateways import RequestsSigner
from tidemq.auth import find_credentials
from tidemq.credentials import Credentials
from tidemq_protocol import codec
from tidemq_protocol.api.common import SQL_FORMAT, TARGET_PATTERN
from tidemq_protocol.api.messages import ProduceRequest
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import InvalidArgument
from tidemq_protocol.message import Message
from tidemq_protocol.record import MESSAGE_GROUP
from tidemq_protocol.timer import DEFAULT_MAX_DELAY_MS, MAX_DELAY_MS, delivery_properties

CUT_SHORT = b"\x01\x00\x00\x00"
"""A frame that announces a byte and ends: what a request that is not a batch is sent as."""


@schemathesis.serializer(codec.CONTENT_TYPE)
def produce_batch(ctx: Any, value: Any) -> bytes:
    """The messages of a produce request, each one frame of `tidemq_protocol.codec`. A value that is no such request (a
    negative case's) has no encoding: it is sent as a batch cut short, which the server refuses like any other."""
    try:
        request = ProduceRequest.model_validate(value)
        frames = [
            (Message(m.body_bytes(), m.queue, tuple(m.keys), m.tag, properties(m)), m.sharding_key)
            for m in request.messages
        ]
        return codec.encode_produce(frames)
    except (ValidationError, InvalidArgument):
        return CUT_SHORT


def properties(message: Any) -> dict[str, str]:
    """A JSON message's properties as a frame carries them: its message group and its delivery time among them."""
    grouped = {MESSAGE_GROUP: message.message_group} if message.message_group is not None else {}
    return {**message.properties, **grouped, **delivery_properties(message.delivery_time_ms, message.delay_ms)}


def _networks(version: int, bits: int) -> st.SearchStrategy[str]:
    """CIDRs as a policy's `source_ips` take them: an address, a prefix length (host bits allowed)."""
    return st.tuples(st.ip_addresses(v=version), st.integers(0, bits)).map(lambda cidr: f"{cidr[0]}/{cidr[1]}")


# The formats pydantic declares for a policy's source networks, which Schemathesis does not know.
schemathesis.openapi.format("ipv4network", _networks(4, 32))
schemathesis.openapi.format("ipv6network", _networks(6, 128))


PRODUCE = ("POST /v1/topics/{topic}/messages", "POST /v1/topics/{topic}/batch")


def within_the_delay_bound(body: Any) -> Any:
    """A produce's delay messages due within the server's TIDEMQ_TIMER_MAX_DELAY_MS (its default, 3 days) of now: a
    bound relative to the server's clock and settings, which the document states in words (a schema cannot), as a
    client reading it keeps to. Values the schema refuses are left as they are."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return body
    fixed = []
    for message in messages:
        if isinstance(message, dict):
            at, delay = message.get("delivery_time_ms"), message.get("delay_ms")
            if type(at) is int and at > now_ms() + DEFAULT_MAX_DELAY_MS // 2:
                message = {**message, "delivery_time_ms": now_ms() + at % (DEFAULT_MAX_DELAY_MS // 2)}
            if type(delay) is int and DEFAULT_MAX_DELAY_MS < delay <= MAX_DELAY_MS:
                message = {**message, "delay_ms": delay % DEFAULT_MAX_DELAY_MS}
        fixed.append(message)
    return {**body, "messages": fixed}


def _sql92() -> st.SearchStrategy[str]:
    """SQL92 filter expressions (`tidemq_protocol.filter.sql`'s grammar), which the document declares by a format
    of their own: conditions on properties, joined by AND / OR / NOT, a few levels deep."""
    name = st.from_regex(r"[a-z_$][a-z0-9_$]{0,8}", fullmatch=True).filter(lambda n: n.upper() not in _KEYWORDS)
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    string = text.map(lambda value: "'" + value.replace("'", "''") + "'")
    number = st.one_of(st.integers(-(2**63), 2**63 - 1).map(str), st.floats(-1e9, 1e9).map(repr))
    operator = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    conditions = st.one_of(
        st.builds("{} {} {}".format, name, operator, number),
        st.builds("{} = {}".format, name, string),
        st.builds("{} IN ({})".format, name, st.lists(string, min_size=1, max_size=4).map(", ".join)),
        st.builds("{} IS NOT NULL".format, name),
        st.builds("{} CONTAINS {}".format, name, string),
        st.sampled_from(["TRUE", "FALSE"]),
    )
    return st.recursive(
        conditions,
        lambda inner: st.one_of(
            st.builds("({}) AND ({})".format, inner, inner),
            st.builds("({}) OR ({})".format, inner, inner),
            inner.map("NOT ({})".format),
        ),
        max_leaves=6,
    )


_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH"}
schemathesis.openapi.format(SQL_FORMAT, _sql92())


@schemathesis.hook
def filter_query(context: Any, query: Any) -> bool:
    """A read filters by tag or by SQL92 expression, not both: a rule between two query parameters, which OpenAPI
    cannot declare (the server refuses both with a 400; a body's schema says it with `not`)."""
    if not isinstance(query, dict):
        return True
    tag = query.get("tag")
    return query.get("sql") is None or tag is None or (isinstance(tag, str) and tag.strip() in ("", "*"))


@schemathesis.hook
def map_body(context: Any, body: Any) -> Any:
    if context.operation.label in PRODUCE:
        return within_the_delay_bound(body)
    receiver = os.environ.get("TIDEMQ_CONTRACT_WEBHOOK")
    if context.operation.label != "PUT /v1/groups/{group}/push" or not receiver or not isinstance(body, dict):
        return body
    target = body.get("target")
    if isinstance(target, str) and target.lower().startswith("http") and re.match(TARGET_PATTERN, target):
        return {**body, "target": receiver}
    return body


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Sign with the new secret after the signing user's own was rotated (the answer shows it this once)."""
    if context.operation.label != "POST /v1/users/{user}/rotate" or response.status_code != 200:
        return
    rotated = response.json()
    if rotated["name"] == find_credentials().access_key:
        os.environ["TIDEMQ_ACCESS_KEY"], os.environ["TIDEMQ_SECRET_KEY"] = rotated["name"], rotated["secret_key"]


SIGNED_LATER = "Signature=signed-as-sent"
"""How the Authorization a case carries ends until `before_call` signs the request it becomes."""


@schemathesis.auth(refresh_interval=None)
class SignedRequests:
    def get(self, case: Any, context: Any) -> Credentials:
        return find_credentials()

    def set(self, case: Any, credentials: Credentials, context: Any) -> None:
        case.headers = {
            **(case.headers or {}),
            "Authorization": f"TIDEMQ1-HMAC-SHA256 Credential={credentials.access_key}, {SIGNED_LATER}",
        }


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Sign the request a case marked by `SignedRequests` becomes; one whose credentials Schemathesis removed or
    replaced goes as it is."""
    if (case.headers or {}).get("Authorization", "").endswith(SIGNED_LATER):
        kwargs["auth"] = RequestsSigner()
