"""Lean dispatch: the hot routes served by the long-running servers (the local gateway, the BrokerContainer)
straight from their route functions, without an API Gateway event. `TIDEMQ_GATEWAY_DISPATCH=events` turns it off;
Lambda always takes the full path (API Gateway event -> `lambda_handler` -> the function's resolver).

Issue 31 found a single send spending most of its time on per-request framework work: the event built, the route
matched again by the resolver, its middleware stack, tracer and logger set up. Here the servers match the route
once (servers/adapter.py), and `HOT_ROUTES` says what each hot route calls: one translation per route, from the
request to the same functions the resolver calls (the route functions, or the thin layer under them that both
call), done with the SAME parts the resolver path uses:

- arguments: validated by the resolver's own fields of the route (`Route.dependant`, built once per route), so a
  value the resolver refuses is refused here too. Anything the lean path does not take as it is (a value that
  fails validation, a missing one, a repeated query parameter, a body that is not UTF-8 JSON) is left to the
  resolver: `serve` answers None and the server sends the request as an event, so every 4xx of bad input (the
  422 naming the field, the 415, the 400 of too deep JSON) is the resolver's own, byte for byte.
- the caller: `functions.api.auth.authenticated_call`, as the resolver's entry point authenticates (401 as it
  answers it), then `calling_as` while the route function runs; the route functions `require` what they need.
- errors: `functions.api.errors.handled_error_response`, the mapping every resolver installs; anything else is a
  500 the server answers as it answers a failed function.
- answers: JSON serialized by the route's return field and the resolver's serializer (`HttpApiResolver.json_body`),
  binary ones handed over as bytes, as the local gateway's binary replies are: the same status, content type and
  body as the resolver's.

Left out on this path: the functions' per-invocation Lambda context on log lines, the `Requests` metric and X-Ray
tracing (all off in a local run by default); a route's own metrics are flushed per call (`metrics_of_one_call`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Route as ResolverRoute

from functions.api import bounds
from functions.api.auth import Call, authenticated_call, calling_as
from functions.api.errors import handled_error_response
from functions.api.resolver import HttpApiResolver
from functions.consume import handler as consume
from functions.observability import metrics_of_one_call
from functions.produce import handler as produce
from tidemq_protocol import codec
from tidemq_protocol.errors import ClientError

Result = dict[str, Any]
"""A function's result, as servers/adapter.py sends it: statusCode, headers, body (text, or a memoryview of bytes)."""


@dataclass(frozen=True, slots=True)
class LeanRequest:
    """What a hot route's translation reads of an HTTP request (servers/adapter.py makes it, instead of an event)."""

    method: str
    path: str  # as sent, and signed: a container's broker prefix and all
    path_parameters: Mapping[str, str]
    raw_query: str
    query: Mapping[str, str] | None  # None: a parameter is repeated (left to the resolver)
    headers: Mapping[str, str]  # lower-case names; a repeated header's values joined with commas
    body: bytes
    source_ip: str | None

    def call(self) -> Call:
        """What authentication reads of this request."""
        return Call(self.method, self.path, self.raw_query, self.headers, lambda: self.body, self.source_ip)


@dataclass(frozen=True)
class RouteFunction:
    """A route function of a resolver, and its arguments taken from a request as the resolver takes them."""

    app: HttpApiResolver
    function: Callable[..., Any]

    @cached_property
    def route(self) -> ResolverRoute:
        return self.app.route_of(self.function)

    def arguments(self, request: LeanRequest) -> dict[str, Any] | None:
        """The function's arguments, each validated by the resolver's field for it; None if one is missing or
        invalid, or the request is one the lean path leaves to the resolver (see the module docstring)."""
        if request.query is None:
            return None
        dependant, values = self.route.dependant, {}
        sources = (
            (dependant.path_params, request.path_parameters),
            (dependant.query_params, request.query),
            (dependant.header_params, request.headers),
        )
        for fields, given in sources:
            for field in fields:
                value = given.get(field.alias)
                if value is None and field.required:
                    return None
                if value is None:
                    values[field.name] = field.get_default()
                elif (validated := _valid(field, value)) is not None:
                    values[field.name] = validated
                else:
                    return None
        if dependant.body_params:
            (field,) = dependant.body_params  # every hot route takes one model, the whole body
            value = _json_body(request)
            if value is None or (validated := _valid(field, value)) is None:
                return None
            values[field.name] = validated
        return values

    def json_reply(self, value: Any) -> Response:
        """The function's return value as the resolver answers it."""
        return Response(200, content_types.APPLICATION_JSON, self.app.json_body(self.route, value))


