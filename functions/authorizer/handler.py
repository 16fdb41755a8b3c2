"""Authorizer function: the HTTP API's Lambda authorizer (payload 2.0, simple responses) on every route but the
public ones (`functions.api.auth.PUBLIC_PATHS`), wired by infra_cdk/api.py.

It refuses, before any function runs, a request that does not carry a TideMQ signature (shared/signing.py) of a
known user, with a date within `auth_max_skew_s` and a well-formed nonce; a request without a body (no
Content-Length, or 0, and no Transfer-Encoding) must also match its signature. It never vouches for the caller
(no `tidemq_user` in its context): API Gateway gives an authorizer no body, and caches its answers by the
signature headers alone (infra_cdk: identity sources), so a cached "yes" may meet another path or body. The
function behind it verifies the whole signature and refuses replays (functions/api/auth.py), as it would
without an authorizer. What it reads is cached as the functions cache it: users' records for `auth_cache_ttl_s`.
"""

from __future__ import annotations

from typing import Any

from functions.api.auth import PUBLIC_PATHS, authenticator
from functions.observability import instrumented, logger
from tidemq_protocol import signing
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import ClientError


def refusal(event: dict[str, Any]) -> str | None:
    """Why the request may not reach its function, or None."""
    headers = event.get("headers") or {}
    claimed = signing.parse_authorization(headers.get(signing.AUTHORIZATION_HEADER, ""))
    if claimed is None:
        return "not signed"
    date = headers.get(signing.DATE_HEADER, "")
    if not date.isdigit():
        return "no signing date"
    checker = authenticator()
    if abs(now_ms() - int(date)) > checker.max_skew_ms:
        return "signing date out of the allowed skew"
    nonce = headers.get(signing.NONCE_HEADER, "")
    if not signing.NONCE_RULE.fullmatch(nonce):
        return "no valid nonce"
    _, secret = checker.user(claimed.user)  # Unauthenticated if there is no such user
    bodiless = "transfer-encoding" not in headers and headers.get("content-length", "0") == "0"
    if bodiless:
        method = ((event.get("requestContext") or {}).get("http") or {}).get("method", "")
        request = signing.SignedRequest(
            method,
            event.get("rawPath", ""),
            event.get("rawQueryString", ""),
            signing.EMPTY_BODY_SHA256,
            int(date),
            nonce,
        )
        if not signing.matches(secret, request, claimed.signature):
            return "signature does not match"
    return None


def authorize(event: dict[str, Any], context: Any) -> dict[str, bool]:
    if event.get("rawPath") in PUBLIC_PATHS:
        return {"isAuthorized": True}
    try:
        why = refusal(event)
    except ClientError as error:  # Unauthenticated: no such user
        why = str(error)
    if why is not None:
        logger.info("request refused before its function", extra={"reason": why, "route": event.get("routeKey")})
    return {"isAuthorized": why is None}


lambda_handler = instrumented(authorize, count="AuthorizerCalls")
