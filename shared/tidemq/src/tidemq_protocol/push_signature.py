"""How a webhook push delivery is signed, and how its receiver verifies that it came from TideMQ (as Stripe and
GitHub sign theirs).

Setting a webhook subscription generates a signing secret (`new_signing_secret`), returned once in the answer
to that request and never shown again. Every POST to the webhook then carries

    X-TideMQ-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>

over the exact bytes of the body. A receiver recomputes the HMAC with its copy of the secret over the body it
received, compares in constant time, and refuses a timestamp older than a few minutes (a replayed delivery):
`verify_push_signature`, which the SDK exports as `tidemq.verify_push_signature`. Lambda and Python targets are
not signed (IAM authorizes the one, the other runs in the server's own process).

It lives here because the server signs and the SDK verifies, and the SDK imports no server code.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SIGNATURE_HEADER = "X-TideMQ-Signature"
EVENT_HEADER = "X-TideMQ-Event"
"""`delivery` on a delivery, `ping` on the call made when a subscription is set."""
SCHEME = "v1"
TOLERANCE_S = 300
"""How old a signature `verify_push_signature` accepts by default (clocks drift; replays are refused)."""


class InvalidPushSignature(ValueError):
    """A delivery's signature is missing, malformed, does not match its body, or is too old."""


def new_signing_secret() -> str:
    """A fresh signing secret: 256 random bits, URL-safe text."""
    return secrets.token_urlsafe(32)


def _hmac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def push_signature(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The `X-TideMQ-Signature` value of `body` signed with `secret` at `timestamp` (unix seconds; default now)."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    return f"t={timestamp},{SCHEME}={_hmac(secret, timestamp, body)}"


def verify_push_signature(
    body: bytes, header: str | None, secret: str, *, tolerance_s: float = TOLERANCE_S, now: float | None = None
) -> int:
    """Check that `body` (the raw bytes received, before parsing) was signed with `secret` no more than
    `tolerance_s` ago: `header` is the request's `X-TideMQ-Signature`. Returns the signature's timestamp; raises
    InvalidPushSignature saying what is wrong otherwise."""
    if not header:
        raise InvalidPushSignature(f"no {SIGNATURE_HEADER} header")
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        raise InvalidPushSignature(f"{SIGNATURE_HEADER} has no timestamp t=<unix seconds>") from None
    signatures = fields.get(SCHEME, [])
    if not signatures:
        raise InvalidPushSignature(f"{SIGNATURE_HEADER} has no {SCHEME}= signature")
    expected = _hmac(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, signature) for signature in signatures):
        raise InvalidPushSignature("the signature does not match the body (another secret, or the body was changed)")
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance_s:
        raise InvalidPushSignature(f"the signature is {age:.0f} s old, more than the {tolerance_s:g} s accepted")
    return timestamp
