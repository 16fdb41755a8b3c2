"""The whole HTTP API's OpenAPI 3 document, merged from every function's resolver.

python -m functions.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from functools import cache

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

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
    return merged.get_openapi_json_schema()


if __name__ == "__main__":
    print(openapi_json())
