"""Console function: the web console's pages under `/console` (routes `/console` and `/console/{proxy+}`), served by
the local gateway, the BrokerContainer and, in AWS, API Gateway, as every other function.

A request is answered in this order: the console switched off (404); a static file (functions/console/static,
public); the login page; otherwise the session (session.py) must be valid, else the browser is sent to log in (a
GET) or refused (401: a POST changes nothing); a POST must come from the console's own origin and carry the
session's CSRF token (403 otherwise, before anything is read); then the page runs as the session's user, exactly as
the HTTP API runs a signed request (`functions.api.auth.calling_as`): every page asks `require` / `visible` what the
user's policies allow. A ClientError is its HTTP status (functions/api/errors.py `status_of`) on an error page that
says what was wrong; nothing is changed by a refused request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from functions.api.auth import Caller, authenticator, calling_as
from functions.api.errors import status_of
from functions.observability import instrumented
from functions.store import get_store, process_store
from shared.settings import get_settings
from tidemq_protocol.errors import ClientError, StoreFailed, StoreUnavailable, Unauthenticated
from tidemq_store.faults import dependency_fault

from . import login, pages, static  # noqa: F401 (the pages add themselves to visit.ROUTES)
from .session import COOKIE, CSRF_FIELD, CSRF_HEADER, Session, Sessions, session_key
from .visit import Visit, find
from .web import Answer, ConsoleRequest, parse, redirect, render

log = logging.getLogger("tidemq.console")
_sessions: dict[int, Sessions] = {}


def sessions() -> Sessions:
    """This process's sessions, in its own store (a container's, whichever broker a page is about)."""
    store = process_store()
    made = _sessions.get(id(store))
    if made is None or made.store is not store:
        made = _sessions[id(store)] = Sessions(store, get_settings())
    return made


def handle(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    request = parse(event, event.get("rawPath", "/console"))
    try:
        return _handle(request)
    except Exception as error:  # the store, or a service under it, failing while the session or user was read
        answer = unavailable(error, lambda status, **fields: render(request, "error.html", status, **fields))
        if answer is None:
            raise
        return answer.result()


def _handle(request: ConsoleRequest) -> dict[str, Any]:
    settings = get_settings()
    if not settings.console_enabled:
        return render(
            request, "error.html", 404, message="the console is switched off (TIDEMQ_CONSOLE_ENABLED)"
        ).result()
    if request.method == "GET" and request.path.startswith("/static/"):
        return static.serve(request.path.removeprefix("/static/")).result()
    if request.method == "POST" and not same_origin(request):
        return render(request, "error.html", 403, message="a change must come from the console's own pages").result()
    if request.path == "/login":
        return login.login(request, sessions()).result()
    session = sessions().current(request.cookies.get(COOKIE))
    user = None
    if session is not None:
        try:
            user = authenticator().user(session.user)[0]
        except Unauthenticated:  # the user was deleted since
            user = None
    if session is None or user is None:
        return not_logged_in(request).result()
    if request.method == "POST" and not carries_csrf_token(request, session):
        return render(
            request,
            "error.html",
            403,
            message="the form's CSRF token is missing or not this session's (reload the page and try again)",
        ).result()
    if request.path == "/logout" and request.method == "POST":
        sessions().end(session)
        return redirect(request.url("/login"), [sessions().cookie(None, request.secure)]).result()
    found = find(request.method, request.path)
    if found is None:
        return render(request, "error.html", 404, user=user, message=f"no console page {request.path}").result()
    page, params = found
    visit = Visit(request, get_store(), settings, user, sessions().csrf_token(session), params)
    with calling_as(Caller(user, request.source_ip)):
        return answer(visit, page).result()


def answer(visit: Visit, page) -> Answer:
    """The page's answer, or its error as a page saying what was wrong: a 4xx, or a 503 (with Retry-After) while the
    store or a service under it cannot serve it; a 500 only for a bug."""
    try:
        return page(visit)
    except ClientError as error:
        status = status_of(error, named_in_request(visit))
        return visit.page("error.html", status, message=str(error), error=type(error).__name__)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in error.errors())
        return visit.page("error.html", 422, message=problems, error="InvalidInput")
    except Exception as error:
        answer = unavailable(error, lambda status, **fields: visit.page("error.html", status, **fields))
        if answer is None:
            raise
        return answer


def unavailable(error: Exception, page: Callable[..., Answer]) -> Answer | None:
    """The 503 page (with Retry-After) of a store, or a service under it, that cannot serve now; None for a bug."""
    cause = error if isinstance(error, StoreFailed | StoreUnavailable) else dependency_fault(error)
    if cause is None:
        return None
    answer = page(503, message=str(cause), error=type(cause).__name__)
    answer.headers["retry-after"] = str(getattr(cause, "retry_after_s", 1))
    return answer


def named_in_request(visit: Visit) -> dict[str, str]:
    """What the request names, as a URL's parameters name it (a 404 when it does not exist, not a 409): the page's
    subject (`name`, a topic's or a group's) and the topics and groups its query or form names."""
    request = visit.request
    name = request.field("name") or request.arg("name")
    fields = {key: values[0] for key, values in request.form.items() if values}
    return {"topic": name, "group": name, **visit.params, **request.query, **fields}


def not_logged_in(request: ConsoleRequest) -> Answer:
    """A GET goes to the login page (and back after it); a POST is refused, changing nothing."""
    if request.method == "GET" and "hx-request" not in request.headers:
        back = request.url(request.path, **request.query)
        return redirect(request.url("/login", next=back), [sessions().cookie(None, request.secure)])
    refused = render(request, "error.html", 401, message="log in first: this session ended or never began")
    refused.headers["hx-redirect"] = request.url("/login")
    return refused


def same_origin(request: ConsoleRequest) -> bool:
    """Whether a POST's Origin (when the browser sends one) is the console's own host (no cross-site form)."""
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host", "")


def carries_csrf_token(request: ConsoleRequest, session: Session) -> bool:
    token = request.field(CSRF_FIELD) or request.headers.get(CSRF_HEADER, "")
    return bool(token) and sessions().csrf_matches(session, token)


if get_settings().console_enabled:
    session_key(get_settings())  # in Lambda without TIDEMQ_CONSOLE_SESSION_KEY: fail at start, not at a login
lambda_handler = instrumented(handle, count="ConsoleRequests")
