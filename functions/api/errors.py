"""The one place that maps engine errors to HTTP status codes.

A `ClientError` becomes a 4xx whose JSON body (`shared.models.ErrorBody`) says what was wrong; a request that
breaks the schema is a 422 naming each offending field. `StoreFailed` (the store stopped taking writes, e.g. after
a failed fsync) and `StoreUnavailable` (this request could not be served now, nothing changed) are 503s that say
why, so a load balancer, a client's retry and an operator see it. Anything else is a bug or an
outage: a 500 that says only that, with the details in the log.
"""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from shared.models import ErrorBody
from tidemq_store.errors import (
    AccessDenied,
    ClientError,
    GroupExists,
    GroupNotFound,
    InvalidArgument,
    InvalidBatch,
    MessageNotFound,
    MessageTooLarge,
    OffsetConflict,
    OffsetOutOfRange,
    Overloaded,
    QueueOutOfRange,
    StoreFailed,
    StoreUnavailable,
    TopicExists,
    TopicNotFound,
    Unauthenticated,
    UserExists,
    UserNotFound,
)

STATUS: dict[type[ClientError | Overloaded], int] = {
    InvalidArgument: 400,
    InvalidBatch: 400,
    QueueOutOfRange: 400,
    Unauthenticated: 401,
    AccessDenied: 403,
    TopicNotFound: 404,
    GroupNotFound: 404,
    UserNotFound: 404,
    MessageNotFound: 404,
    TopicExists: 409,
    GroupExists: 409,
    UserExists: 409,
    OffsetConflict: 409,
    MessageTooLarge: 413,
    OffsetOutOfRange: 416,
    Overloaded: 503,
}


def status_of(error: ClientError | Overloaded) -> int:
    for cls in type(error).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400


def error_response(status: int, body: ErrorBody) -> Response:
    return Response(status, content_types.APPLICATION_JSON, body.model_dump_json(exclude_none=True))


def unsupported_media_type(content_type: str) -> Response:
    message = f"content type {content_type!r} is not accepted: send application/json (or the binary batch type)"
    return error_response(415, ErrorBody(error="UnsupportedMediaType", message=message))


def client_error_response(error: ClientError) -> Response:
    """The 4xx a client error is: its status, and a body saying what was wrong."""
    body = ErrorBody(error=type(error).__name__, message=str(error))
    if isinstance(error, OffsetOutOfRange):
        body.min_offset, body.max_offset = error.min_offset, error.max_offset
    return error_response(status_of(error), body)


def install_error_handlers(app: APIGatewayHttpResolver) -> None:
    app.exception_handler(ClientError)(client_error_response)

    @app.exception_handler([StoreFailed, StoreUnavailable])
    def store_unavailable(error: StoreFailed | StoreUnavailable) -> Response:
        return error_response(503, ErrorBody(error=type(error).__name__, message=str(error)))

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
        path = app.current_event.path
        return error_response(404, ErrorBody(error="RouteNotFound", message=f"no route for {path}"))


DESCRIBED = {
    400: "Bad request",
    401: "No, or bad, credentials",
    403: "Not allowed",
    404: "Not found",
    409: "Already exists",
    413: "Too large",
    415: "Unsupported media type",
    416: "Offset out of range",
    503: "The store takes no writes",
}


def responses(*errors: int, ok: int = 200, ok_content: dict | None = None, description: str = "OK") -> dict:
    """OpenAPI `responses` of a route: its success status (content from the return annotation unless
    given; none for 204) and the error statuses it can return, each with an ErrorBody."""
    success: dict = {"description": description}
    if ok == 204:
        success["content"] = {}
    elif ok_content is not None:
        success["content"] = ok_content
    documented = {ok: success}
    for status in errors:
        documented[status] = {"description": DESCRIBED[status], "content": {"application/json": {"model": ErrorBody}}}
    return documented
