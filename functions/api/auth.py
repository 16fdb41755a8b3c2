"""Who is calling, and may they: authentication and authorization of every route but `/health` and
`/openapi.json`, the same in Lambda and in the local gateway.

Authentication: a request is signed with the caller's secret (`shared/signing.py` says how). The signature is
checked against the user's secret, opened from the store's sealed copy (functions/logic/users.py); a date more
than `auth_max_skew_s` from this clock, or a signature this process already accepted within that window (a
replay), is refused. Behind API Gateway the identity may come from its authorizer instead: a Lambda authorizer
that returns the context `{"tidemq_user": "<name>"}` (API Gateway alone writes `requestContext`; the CDK app
wires it). A process trusts a user's record (secret and policies) for `auth_cache_ttl_s` after reading it, and
forgets it at once when this process changes the user.

The function's entry point (api/resolver.py) authenticates before the request is resolved at all, so an
unknown caller learns nothing of the route (not even a validation error), and keeps the caller for the request.

Authorization: each route says what it needs (`require`: an action on a topic, a group or the cluster;
`tidemq_store.acl.decide` answers, from the cached record). A failure is a 401 (who are you?) or a 403 (not
allowed), with a body that says why, never what a secret should have been.

With `TIDEMQ_AUTH=off` every request is taken as a super user's (the local gateway refuses that on anything
but a loopback address).
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from functions.logic import trace
from functions.logic.users import KEY_BYTES, SecretBox
from functions.store import process_store
from shared.settings import AuthMode, Settings, get_settings
from tidemq_protocol import signing
from tidemq_protocol.acl import Action, Decision, Resource, UserType
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import AccessDenied, Unauthenticated, UserNotFound
from tidemq_store import MessageStore
from tidemq_store.acl import UserRecord, decide

from .binary import request_bytes

PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})
REPLAY_MEMORY = 200_000  # signatures remembered at most (the oldest go first: they are the nearest to expiring)
ANONYMOUS = UserRecord(name="anonymous", user_type=UserType.SUPER, sealed_secret="-")


@dataclass(frozen=True, slots=True)
class Caller:
    """The user a request was authenticated as, and where it came from."""

    user: UserRecord
    source_ip: str | None


@dataclass(frozen=True, slots=True)
class Call:
    """What authentication reads of a request: what was signed (method, the path sent, the raw query, the body's
    bytes), the signing headers (lower-case names), where it came from, and the user an API Gateway authorizer
    vouched for (None: the signature says who). Made from an API Gateway event (`of_event`) or, by the long-running
    servers' lean dispatch, from the HTTP request itself."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: Callable[[], bytes]  # read only if the signature is checked (an authorizer's call never hashes it)
    source_ip: str | None
    authorized_as: str | None = None

    @classmethod
    def of_event(cls, event: dict[str, Any]) -> Call:
        context = event.get("requestContext") or {}
        http = context.get("http") or {}
        authorized_as = ((context.get("authorizer") or {}).get("lambda") or {}).get("tidemq_user")
        return cls(
            http.get("method", ""),
            http.get("path") or event.get("rawPath", ""),  # the path sent: a container's broker prefix and all
            event.get("rawQueryString", ""),
            event.get("headers") or {},
            lambda: request_bytes(BaseProxyEvent(event)),
            http.get("sourceIp"),
            str(authorized_as) if authorized_as else None,
        )


# ---- the auth key -----------------------------------------------------------------------------------


