"""Who a gRPC request is from: RocketMQ 5's signature mapped onto TideMQ's users; what they may do is then asked as
the HTTP API asks it (functions/api/auth.py `require`, over `tidemq_store.acl.decide`).

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>
    x-mq-date-time: 20261127T101500Z

The access key is a TideMQ user's name and the secret key that user's secret (what `tidemq user create` shows once);
the signature is HMAC-SHA1 of the x-mq-date-time value keyed with the secret, in hex of either case (Python sends
lower case, Node upper). The user's record comes from the HTTP API's authenticator, so its cache, its sealed
secrets and the first super user are the same. With TIDEMQ_AUTH=off every request is a super user's (loopback only).

Replays. The Apache proxy never looks at the date, so a header it once accepted works forever. TideMQ refuses a
date that no client could have signed now: more than a day from the server's clock (the window is every time zone's
offset, -12 h .. +14 h, widened by TIDEMQ_AUTH_MAX_SKEW_S), or, within it, further than the allowed skew from a whole
number of quarter hours off (every zone's offset is one). It cannot do more without breaking real clients: the Python
client signs its *local* time labelled Z (so the date alone cannot be held to the server's clock), the signature
covers a one-second date and nothing else (every call a client makes in that second carries the same one, so a
signature seen twice is no replay), and the client id travels unsigned. A captured header is good for a day at most,
and for no other request than one its holder could make anyway; TLS in front of the proxy (a load balancer's
listener in AWS) is what keeps headers from being captured.
"""

from __future__ import annotations

import hmac
import re
from calendar import timegm
from collections.abc import Mapping
from functools import lru_cache
from hashlib import sha1
from time import strptime

from functions.api.auth import ANONYMOUS, Caller, authenticator
from shared.settings import AuthMode, get_settings
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import Unauthenticated

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
CLIENT_ID = "x-mq-client-id"
SIGNED = re.compile(
    r"MQv2-HMAC-SHA1\s+Credential=(?P<key>[^,]*),\s*SignedHeaders=(?P<headers>[^,]*),\s*Signature=(?P<sig>[0-9A-Fa-f]*)"
)
HOUR_MS, QUARTER_MS = 3_600_000, 900_000
ZONES_MS = (-12 * HOUR_MS, 14 * HOUR_MS)
"""The offsets of the world's time zones from UTC: a Python client's local time is one of these away."""


def caller_of(metadata: Mapping[str, str], peer: str) -> Caller:
    """The caller of a request with these headers from `peer` (grpc's `context.peer()`), or Unauthenticated saying
    why not. It may read the user from the store: call it off the event loop."""
    source_ip = peer_address(peer)
    if get_settings().auth is AuthMode.OFF:
        return Caller(ANONYMOUS, source_ip)
    signed = SIGNED.fullmatch(metadata.get(AUTHORIZATION, "").strip())
    if signed is None or not signed["key"]:
        raise Unauthenticated(
            "the request is not signed: give the client credentials (SessionCredentials: a TideMQ user's name as "
            "the access key, its secret as the secret key)"
        )
    if DATE_TIME not in signed["headers"].split(";"):
        raise Unauthenticated(f"the signature must cover {DATE_TIME}")
    date = metadata.get(DATE_TIME, "")
    check_date(date_ms(date))
    user, secret = authenticator().user(signed["key"])  # Unauthenticated if there is no such user
    expected = hmac.new(secret.encode(), date.encode(), sha1).hexdigest()
    if not hmac.compare_digest(expected, signed["sig"].lower()):
        raise Unauthenticated("the signature does not match: check the secret key")
    return Caller(user, source_ip)


@lru_cache(maxsize=256)
def date_ms(date: str) -> int:
    """The instant an x-mq-date-time value writes, as if it were UTC (Unauthenticated if it is no such value).
    Remembered: every request a client signs in one second carries the same value, and `strptime` is most of what
    authenticating a request costs (bench/grpc.py's profile: ~60% of `caller_of`)."""
    try:
        return timegm(strptime(date, "%Y%m%dT%H%M%SZ")) * 1000
    except ValueError:
        raise Unauthenticated(f"{DATE_TIME} must be the signing time as yyyyMMddTHHmmssZ, got {date!r:.40}") from None


def check_date(signed_ms: int) -> None:
    """Unauthenticated if no clock in any time zone could read `signed_ms` now (see the module docstring)."""
    skew = int(get_settings().auth_max_skew_s * 1000)
    offset = signed_ms - now_ms()
    from_quarter = (offset + QUARTER_MS // 2) % QUARTER_MS - QUARTER_MS // 2
    if not ZONES_MS[0] - skew <= offset <= ZONES_MS[1] + skew or abs(from_quarter) > skew:
        raise Unauthenticated(
            f"the request's {DATE_TIME} is no clock's time now (in any time zone, within "
            f"{skew // 1000} s): check the client's clock, and sign each request anew"
        )


def peer_address(peer: str) -> str | None:
    """The address of a grpc peer (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`), None if it has none (a Unix socket)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return None
