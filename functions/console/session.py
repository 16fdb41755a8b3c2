"""Console sessions: who a browser is logged in as, and the CSRF token its changes carry.

A login (access key and secret, checked against the same user store the HTTP API's signatures are checked against)
makes a session: a random id recorded in the store (KV namespace `tidemq-console`, key `session/<id>`, expiring
with the session), and a cookie holding the id and the user's name, signed (itsdangerous, HMAC-SHA256 under
`TIDEMQ_CONSOLE_SESSION_KEY`) and time-stamped: HttpOnly, SameSite=Strict, Secure over https, Path=/, Max-Age the
session's lifetime. A request's session is valid only while the signature checks, the cookie is younger than
`console_session_ttl_s` and its record is still in the store: logging out deletes the record, so a copy of the
cookie stops working at once, anywhere. The CSRF token is the session id signed under another salt: a change (POST)
without it, or with another session's, is refused (403) before anything is looked at.

The signing key comes from the settings; unset, each process makes a random one (sessions end when it stops), which
Lambda refuses at start: its instances would not accept each other's cookies.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer

from functions.logic.console_series import CONSOLE_NAMESPACE, ensure_namespace
from shared.settings import Settings
from tidemq_protocol.clock import now_ms
from tidemq_protocol.errors import KeyNotFound, NamespaceNotFound
from tidemq_store import MessageStore

COOKIE = "tidemq_console"
SESSION_SALT = "tidemq-console-session"
CSRF_SALT = "tidemq-console-csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
KEY_BYTES = 32

_process_key: bytes | None = None
_key_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in browser: the session's id (as recorded in the store) and its user."""

    session_id: str
    user: str


def session_key(settings: Settings) -> bytes:
    """The key signing cookies and CSRF tokens: the setting, else (never in Lambda) one made for this process."""
    global _process_key
    if settings.console_session_key is not None:
        return settings.console_session_key.get_secret_value().encode()
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        raise RuntimeError(
            "TIDEMQ_CONSOLE_SESSION_KEY must be set in Lambda when the console is on (TIDEMQ_CONSOLE_ENABLED): "
            "the key signing its session cookies, the same in every instance"
        )
    with _key_lock:
        if _process_key is None:
            _process_key = secrets.token_bytes(KEY_BYTES)
        return _process_key


class Sessions:
    """Makes, checks and ends sessions (see the module docstring) in one store."""

    def __init__(self, store: MessageStore, settings: Settings) -> None:
        key = session_key(settings)
        self.store, self.ttl_s = store, settings.console_session_ttl_s
        self.cookies = URLSafeTimedSerializer(key, salt=SESSION_SALT)
        self.tokens = URLSafeTimedSerializer(key, salt=CSRF_SALT)

    def start(self, user: str) -> Session:
        """A new session of `user`, recorded in the store until it expires."""
        ensure_namespace(self.store)
        session = Session(secrets.token_urlsafe(24), user)
        record = json.dumps({"user": user, "since_ms": now_ms()}).encode()
        self.store.kv.put(CONSOLE_NAMESPACE, _key(session.session_id), record, ttl_ms=self.ttl_s * 1000)
        return session

    def cookie(self, session: Session | None, secure: bool) -> str:
        """The Set-Cookie value carrying `session` (None: one that clears the cookie)."""
        value = "" if session is None else self.cookies.dumps({"sid": session.session_id, "user": session.user})
        max_age = 0 if session is None else self.ttl_s
        return f"{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict" + (
            "; Secure" if secure else ""
        )

    def current(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, if its signature checks, it has not expired and it was not ended."""
        if not cookie:
            return None
        try:
            claimed = self.cookies.loads(cookie, max_age=self.ttl_s)
        except BadSignature:  # tampered with, signed with another key, or too old (SignatureExpired)
            return None
        if not isinstance(claimed, dict) or not isinstance(claimed.get("sid"), str):
            return None
        try:
            read = self.store.kv.get(CONSOLE_NAMESPACE, _key(claimed["sid"]))
        except NamespaceNotFound:
            return None
        if read.entry is None or json.loads(read.entry.value).get("user") != claimed.get("user"):
            return None
        return Session(claimed["sid"], claimed["user"])

    def end(self, session: Session) -> None:
        """Log out: the session's record goes, so no copy of its cookie is accepted again."""
        with contextlib.suppress(NamespaceNotFound, KeyNotFound):  # ended (or expired) already
            self.store.kv.delete(CONSOLE_NAMESPACE, _key(session.session_id))

    def csrf_token(self, session: Session) -> str:
        return self.tokens.dumps(session.session_id)

    def csrf_matches(self, session: Session, token: str) -> bool:
        """Whether `token` is this session's CSRF token."""
        try:
            signed_for = self.tokens.loads(token, max_age=self.ttl_s)
        except BadSignature:
            return False
        return isinstance(signed_for, str) and hmac.compare_digest(signed_for, session.session_id)


def _key(session_id: str) -> str:
    return f"session/{session_id}"
