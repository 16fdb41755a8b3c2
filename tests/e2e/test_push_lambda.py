"""Push delivery as it runs in AWS (`TIDEMQ_PUSH_MODE=lambda`, serverless backend): the gateway's produce
function invokes the push function asynchronously through boto3; a stand-in for the Lambda Invoke API
(`tests/local_lambda.py`) runs the real push handler in this process, one invocation at a time, sharing the
store with the gateway through DynamoDB (a moto server) and the shared directory, and runs the target function
that the push handler invokes synchronously."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from functions import store as store_module
from functions.logic import targets
from functions.push import handler as push_function
from functions.push import trigger
from shared.settings import get_settings
from tests.gateways import gateway_as_admin, signed_http
from tests.local_lambda import LocalLambda
from tests.push_targets import wait_for
from tidemq import Admin, CustomizedBackoff, RetryPolicy

from .test_push_gateway import lag, produce

PUSH_FUNCTION = "tidemq-push"


class LambdaMode(NamedTuple):
    url: str
    service: LocalLambda
    received: list[dict[str, Any]]  # every event the target function was invoked with


def _forget_process_state() -> None:
    store_module.close_store()
    for cached in (get_settings, trigger.subscribers, targets.lambda_client):
        cached.cache_clear()


@pytest.fixture(scope="module")
def lambda_mode(local_aws, tmp_path_factory) -> Iterator[LambdaMode]:
    home = tmp_path_factory.mktemp("push-lambda") / "data"
    received: list[dict[str, Any]] = []

    def consumer(event: dict[str, Any], context: Any) -> dict[str, Any]:
        received.append(event)
        if event["messages"][0]["body"].startswith("fail"):
            raise RuntimeError("the consumer is down")
        return {"ok": True}

    # Each push invocation gets 4 s: 2 s kept back, 1 s per target call, so calls may start in its first second
    # and a retry wait of 2 s always continues in a new invocation.
    service = LocalLambda({PUSH_FUNCTION: push_function.lambda_handler, "billing-consumer": consumer}, timeout_s=4)
    env = {
        **local_aws.env,
        "AWS_ENDPOINT_URL_LAMBDA": service.url,
        "TIDEMQ_HOME": str(home),
        "TIDEMQ_BACKEND": "serverless",
        "TIDEMQ_DYNAMODB_PREFIX": f"pl{uuid.uuid4().hex[:8]}",
        "TIDEMQ_PUSH_MODE": "lambda",
        "TIDEMQ_PUSH_FUNCTION": PUSH_FUNCTION,
        "TIDEMQ_PUSH_SUBSCRIBERS_TTL_S": "0.5",
        "TIDEMQ_PUSH_TARGET_TIMEOUT_S": "1",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():  # this process runs the push function: the same settings
            patch.setenv(name, value)
        _forget_process_state()
        store_module.get_store()  # opened (tables created) before any invocation's clock runs
        try:
            with service, gateway_as_admin(home, **env) as url:
                yield LambdaMode(url, service, received)
        finally:
            _forget_process_state()


def test_a_produce_invokes_the_push_function_which_delivers_every_message_once_in_queue_order(lambda_mode):
    url, service, received = lambda_mode
    with Admin(url) as admin:
        admin.create_topic("lambda-ok", queues=2)
        admin.create_group("lambda-ok-group")
        admin.set_push("lambda-ok-group", "lambda-ok", "lambda:billing-consumer", batch_size=4)
    produced = []
    for batch in range(3):
        produced += produce(url, "lambda-ok", [{"body": f"ok-{batch}-{n}", "queue": n % 2} for n in range(10)])
    wait_for(lambda: lag(url, "lambda-ok-group", "lambda-ok") == 0, "lag 0")
    messages = [m for event in received if event["topic"] == "lambda-ok" for m in event["messages"]]
    assert sorted(m["msg_id"] for m in messages) == sorted(m["msg_id"] for m in produced)  # each exactly once
    offsets = defaultdict(list)
    for message in messages:
        offsets[message["queue"]].append(message["offset"])
    assert offsets == {0: list(range(15)), 1: list(range(15))}
    assert {"topic": "lambda-ok"} in service.events(PUSH_FUNCTION)  # what each produce sent
    assert service.errors == []


def test_retries_continue_in_new_invocations_with_their_attempts_then_the_message_is_dead_lettered(lambda_mode):
    url, service, received = lambda_mode
    with Admin(url) as admin:
        admin.create_topic("lambda-fail", queues=1)
        two_seconds = CustomizedBackoff(delays_ms=(2000,))
        admin.create_group("lambda-fail-group", retry=RetryPolicy(max_delivery_attempts=3, backoff=two_seconds))
        admin.set_push("lambda-fail-group", "lambda-fail", "lambda:billing-consumer")
    [sent] = produce(url, "lambda-fail", [{"body": "fail-1"}])
    dead_letters = f"{url}/v1/topics/%25DLQ%25lambda-fail-group/queues/0/messages"
    [letter] = wait_for(lambda: signed_http().get(dead_letters).json().get("messages"), "a dead letter")
    assert [event["attempt"] for event in received if event["topic"] == "lambda-fail"] == [1, 2, 3]
    continued = [event for event in service.events(PUSH_FUNCTION) if event.get("continues")]
    assert continued  # waits went on in new invocations, counting on from the attempts in the store
    assert letter["properties"]["ORIGIN_MESSAGE_ID"] == sent["msg_id"]
    assert letter["properties"]["DLQ_REASON"] == "billing-consumer raised RuntimeError"  # never its message
    # it commits past the message once its dead letter is stored: the letter can be read a moment before that
    wait_for(lambda: lag(url, "lambda-fail-group", "lambda-fail") == 0, "lag 0")
    assert service.errors == []
