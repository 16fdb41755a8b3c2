"""The one settings model of a TideMQ process, read once from `TIDEMQ_*` environment variables.

It extends the store engine's `StoreConfig` (data directory, flush policy, limits) with what the
process itself needs. Every field, its variable and its default are listed in docs/settings.md.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from tidemq_protocol.errors import TideMQError
from tidemq_protocol.limits import KIB, MIB
from tidemq_protocol.push_target import push_target_kind
from tidemq_protocol.retry import MAX_DELIVERY_ATTEMPTS, RetryPolicy, parse_backoff
from tidemq_store.config import StoreConfig

ROCKETMQ_BACKOFF = "customized:1s,5s,10s,30s,1m,2m,3m,4m,5m,6m,7m,8m,9m,10m,20m,30m,1h,2h"
"""RocketMQ's default delays (tidemq_protocol.retry.ROCKETMQ_DELAYS_MS), as TIDEMQ_RETRY_BACKOFF writes them."""


class InvalidConfiguration(TideMQError):
    """The process's settings cannot work together (e.g. the embedded moto server asked for inside AWS Lambda, or
    no AWS credentials where AWS is needed): a start-up error saying what to change, never a silent stand-in."""


class PushMode(StrEnum):
    """How a produce sets push delivery going: a worker inside this process (the local gateway), or an
    asynchronous invocation of the push Lambda function (AWS)."""

    LOCAL = "local"
    LAMBDA = "lambda"


class AuthMode(StrEnum):
    """Whether requests must be signed (`on`, the default) or are taken from anyone (`off`: loopback only)."""

    ON = "on"
    OFF = "off"


class GatewayDispatch(StrEnum):
    """How the long-running servers (the local gateway, the BrokerContainer) serve the hot routes: straight to the
    route functions (`lean`, servers/lean.py), or as every other route, through an API Gateway event and the
    function's resolver (`events`, as in Lambda)."""

    LEAN = "lean"
    EVENTS = "events"


class LocalAwsMode(StrEnum):
    """Where S3 and DynamoDB come from when no `AWS_ENDPOINT_URL` names an endpoint: AWS itself (`off`), a moto
    server this process starts on a loopback port (`moto`: in memory), or LocalStack started the same way
    (`localstack`: installed on first use into .venv-localstack, its files under TIDEMQ_HOME). Either one's state is
    gone when the process stops; both are for local runs and tests only, and refused inside AWS Lambda."""

    OFF = "off"
    MOTO = "moto"
    LOCALSTACK = "localstack"


class EmrPlatform(StrEnum):
    """The CPU architecture of an EMR Serverless application (its `architecture`: ARM64 or X86_64), as manylinux
    wheel tags name it."""

    AARCH64 = "aarch64"
    X86_64 = "x86_64"