def load_auth_key(settings: Settings) -> bytes:
    """The key that seals users' secrets: `TIDEMQ_AUTH_KEY`, else `<home>/auth.key` (made, owner-only, on first
    use). In Lambda it must be set: a function's disk is not the store's, and a key made there would be lost."""
    if settings.auth_key is not None:
        try:
            key = base64.b64decode(settings.auth_key.get_secret_value(), validate=True)
        except binascii.Error:
            key = b""
        if len(key) != KEY_BYTES:
            raise RuntimeError(f"TIDEMQ_AUTH_KEY must be the base64 of {KEY_BYTES} random bytes")
        return key
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        raise RuntimeError("TIDEMQ_AUTH_KEY must be set in Lambda (the key sealing users' secrets in the store)")
    path = Path(settings.home) / "auth.key"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as file:
            file.write(base64.b64encode(os.urandom(KEY_BYTES)))
            file.flush()
            os.fsync(file.fileno())
    key = base64.b64decode(path.read_bytes().strip())
    if len(key) != KEY_BYTES:
        raise RuntimeError(f"{path} does not hold the base64 of {KEY_BYTES} bytes")
    return key


_made_for: dict[str, tuple[object, object]] = {}  # what secret_box() and authenticator() made, and for what
_making = threading.Lock()


def secret_box() -> SecretBox:
    """This process's sealer of users' secrets (made again if the settings were read again)."""
    settings = get_settings()
    with _making:
        made = _made_for.get("box")
        if made is None or made[0] is not settings:
            made = _made_for["box"] = (settings, SecretBox(load_auth_key(settings)))
    return made[1]


# ---- authentication -------------------------------------------------------------------------------


class Authenticator:
    """Checks requests' signatures for one store (see the module docstring)."""

    def __init__(self, store: MessageStore, box: SecretBox, max_skew_s: float, cache_ttl_s: float) -> None:
        self.store, self.box = store, box
        self.max_skew_ms, self.cache_ttl_s = int(max_skew_s * 1000), cache_ttl_s
        self._users: dict[str, tuple[float, UserRecord, str]] = {}  # name -> (read at, record, opened secret)
        self._seen: OrderedDict[str, int] = OrderedDict()  # accepted signature -> when it stops being acceptable
        self._lock = threading.Lock()

    def authenticate(self, call: Call) -> Caller:
        """The caller of a request, or Unauthenticated saying why not."""
        if call.authorized_as:
            return Caller(self.user(call.authorized_as)[0], call.source_ip)
        headers = call.headers
        claimed = signing.parse_authorization(headers.get(signing.AUTHORIZATION_HEADER, ""))
        if claimed is None:
            raise Unauthenticated(
                "the request is not signed: send TideMQ credentials (the SDK and CLI read TIDEMQ_ACCESS_KEY and "
                "TIDEMQ_SECRET_KEY, a --profile, or the credentials file make run writes under TIDEMQ_HOME)"
            )
        date_ms = _date_ms(headers.get(signing.DATE_HEADER))
        now = now_ms()
        if abs(now - date_ms) > self.max_skew_ms:
            raise Unauthenticated(
                f"the request's date is {abs(now - date_ms) / 1000:.0f} s from the server's clock; at most "
                f"{self.max_skew_ms / 1000:.0f} s is accepted (check the clock, and sign each attempt anew)"
            )
        nonce = headers.get(signing.NONCE_HEADER, "")
        if not signing.NONCE_RULE.fullmatch(nonce):
            raise Unauthenticated(
                f"the request needs a {signing.NONCE_HEADER} header: 16 to 64 random letters or digits"
            )
        user, secret = self.user(claimed.user)
        request = signing.SignedRequest(
            call.method, call.path, call.query, signing.body_sha256(call.body()), date_ms, nonce
        )
        if not signing.matches(secret, request, claimed.signature):
            raise Unauthenticated("the signature does not match the request (method, path, query, body and date)")
        self._accept_once(claimed.signature, date_ms + self.max_skew_ms)
        return Caller(user, source_ip=call.source_ip)

    def user(self, name: str) -> tuple[UserRecord, str]:
        """The user's record and opened secret, from the cache when fresh; Unauthenticated if there is none."""
        cached = self._users.get(name)
        if cached is not None and time.monotonic() - cached[0] < self.cache_ttl_s:
            return cached[1], cached[2]
        try:
            record = self.store.get_user(name)
        except UserNotFound:
            raise Unauthenticated(f"no user {name!r}") from None
        secret = self.box.open(record.name, record.sealed_secret)
        with self._lock:
            self._users[name] = (time.monotonic(), record, secret)
        return record, secret

    def forget(self, name: str) -> None:
        """Read the user again next time (this process changed it)."""
        with self._lock:
            self._users.pop(name, None)

    def _accept_once(self, signature: str, acceptable_until: int) -> None:
        now = now_ms()
        with self._lock:
            while self._seen and (len(self._seen) >= REPLAY_MEMORY or next(iter(self._seen.values())) < now):
                self._seen.popitem(last=False)
            if signature in self._seen:
                raise Unauthenticated("the request was already received (a replay): sign each request anew")
            self._seen[signature] = acceptable_until


