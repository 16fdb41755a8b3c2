"""How a TideMQ request is signed: the one module that knows the format (the SDK signs, the API verifies).

A request carries three headers:

    X-TideMQ-Date: <ms since the epoch>
    X-TideMQ-Nonce: <16 to 64 letters, digits, - or _, new for each request>
    Authorization: TIDEMQ1-HMAC-SHA256 Credential=<user name>, Signature=<64 hex digits>

The signature is HMAC-SHA256, keyed with the user's secret, of the canonical request:

    TIDEMQ1-HMAC-SHA256 \\n <date> \\n <nonce> \\n <METHOD> \\n <path> \\n <query> \\n <hex SHA-256 of the body>

- path: the request path, decoded (`%7C` is `|`), then percent-encoded leaving only `A-Z a-z 0-9 - _ . ~ /` as
  they are (the SDK decodes the path it sends; the API gets it decoded in the event's `rawPath`);
- query: every `name=value` pair decoded, then encoded the same way (`/` too), sorted, joined with `&`;
- body: the bytes sent (the SHA-256 of nothing for a request without one).

The secret never travels. The server refuses a date more than `max_skew_s` away from its clock, and a
signature it has already accepted within that window (a replay), so a captured request is good for nothing;
the nonce keeps two identical requests signed in the same millisecond (two threads polling) apart
(AWS SigV4 is the model; its scope and region parts are left out: a TideMQ endpoint is one service).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import NamedTuple
from urllib.parse import parse_qsl, quote

SCHEME = "TIDEMQ1-HMAC-SHA256"
DATE_HEADER = "x-tidemq-date"
NONCE_HEADER = "x-tidemq-nonce"
NONCE_RULE = re.compile(r"[A-Za-z0-9_-]{16,64}")
AUTHORIZATION_HEADER = "authorization"
EMPTY_BODY_SHA256 = hashlib.sha256(b"").hexdigest()
_AUTHORIZATION = re.compile(rf"{SCHEME} Credential=([^,\s]+), Signature=([0-9a-f]{{64}})")


class SignedRequest(NamedTuple):
    """What a request's signature covers."""

    method: str
    path: str  # decoded
    query: str  # the raw query string
    body_sha256: str
    date_ms: int
    nonce: str


class Authorization(NamedTuple):
    user: str
    signature: str


def canonical_path(path: str) -> str:
    return quote(path, safe="/-_.~")


def canonical_query(query: str) -> str:
    pairs = sorted(parse_qsl(query, keep_blank_values=True))
    return "&".join(f"{quote(name, safe='-_.~')}={quote(value, safe='-_.~')}" for name, value in pairs)


def body_sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest() if body else EMPTY_BODY_SHA256


def string_to_sign(request: SignedRequest) -> bytes:
    path, query = canonical_path(request.path), canonical_query(request.query)
    lines = (SCHEME, str(request.date_ms), request.nonce, request.method.upper(), path, query, request.body_sha256)
    return "\n".join(lines).encode()


def signature(secret: str, request: SignedRequest) -> str:
    return hmac.new(secret.encode(), string_to_sign(request), hashlib.sha256).hexdigest()


def headers(user: str, secret: str, request: SignedRequest) -> dict[str, str]:
    """The headers that sign `request` as `user`."""
    return {
        DATE_HEADER: str(request.date_ms),
        NONCE_HEADER: request.nonce,
        AUTHORIZATION_HEADER: f"{SCHEME} Credential={user}, Signature={signature(secret, request)}",
    }


def new_nonce() -> str:
    return secrets.token_urlsafe(18)


def parse_authorization(value: str) -> Authorization | None:
    """The user and signature an Authorization header names, or None if it is not a TideMQ signature."""
    found = _AUTHORIZATION.fullmatch(value.strip())
    return Authorization(found.group(1), found.group(2)) if found else None


def matches(secret: str, request: SignedRequest, claimed: str) -> bool:
    """Whether `claimed` is the signature of `request` with `secret` (compared in constant time)."""
    return hmac.compare_digest(signature(secret, request), claimed)
