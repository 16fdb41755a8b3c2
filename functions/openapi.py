"""The whole HTTP API's OpenAPI 3 document, merged from every function's resolver.

python -m functions.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from functools import cache

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

from functions.api.auth import PUBLIC_PATHS

FUNCTIONS = ("admin", "produce", "consume")


@cache
def openapi_json() -> str:
    from functions.routes import resolvers

    merged = OpenAPIMerge(
        title="TideMQ",
        version="1.0.0",
        description="Serverless message platform: topics, produce, consume, consumer groups, queries.",
        on_conflict="error",
    )
    for app in resolvers().values():
        merged.add_schema(json.loads(app.get_openapi_json_schema()))
    return json.dumps(signed_requests(json.loads(merged.get_openapi_json_schema())), indent=2)


def signed_requests(document: dict) -> dict:
    """Declare the request signature (shared/signing.py) and, on every route but the public ones, the 401 and
    403 it can answer."""
    document.setdefault("components", {}).setdefault("securitySchemes", {})["tidemq"] = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`TIDEMQ1-HMAC-SHA256 Credential=<user>, Signature=<hex>` with an `X-TideMQ-Date` header: "
        "HMAC-SHA256 of the method, path, query, body hash and date with the user's secret (shared/signing.py).",
    }
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for path, operations in document["paths"].items():
        if path in PUBLIC_PATHS:
            continue
        for operation in operations.values():
            operation["security"] = [{"tidemq": []}]
            operation["responses"].setdefault("401", {"description": "No, or bad, credentials", **error})
            operation["responses"].setdefault("403", {"description": "Not allowed", **error})
    return document


if __name__ == "__main__":
    print(openapi_json())