class Settings(StoreConfig):
    """Process settings: the local gateway, request and consume limits, where AWS is, push delivery, the Spark jobs
    on EMR Serverless, plus every `StoreConfig` field."""

    model_config = SettingsConfigDict(**StoreConfig.model_config, populate_by_name=True)  # fields with aliases too

    host: str = Field(default="127.0.0.1", description="Address the local gateway listens on.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port the local gateway listens on.")
    gateway_threads: int = Field(default=64, ge=1, description="Handler threads of the local gateway.")
    gateway_queue: int = Field(
        default=256,
        ge=0,
        description="Most requests the local gateway (and calls the gRPC proxy) keeps waiting for a handler thread; "
        "past it a 503 (TOO_MANY_REQUESTS) at once, so that an overloaded server answers busy rather than letting "
        "callers time out.",
    )
    gateway_long_polls: int = Field(
        default=256,
        ge=1,
        description="Most long polls (consumes with `wait_ms`) the local gateway keeps waiting at once, on threads of "
        "their own; past it a 503.",
    )
    gateway_streams: int = Field(
        default=64,
        ge=1,
        description="Most streaming reads (GET .../stream) a long-running server keeps open at once, each on a thread "
        "of its own; past it a 503.",
    )
    stream_heartbeat_ms: int = Field(
        default=2_000,
        ge=100,
        le=60_000,
        description="How long a streaming read stays silent at most: an idle stream sends a heartbeat frame this "
        "often, so that a client or server that is gone is noticed.",
    )
    gateway_dispatch: GatewayDispatch = Field(
        default=GatewayDispatch.LEAN,
        description="How the local gateway and the BrokerContainer serve produce, consume, pop receive and ack: "
        "`lean` (to the route functions, no API Gateway event) or `events` (through the function's resolver).",
    )
    max_request_bytes: int = Field(
        default=6 * MIB,
        ge=KIB,
        description="Largest request body read (Lambda's own payload limit); a larger one is a 413, refused as it "
        "arrives.",
    )
    local_aws: LocalAwsMode = Field(
        default=LocalAwsMode.OFF,
        description="moto or localstack: S3 and DynamoDB from an embedded moto server or a LocalStack this process "
        "starts, unless AWS_ENDPOINT_URL is set (local runs; an error inside Lambda); off: AWS_ENDPOINT_URL, else AWS "
        "itself.",
    )

    max_get_bytes: int = Field(
        default=64 * MIB, ge=1, description="Largest read (`max_bytes`) one consume may ask for."
    )
    max_get_wait_ms: int = Field(
        default=20_000, ge=0, description="Longest long-poll wait (`wait_ms`) one consume may ask for."
    )

    pop_max_messages: int = Field(
        default=32, ge=1, le=1000, description="Most messages one pop receive may ask for (RocketMQ's limit: 32)."
    )
    pop_invisible_ms: int = Field(
        default=30_000, ge=1, description="How long a received message is held when the receive does not say."
    )
    pop_min_invisible_ms: int = Field(
        default=10_000, ge=1, description="Shortest invisible time a receive or a change may ask for."
    )
    pop_max_invisible_ms: int = Field(
        default=43_200_000, ge=1, description="Longest invisible time a receive or a change may ask for (12 h)."
    )

    max_delivery_attempts: int = Field(
        default=16,
        ge=1,
        le=MAX_DELIVERY_ATTEMPTS,
        validation_alias=AliasChoices("tidemq_max_delivery_attempts", "tidemq_pop_max_delivery_attempts"),
        description="Deliveries of a message (pop or push) before it goes to its group's dead letters, for a group "
        "whose retry policy does not say (RocketMQ's 16; TIDEMQ_POP_MAX_DELIVERY_ATTEMPTS, its former name, too).",
    )
    retry_backoff: str = Field(
        default=ROCKETMQ_BACKOFF,
        description="The wait before a message is delivered again after a failed delivery (push) or a nack (pop), "
        "for a group whose retry policy does not say: exponential:INITIAL,MULTIPLIER,MAX or customized:D1,D2,...",
    )

    @field_validator("retry_backoff")
    @classmethod
    def _backoff(cls, text: str) -> str:
        parse_backoff(text)  # an InvalidArgument (a ValueError) saying what is wrong with it
        return text

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry policy of a group that sets none (each field a group leaves None comes from here)."""
        return RetryPolicy(max_delivery_attempts=self.max_delivery_attempts, backoff=parse_backoff(self.retry_backoff))

    @model_validator(mode="after")
    def _pop_bounds(self) -> Settings:
        if not self.pop_min_invisible_ms <= self.pop_invisible_ms <= self.pop_max_invisible_ms:
            raise ValueError(
                "TIDEMQ_POP_INVISIBLE_MS must lie between TIDEMQ_POP_MIN_INVISIBLE_MS and TIDEMQ_POP_MAX_INVISIBLE_MS"
            )
        return self

    trace_enabled: bool = Field(
        default=True,
        description="Whether the broker records each message's trace in `%TRACE%` (a topic opts out with the "
        "attribute trace.enabled=false; docs/trace.md).",
    )
    trace_flush_ms: int = Field(
        default=200, ge=1, le=60_000, description="How long trace events wait in memory before one put writes them."
    )
    trace_buffer_events: int = Field(
        default=100_000,
        ge=1,
        description="Trace events one store holds in memory at most; past them new ones are dropped.",
    )
    trace_retention_ms: int = Field(
        default=72 * 3_600_000, ge=1000, description="Retention of the `%TRACE%` topic when the broker creates it."
    )

    push_mode: PushMode = Field(
        default=PushMode.LOCAL, description="local: a worker thread pool; lambda: async invoke."
    )
    push_function: str = Field(default="tidemq-push", min_length=1, description="lambda mode: the push function.")
    push_threads: int = Field(default=4, ge=1, description="local mode: groups delivered at the same time.")
    push_target_timeout_s: float = Field(default=30.0, gt=0, description="Longest wait for one call of a target.")
    push_subscribers_ttl_s: float = Field(
        default=10.0, ge=0, description="How long a process trusts its list of which groups push from which topic."
    )
    push_python_targets: Annotated[frozenset[str], NoDecode] = Field(
        default=frozenset(), description="The python: targets allowed, `module:callable` each, comma-separated."
    )
    push_allowed_hosts: Annotated[frozenset[str], NoDecode] = Field(
        default=frozenset(),
        description="Webhook hosts allowed although not public: names, addresses or CIDR networks, comma-separated.",
    )

    @field_validator("push_python_targets", "push_allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset(entry.strip() for entry in value.split(",") if entry.strip())
        return value

    @field_validator("push_python_targets")
    @classmethod
    def _python_targets(cls, targets: frozenset[str]) -> frozenset[str]:
        for target in targets:
            push_target_kind(f"python:{target}")  # a ValueError saying what is wrong with it
        return targets

    auth: AuthMode = Field(
        default=AuthMode.ON, description="on: every route but /health needs a signed request; off: loopback only."
    )
    auth_key: SecretStr | None = Field(
        default=None,
        description="Key sealing users' secrets in the store (base64 of 32 bytes); unset: <home>/auth.key, made at "
        "first start (never in Lambda, where it must be set).",
    )
    auth_max_skew_s: float = Field(
        default=300.0, gt=0, le=3600, description="How far a request's signed date may be from the server's clock."
    )
    auth_cache_ttl_s: float = Field(
        default=10.0, ge=0, description="How long a process trusts a user's record (policies, secret) it read."
    )

    console_enabled: bool = Field(
        default=True, description="Serve the web console under /console (docs/console.md); false: every page a 404."
    )
    console_session_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="Key signing console session cookies and CSRF tokens (32+ characters); unset: a random key per "
        "process start (sessions end with it), refused in Lambda when the console is on.",
    )
    console_session_ttl_s: int = Field(
        default=8 * 3600, ge=60, le=7 * 86400, description="How long a console login lasts (its cookie's expiry)."
    )
    console_sample_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="How often the console's rolling series (produce / consume rates, lag) are sampled: the "
        "maintenance function's console job (AWS: every minute), a timer in the local servers.",
    )
    console_scan_limit: int = Field(
        default=10_000,
        ge=100,
        le=1_000_000,
        description="Most entries of a queue one message-browser request examines before it stops and offers to "
        "continue.",
    )

    grpc_enabled: bool = Field(
        default=True, description="Serve RocketMQ 5's gRPC protocol (servers/grpc_proxy) beside the HTTP API."
    )
    grpc_port: int = Field(default=8081, ge=0, le=65535, description="Port the gRPC proxy listens on (TIDEMQ_HOST's).")
    grpc_threads: int = Field(
        default=32, ge=1, description="Threads the gRPC proxy runs store calls on (a waiting receive holds none)."
    )
    grpc_min_long_polling_ms: int = Field(
        default=5_000, ge=0, description="Shortest long poll of a gRPC receive (a client's shorter wait is raised)."
    )
    grpc_max_long_polling_ms: int = Field(
        default=20_000, ge=0, description="Longest long poll of a gRPC receive (a client's longer wait is cut)."
    )
    grpc_push_invisible_ms: int = Field(
        default=60_000,
        ge=1,
        description="How long a push consumer's receive (auto_renew) holds each message: the proxy renews no hold.",
    )

    @model_validator(mode="after")
    def _grpc_polls(self) -> Settings:
        polls = self.grpc_min_long_polling_ms <= self.grpc_max_long_polling_ms <= self.max_get_wait_ms
        if self.grpc_enabled and not polls:
            raise ValueError(
                "TIDEMQ_GRPC_MIN_LONG_POLLING_MS <= TIDEMQ_GRPC_MAX_LONG_POLLING_MS <= TIDEMQ_MAX_GET_WAIT_MS must hold"
            )
        return self

    emr_application_id: str | None = Field(
        default=None, min_length=1, description="The EMR Serverless application `run --emr` starts job runs on."
    )
    emr_role_arn: str | None = Field(
        default=None, min_length=1, description="The IAM role a job run executes as (S3, DynamoDB access)."
    )
    emr_package_uri: str | None = Field(
        default=None,
        pattern=r"^s3://[^/]+(/.*)?$",
        description="Where `python -m spark_emr upload` puts the Spark package and job runs read it (s3://bucket/prefix).",
    )
    emr_platform: EmrPlatform = Field(
        default=EmrPlatform.AARCH64, description="The Spark package's target architecture (the application's)."
    )
    emr_python_version: str = Field(
        default="3.11",
        pattern=r"^3\.\d{1,2}$",
        description="The Python (major.minor) of the application's image that runs the jobs.",
    )

    timer_job_interval_s: float = Field(
        default=10.0,
        gt=0,
        description="serverless, locally: how often the maintenance function's timers job moves due timer messages "
        "(AWS: every minute).",
    )
    transaction_timeout_ms: int = Field(
        default=6_000,
        ge=1,
        description="How long a half message waits for its producer's commit or rollback before its first check-back "
        "(RocketMQ's transactionTimeOut).",
    )
    transaction_check_interval_ms: int = Field(
        default=30_000,
        ge=1,
        description="The wait between two check-backs of one half message (RocketMQ 5's transactionCheckInterval).",
    )
    transaction_check_max: int = Field(
        default=15,
        ge=0,
        description="Check-backs of a half message, unanswered or answered unknown, before it is rolled back "
        "(RocketMQ's transactionCheckMax).",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    return Settings()
