"""The one place that maps engine errors to HTTP status codes.

A `ClientError` becomes a 4xx whose JSON body (`tidemq_protocol.api.common.ErrorBody`) says what was wrong; a
request that breaks the schema (docs/openapi.json declares every constraint the server checks) is a 422 naming each
offending field. `StoreFailed` (the store stopped taking writes, e.g. after a failed fsync) and `StoreUnavailable` (this
request could not be served now: the gateway is busy, or a service under the store, DynamoDB or S3, is failing,
`tidemq_store.faults`) are 503s that say why, with `Retry-After`, so a load balancer, a client's retry and an
operator see it. Anything else is a bug: a 500 that says only that, with the details in the log.

A request the schema allows is refused only for what the store holds now, and says so with the status HTTP has
for it: 404 when what the URL names does not exist (the topic of `/v1/topics/orders`, queue 5 of
`.../queues/5/messages`), 409 when the request conflicts with the current state: a topic or queue named in the body
that does not exist (a commit on topic `orders` before it is created), an offset outside the queue's range, fewer
queues than the topic has, the push subscription of a group that pulls, a receipt handle that names no current
delivery (or one of a message dead-lettered since), a message that does not fit its topic's message type, a recall
of a delay message delivered already. A client that validates against the document before sending gets nothing
else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from functions.api.routing import methods_at, own_routes
from tidemq_protocol.api.common import ErrorBody
from tidemq_protocol.errors import (
    AccessDenied,
    BrokerExists,
    BrokerNotFound,
    BrokerReadOnly,
    ClientError,
    DiskQuotaExceeded,
    GroupExists,
    GroupNotFound,
    InvalidArgument,
    InvalidBatch,
    InvalidFilterExpression,
    InvalidReceiptHandle,
    KeyNotFound,
    MessageDeadLettered,
    MessageNotFound,
    MessageTooLarge,
    MessageTypeMismatch,
    NamespaceExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    NoPushSubscription,
    NotADeadLetter,
    OffsetConflict,
    OffsetOutOfRange,
    Overloaded,
    PolicyConflict,
    QueueOutOfRange,
    QueuesCannotShrink,
    ReplicaDiverged,
    RevisionCompacted,
    SendConflict,
    StoreFailed,
    StoreUnavailable,
    TimerDelivered,
    TimerNotFound,
    TopicExists,
    TopicNotFound,
    TransactionConflict,
    TransactionNotFound,
    Unauthenticated,
    UserExists,
    UserNotFound,
    VersionMismatch,
)
from tidemq_store.faults import dependency_fault

STATUS: dict[type[ClientError | Overloaded], int] = {
    InvalidArgument: 400,
    InvalidBatch: 400,
    Unauthenticated: 401,
    AccessDenied: 403,
    QueueOutOfRange: 404,
    TopicNotFound: 404,
    GroupNotFound: 404,
    UserNotFound: 404,
    MessageNotFound: 404,
    NamespaceNotFound: 404,
    KeyNotFound: 404,
    BrokerNotFound: 404,
    TimerNotFound: 404,
    TransactionNotFound: 404,
    TopicExists: 409,
    GroupExists: 409,
    UserExists: 409,
    OffsetConflict: 409,
    MessageTypeMismatch: 409,
    NotADeadLetter: 409,
    QueuesCannotShrink: 409,
    NoPushSubscription: 409,
    PolicyConflict: 409,
    OffsetOutOfRange: 409,
    InvalidReceiptHandle: 409,
    MessageDeadLettered: 409,
    NamespaceExists: 409,
    BrokerExists: 409,
    BrokerReadOnly: 409,
    ReplicaDiverged: 409,
    NamespaceNotEmpty: 409,
    TimerDelivered: 409,
    TransactionConflict: 409,
    SendConflict: 409,
    RevisionCompacted: 410,
    VersionMismatch: 412,
    MessageTooLarge: 413,
    Overloaded: 503,
    DiskQuotaExceeded: 507,
}


def named_in_url(error: ClientError, url_parameters: Mapping[str, str]) -> bool:
    """Whether the topic, group or queue `error` did not find is the one the request's path or query names (the
    target resource), rather than one its body names."""
    if isinstance(error, TopicNotFound):
        return url_parameters.get("topic") == error.topic
    if isinstance(error, GroupNotFound):
        return url_parameters.get("group") == error.group
    if isinstance(error, QueueOutOfRange):
        return "queue" in url_parameters  # no route takes a queue in its path and another in its body
    return True


def status_of(error: ClientError | Overloaded, url_parameters: Mapping[str, str] | None = None) -> int:
    """The error's status: its class's (the nearest in STATUS), but 409 for a 404 about something the body names."""
    status = next((STATUS[cls] for cls in type(error).__mro__ if cls in STATUS), 400)
    if status == 404 and url_parameters is not None and not named_in_url(error, url_parameters):
        return 409
    return status


def error_response(status: int, body: ErrorBody) -> Response:
    return Response(status, content_types.APPLICATION_JSON, body.model_dump_json(exclude_none=True))


def no_route(method: str, path: str, allowed: tuple[str, ...]) -> Response:
    """405 naming the methods in `Allow` (`allowed`: those some route serves at `path`) for a path that has routes
    but none for `method`; else 404 (a path no route has, or one whose route the resolver could not match: a
    parameter with characters no name may have)."""
    if not allowed or method in allowed:
        return error_response(404, ErrorBody(error="RouteNotFound", message=f"no route for {path}"))
    body = ErrorBody(error="MethodNotAllowed", message=f"{method} is not allowed on {path}: use {', '.join(allowed)}")
    response = error_response(405, body)
    response.headers["Allow"] = ", ".join(allowed)
    return response


def unsupported_media_type(content_type: str) -> Response:
    message = f"content type {content_type!r} is not accepted: send application/json (or the binary batch type)"
    return error_response(415, ErrorBody(error="UnsupportedMediaType", message=message))


def client_error_response(error: ClientError, url_parameters: Mapping[str, str] | None = None) -> Response:
    """The 4xx a client error is: its status, and a body saying what was wrong."""
    body = ErrorBody(error=type(error).__name__, message=str(error))
    if isinstance(error, OffsetOutOfRange):
        body.min_offset, body.max_offset = error.min_offset, error.max_offset
    elif isinstance(error, VersionMismatch):
        body.current_version = error.current
    elif isinstance(error, RevisionCompacted):
        body.oldest_revision = error.oldest
    elif isinstance(error, InvalidFilterExpression):
        body.position = error.position
    return error_response(status_of(error, url_parameters), body)


def store_unavailable_response(error: StoreFailed | StoreUnavailable) -> Response:
    """The 503 of a store that takes no writes now, or could not serve this request now: saying why, and when to
    try again (`Retry-After`, seconds)."""
    body = ErrorBody(error=type(error).__name__, message=str(error))
    response = error_response(503, body)
    response.headers["Retry-After"] = str(getattr(error, "retry_after_s", 1))
    return response


def handled_error_response(error: Exception, url_parameters: Mapping[str, str]) -> Response | None:
    """The response a route's exception is, as every resolver maps it (`install_error_handlers`) and as the long-
    running servers' lean dispatch maps it (servers/lean.py); None for anything else, a bug (a 500)."""
    if isinstance(error, ClientError):
        return client_error_response(error, url_parameters)
    if isinstance(error, StoreFailed | StoreUnavailable):
        return store_unavailable_response(error)
    if (fault := dependency_fault(error)) is not None:
        return store_unavailable_response(fault)
    return None


