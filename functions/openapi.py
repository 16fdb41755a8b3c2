"""The whole HTTP API's OpenAPI 3 document, merged from every function's resolver, with the links between
operations (what one answer gives the next request: the topic just created, the id of a message just produced).

python -m functions.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
from functools import cache

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge

from functions.api.auth import PUBLIC_PATHS

FUNCTIONS = ("admin", "produce", "consume", "kv")

CREATED_TOPIC = {"topic": "$response.body#/name"}
CREATED_GROUP = {"group": "$response.body#/name"}
SAME_GROUP = {"group": "$request.path.group"}
CREATED_NAMESPACE = {"namespace": "$response.body#/name"}
SAME_KEY = {"namespace": "$request.path.namespace", "key": "$request.query.key"}
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict]]] = {
    # (route, success status): {link name: (route it leads to, its parameters)}
    ("POST /v1/topics", "201"): {
        "DescribeTopic": ("GET /v1/topics/{topic}", CREATED_TOPIC),
        "ChangeTopic": ("PATCH /v1/topics/{topic}", CREATED_TOPIC),
        "DeleteTopic": ("DELETE /v1/topics/{topic}", CREATED_TOPIC),
        "TierStatus": ("GET /v1/topics/{topic}/tier", CREATED_TOPIC),
        "UploadNow": ("POST /v1/topics/{topic}/tier/upload", CREATED_TOPIC),
        "Produce": ("POST /v1/topics/{topic}/messages", CREATED_TOPIC),
        "ProduceBatch": ("POST /v1/topics/{topic}/batch", CREATED_TOPIC),
        "ConsumeFirstQueue": ("GET /v1/topics/{topic}/queues/{queue}/messages", {**CREATED_TOPIC, "queue": 0}),
        "ConsumeFirstQueueBatch": ("GET /v1/topics/{topic}/queues/{queue}/batch", {**CREATED_TOPIC, "queue": 0}),
        "FirstQueueOffsetForTime": ("GET /v1/topics/{topic}/queues/{queue}/offset", {**CREATED_TOPIC, "queue": 0}),
    },
    ("POST /v1/topics/{topic}/messages", "200"): {
        "MessageById": ("GET /v1/messages/{msg_id}", {"msg_id": "$response.body#/messages/0/msg_id"}),
        "ConsumeFromIt": (
            "GET /v1/topics/{topic}/queues/{queue}/messages",
            {
                "topic": "$request.path.topic",
                "queue": "$response.body#/messages/0/queue",
                "offset": "$response.body#/messages/0/offset",
            },
        ),
    },
    ("POST /v1/groups", "201"): {
        "DescribeGroup": ("GET /v1/groups/{group}", CREATED_GROUP),
        "DeleteGroup": ("DELETE /v1/groups/{group}", CREATED_GROUP),
        "CommitOffsets": ("POST /v1/groups/{group}/offsets", CREATED_GROUP),
        "ResetOffsets": ("POST /v1/groups/{group}/reset", CREATED_GROUP),
        "SetPush": ("PUT /v1/groups/{group}/push", CREATED_GROUP),
    },
    ("POST /v1/kv", "201"): {
        "DescribeNamespace": ("GET /v1/kv/{namespace}", CREATED_NAMESPACE),
        "DeleteNamespace": ("DELETE /v1/kv/{namespace}", CREATED_NAMESPACE),
        "PutKey": ("PUT /v1/kv/{namespace}/entry", {**CREATED_NAMESPACE, "key": "k"}),
        "Scan": ("GET /v1/kv/{namespace}/keys", CREATED_NAMESPACE),
        "Watch": ("GET /v1/kv/{namespace}/changes", {**CREATED_NAMESPACE, "from_revision": 1}),
    },
    ("PUT /v1/kv/{namespace}/entry", "200"): {
        "GetKey": ("GET /v1/kv/{namespace}/entry", SAME_KEY),
        "DeleteKey": ("DELETE /v1/kv/{namespace}/entry", SAME_KEY),
        "WatchFromIt": (
            "GET /v1/kv/{namespace}/changes",
            {"namespace": "$request.path.namespace", "from_revision": "$response.body#/revision"},
        ),
    },
    ("PUT /v1/groups/{group}/push", "200"): {
        "ShowPush": ("GET /v1/groups/{group}/push", SAME_GROUP),
        "ClearPush": ("DELETE /v1/groups/{group}/push", SAME_GROUP),
    },
}


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
    document = json.loads(merged.get_openapi_json_schema())
    add_links(document)
    return json.dumps(signed_requests(document), indent=2)


def signed_requests(document: dict) -> dict:
    """Declare the request signature (shared/signing.py) and, on every route but the public ones, the 401 and
    403 it can answer."""
    document.setdefault("components", {}).setdefault("securitySchemes", {})["tidemq"] = {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "`TIDEMQ1-HMAC-SHA256 Credential=<user>, Signature=<hex>`, with `X-TideMQ-Date` (ms since "
        "the epoch) and `X-TideMQ-Nonce` headers: HMAC-SHA256 of the method, path, query, body hash, date and nonce "
        "with the user's secret (shared/signing.py).",
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


def add_links(document: dict) -> None:
    """Put LINKS into `document`, each naming the operation it leads to by its operationId."""

    def operation(route: str) -> dict:
        method, path = route.split(" ", 1)
        return document["paths"][path][method.lower()]

    for (route, status), links in LINKS.items():
        operation(route)["responses"][status]["links"] = {
            name: {"operationId": operation(target)["operationId"], "parameters": parameters}
            for name, (target, parameters) in links.items()
        }


if __name__ == "__main__":
    print(openapi_json())
