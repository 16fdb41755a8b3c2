"""A function's HTTP resolver (API Gateway HTTP API, payload v2, with pydantic validation and our
error mapping) and its Lambda entry point (with context logging, metrics and tracing)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder, Route
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from functions.observability import Handler, instrumented

from . import bounds
from .auth import authenticated, calling_as
from .errors import handled_error_response, install_error_handlers, unsupported_media_type

FORMS = ("multipart/", "application/x-www-form-urlencoded")


@dataclass
class _RequestState:
    """What Powertools keeps on its resolver about the request it is resolving."""

    current_event: BaseProxyEvent | None = None
    lambda_context: Any = None
    context: dict = field(default_factory=dict)  # _route, _route_args, _path, _request, the dependency cache
    processed_stack_frames: list[str] = field(default_factory=list)


def _per_request(name: str) -> property:
    """A resolver attribute that Powertools reads and writes, kept in the current request's state instead."""
    return property(lambda self: getattr(self._state, name), lambda self, value: setattr(self._state, name, value))


class HttpApiResolver(APIGatewayHttpResolver):
    """Powertools' HTTP API resolver, safe to resolve several requests at once: the local gateway runs each
    function's `lambda_handler` in many threads (as would a long-running container); Lambda never does.

    Powertools 3.x keeps the request being resolved on shared objects: `resolve()` sets `current_event` and
    `lambda_context` as class attributes of `BaseRouter`, and the app's `context` dict (the matched `_route`,
    `_route_args`, `_request`, the dependency cache) and `processed_stack_frames` are cleared when any request
    ends. Concurrent requests overwrite each other's: a 500 with `KeyError: '_route'`, another route's status
    code, another request's event in `app.current_event`. Here those four attributes are properties over a state
    of the request's own, held in a ContextVar (each thread has its own context, and `asyncio.to_thread` runs
    each call in a copy), so handlers read `app.current_event` as before, in Lambda and in the gateway alike.
    Powertools also builds a route's middleware stack on the route's first call, unlocked: two first calls at
    once would wrap it twice, so here the first build takes a lock.
    """

    def __init__(self, **options: Any) -> None:
        self._setup = _RequestState()  # what is set outside any request: at construction, by include_router
        self._current: ContextVar[_RequestState | None] = ContextVar("tidemq_request", default=None)
        self._building = threading.Lock()
        super().__init__(**options)

    @property
    def _state(self) -> _RequestState:
        return self._current.get() or self._setup

    current_event = _per_request("current_event")
    lambda_context = _per_request("lambda_context")
    context = _per_request("context")
    processed_stack_frames = _per_request("processed_stack_frames")

    def resolve(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._resolving(event, context):
            return self._build_response(self._resolve())

    async def resolve_async(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._resolving(event, context):
            return self._build_response(await self._resolve_async())

    @contextmanager
    def _resolving(self, event: dict[str, Any], context: Any) -> Iterator[None]:
        """What Powertools' resolve() does around resolving, in a state of this request's own instead of
        BaseRouter's class attributes (leaving out its POWERTOOLS_DEV prints of the event and middlewares)."""
        if isinstance(event, BaseProxyEvent):
            event = event.raw_event
        state = _RequestState(self._to_proxy_event(event), context, dict(self._setup.context))
        token = self._current.set(state)
        try:
            yield
        finally:
            self._current.reset(token)

    def _call_route(self, route: Route, route_arguments: dict[str, str]) -> ResponseBuilder:
        if not route._middleware_stack_built:
            with self._building:
                if not route._middleware_stack_built:
                    route._build_middleware_stack(router_middlewares=self._router_middlewares, app=self)
        return super()._call_route(route, route_arguments)

    def route_of(self, function: Callable[..., Any]) -> Route:
        """The route `function` serves on this resolver: its parameters' fields (`dependant`), validated as the
        resolver validates them, for a server that calls route functions itself (servers/lean.py)."""
        return next(route for route in self._static_routes + self._dynamic_routes if route.func is function)

    def json_body(self, route: Route, value: Any) -> str:
        """A route's return value as the resolver answers it: serialized by the route's return field, then dumped
        by the resolver's own serializer."""
        return self._serializer(route.dependant.return_param.serialize(value))


def new_resolver() -> HttpApiResolver:
    app = HttpApiResolver(enable_validation=True, json_body_deserializer=bounds.load_json)
    install_error_handlers(app)
    return app


def resolve(app: HttpApiResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve an event as its caller, refusing first a body out of bounds (`bounds`: too large, so that nothing
    hashes it, or JSON that is not UTF-8), then an unknown caller (401, functions/api/auth.py) before anything else
    of the request is looked at, then form bodies: the API takes none, and Powertools' form parsing fails on
    malformed ones before any route could answer 415."""
    response = bounds.refusal(event)
    if response is None:
        try:
            who = authenticated(event)
        except Exception as error:  # Unauthenticated, a body not what it claims (bad base64), the store failing
            response = handled_error_response(error, {})
            if response is None:
                raise
    content_type = (event.get("headers") or {}).get("content-type", "")
    if response is None and event.get("body") and content_type.strip().lower().startswith(FORMS):
        response = unsupported_media_type(content_type)
    if response is not None:
        headers = {**response.headers, "Content-Type": response.content_type}  # a 503's Retry-After too
        return {"statusCode": response.status_code, "headers": headers, "body": response.body, "isBase64Encoded": False}
    with calling_as(who):
        return app.resolve(event, context)


def lambda_entry(app: HttpApiResolver) -> Handler:
    """The Lambda entry point of a function whose routes are on `app`."""
    return instrumented(lambda event, context: resolve(app, event, context), count="Requests")