def _date_ms(value: str | None) -> int:
    if not value or not value.isdigit():
        raise Unauthenticated(f"the request needs a {signing.DATE_HEADER} header: its signing time in ms")
    return int(value)


def authenticator() -> Authenticator:
    """This process's authenticator, of its store (a new one if the store was opened again): in a container,
    the container's own, whichever broker a request is for."""
    store, settings, box = process_store(), get_settings(), secret_box()
    with _making:
        made = _made_for.get("authenticator")
        if made is None or made[0] is not store:
            made = (store, Authenticator(store, box, settings.auth_max_skew_s, settings.auth_cache_ttl_s))
            _made_for["authenticator"] = made
    return made[1]


def authenticated(event: dict[str, Any]) -> Caller | None:
    """The caller of a request (None for a public route), or Unauthenticated: what the function's entry point
    asks before resolving the request, so that nothing of it is looked at for an unknown caller."""
    if event.get("rawPath") in PUBLIC_PATHS:
        return None
    return authenticated_call(Call.of_event(event))


def authenticated_call(call: Call) -> Caller:
    """The caller of a request to a route that is not public, or Unauthenticated: what both the functions' entry
    point (through `authenticated`) and the long-running servers' lean dispatch (servers/lean.py) ask."""
    if get_settings().auth is AuthMode.OFF:
        return Caller(ANONYMOUS, call.source_ip)
    return authenticator().authenticate(call)


_current: ContextVar[Caller | None] = ContextVar("tidemq_caller", default=None)


@contextmanager
def calling_as(who: Caller | None) -> Iterator[None]:
    """Make `who` the caller while a request is resolved (each thread and each asyncio copy has its own), and the
    producer its message traces name."""
    token = _current.set(who)
    try:
        if who is None:
            yield
        else:
            with trace.acting_as(who.user.name, who.source_ip):
                yield
    finally:
        _current.reset(token)


# ---- authorization --------------------------------------------------------------------------------


def caller() -> Caller:
    """The current request's caller."""
    who = _current.get()
    if who is None:
        raise Unauthenticated("this route needs a signed request")
    return who


def allowed(resource: Resource, action: Action) -> bool:
    who = caller()
    return decide(who.user, resource, action, who.source_ip) is Decision.ALLOW


def require(*needs: tuple[Resource, Action]) -> None:
    """Raise AccessDenied unless the caller may do each (resource, action)."""
    for resource, action in needs:
        if not allowed(resource, action):
            raise AccessDenied(f"user {caller().user.name!r} may not {action} on {resource}")


def require_any(resource: Resource, *actions: Action) -> None:
    """Raise AccessDenied unless the caller may do one of `actions` on `resource`."""
    if not any(allowed(resource, action) for action in actions):
        wanted = " or ".join(actions)
        raise AccessDenied(f"user {caller().user.name!r} may not {wanted} on {resource}")


def require_super() -> None:
    """Raise AccessDenied unless the caller is a super user (users and policies are theirs to manage)."""
    if caller().user.user_type is not UserType.SUPER:
        raise AccessDenied(f"user {caller().user.name!r} is not a super user: only super users manage users")


def visible(resource: Resource) -> bool:
    """Whether the caller may see `resource` in a listing (List or Get on it)."""
    return allowed(resource, Action.LIST) or allowed(resource, Action.GET)
