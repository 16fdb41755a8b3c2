"""Logging in to the console: an access key and its secret, checked on the server against the user store the HTTP
API's signatures are checked against (`functions.api.auth.authenticator`); the secret is compared in constant time
and never echoed, and a failure does not say whether the user or the secret was wrong."""

from __future__ import annotations

import hmac

from functions.api.auth import authenticator
from tidemq_protocol.errors import ClientError

from .session import Sessions
from .web import Answer, ConsoleRequest, redirect, render

WRONG = "the access key or the secret key is wrong"


def login(request: ConsoleRequest, sessions: Sessions) -> Answer:
    """GET: the login form; POST: a session for the user whose credentials these are, then back where it was."""
    back = safe_next(request, request.field("next") or request.arg("next"))
    if request.method != "POST":
        return render(request, "login.html", next=back)
    access_key, secret_key = request.field("access_key"), request.field("secret_key")
    if not access_key or not secret_key:
        return render(request, "login.html", 400, next=back, message="give an access key and a secret key")
    try:
        user, secret = authenticator().user(access_key)
    except ClientError:  # no such user (Unauthenticated), or not a user's name at all
        return render(request, "login.html", 401, next=back, message=WRONG, access_key=access_key)
    if not hmac.compare_digest(secret.encode(), secret_key.encode()):
        return render(request, "login.html", 401, next=back, message=WRONG, access_key=access_key)
    session = sessions.start(user.name)
    return redirect(back, [sessions.cookie(session, request.secure)])


def safe_next(request: ConsoleRequest, wanted: str) -> str:
    """Where to go after logging in: a page of this console (never another site), else the overview."""
    if wanted.startswith(request.base + "/") and not wanted.startswith("//") and "\\" not in wanted:
        return wanted
    return request.url("/")