def _valid(field: Any, value: Any) -> Any | None:
    validated, errors = field.validate(value=value, loc=())
    return None if errors else validated


def _json_body(request: LeanRequest) -> Any | None:
    """The body parsed as the resolver parses JSON (`bounds.load_json`), or None: no body, another content type,
    not UTF-8, malformed, nested too deep (the resolver answers each)."""
    content_type = request.headers.get("content-type", "").strip()
    if not request.body or (content_type and not content_type.startswith("application/json")):
        return None
    try:
        return bounds.load_json(request.body.decode("utf-8"))
    except (ValueError, ClientError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None


def binary_reply(data: bytes, content_type: str) -> Response:
    """A binary answer, handed over as the bytes (as `functions.api.binary.binary_response` does locally)."""
    return Response(200, content_type, memoryview(data))  # type: ignore[arg-type]


# ---- one translation per hot route: the request and its validated arguments to the route's answer ----------------


def produce_json(request: LeanRequest, arguments: dict[str, Any]) -> Response:
    return PRODUCE_JSON.json_reply(produce.produce_json(**arguments))


def produce_binary(request: LeanRequest, arguments: dict[str, Any]) -> Response:
    content_type = request.headers.get("content-type", "")
    sent = produce.send_batch(arguments["topic"], content_type, lambda: request.body, arguments["idempotency_key"])
    return produce.batch_reply(sent, request.headers.get("accept", ""), binary_reply)


def consume_binary(request: LeanRequest, arguments: dict[str, Any]) -> Response:
    return binary_reply(consume.batch_bytes(**arguments), codec.CONTENT_TYPE)


def receive_binary(request: LeanRequest, arguments: dict[str, Any]) -> Response:
    return binary_reply(consume.receive_batch(**arguments), codec.RECEIVE_CONTENT_TYPE)


def ack(request: LeanRequest, arguments: dict[str, Any]) -> Response:
    return ACK.json_reply(consume.ack(**arguments))


@dataclass(frozen=True)
class HotRoute:
    """A route the lean path serves: the route function whose parameters it takes, and its translation."""

    function: RouteFunction
    translate: Callable[[LeanRequest, dict[str, Any]], Response]


PRODUCE_JSON = RouteFunction(produce.app, produce.produce_json)
ACK = RouteFunction(consume.app, consume.ack)
HOT_ROUTES: dict[str, HotRoute] = {
    "POST /v1/topics/{topic}/messages": HotRoute(PRODUCE_JSON, produce_json),
    "POST /v1/topics/{topic}/batch": HotRoute(RouteFunction(produce.app, produce.produce_binary), produce_binary),
    "GET /v1/topics/{topic}/queues/{queue}/batch": HotRoute(
        RouteFunction(consume.app, consume.consume_binary), consume_binary
    ),
    "POST /v1/groups/{group}/topics/{topic}/receive/batch": HotRoute(
        RouteFunction(consume.app, consume.receive_binary), receive_binary
    ),
    "POST /v1/groups/{group}/topics/{topic}/ack": HotRoute(ACK, ack),
}
"""The hot routes, by their route key (`functions.api.routing.Route.route_key`)."""


def serve(hot: HotRoute, request: LeanRequest) -> Result | None:
    """Answer a request to a hot route as its resolver would; None to leave it to the resolver (an argument the
    lean path does not take as it is, so that the resolver refuses it in its own words)."""
    arguments = hot.function.arguments(request)
    if arguments is None:
        return None
    try:
        who = authenticated_call(request.call())
    except Exception as error:  # as the functions' entry point answers it (functions/api/resolver.py)
        response = handled_error_response(error, {})
        if response is None:
            raise
        return _result(response)
    try:
        with calling_as(who), metrics_of_one_call():
            return _result(hot.translate(request, arguments))
    except Exception as error:
        response = handled_error_response(error, {**request.query, **arguments})
        if response is None:
            raise  # a bug or an outage: the server answers a 500, as for a function that fails
        return _result(response)


def _result(response: Response) -> Result:
    body = "" if response.body is None else response.body
    return {"statusCode": response.status_code, "headers": dict(response.headers), "body": body}