def install_error_handlers(app: APIGatewayHttpResolver) -> None:
    @app.exception_handler(Exception)
    def route_error(error: Exception) -> Response:
        event = app.current_event
        url_parameters = {**(event.query_string_parameters or {}), **app.context.get("_route_args", {})}
        response = handled_error_response(error, url_parameters)
        if response is None:
            raise error  # a bug: the function fails, and API Gateway (or the local gateway) answers a 500
        return response

    @app.exception_handler(RequestValidationError)
    def invalid_request(error: RequestValidationError) -> Response:
        # Powertools leaves out pydantic's messages; they only describe the client's own input, and
        # its OpenAPI schema for 422 requires `msg`.
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()]
        message = "; ".join(f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in detail)
        body = {"statusCode": 422, "detail": detail, "message": message}
        return Response(422, content_types.APPLICATION_JSON, json.dumps(body))

    @app.exception_handler(RequestUnsupportedContentType)
    def unsupported_content_type(error: RequestUnsupportedContentType) -> Response:
        content_type = app.current_event.headers.get("content-type", "")
        return unsupported_media_type(content_type)

    @app.not_found
    def not_found(_: Exception) -> Response:
        # From the function's own routes: what API Gateway routes to it (the other functions are not imported).
        path = app.current_event.path
        return no_route(app.current_event.http_method, path, methods_at(path, own_routes(app)))


DESCRIBED = {
    400: "Bad request",
    401: "No, or bad, credentials",
    403: "Not allowed",
    404: "Not found",
    409: "Conflicts with the current state",
    410: "Gone: the changes asked for are no longer kept",
    412: "The key is not at the version the request is conditional on",
    413: "Too large",
    415: "Unsupported media type",
    503: "Not now: the gateway is busy, a service under the store is failing, or the store takes no writes (retry "
    "after `Retry-After` seconds)",
    507: "The broker is past its disk quota and takes no new messages (BrokerContainer)",
}


BODY_ERRORS = (400, 413)
"""What a route that takes a body (one that lists 415) can answer for a body the gateway refuses before it is
parsed (`functions.api.bounds`): 400 for JSON that is not UTF-8 or nests too deep, 413 for one over the limit."""


def responses(*errors: int, ok: int = 200, ok_content: dict | None = None, description: str = "OK") -> dict:
    """OpenAPI `responses` of a route: its success status (content from the return annotation unless
    given; none for 204) and the error statuses it can return, each with an ErrorBody."""
    if 415 in errors:
        errors = (*errors, *(status for status in BODY_ERRORS if status not in errors))
    success: dict = {"description": description}
    if ok == 204:
        success["content"] = {}
    elif ok_content is not None:
        success["content"] = ok_content
    documented = {ok: success}
    for status in errors:
        documented[status] = {"description": DESCRIBED[status], "content": {"application/json": {"model": ErrorBody}}}
    return documented
