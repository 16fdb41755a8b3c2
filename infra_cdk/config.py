"""What a deployment may choose, read once from CDK context (`cdk.json`'s "context", `cdk synth -c key=value`), each
with the default below; docs/deploy.md lists them. The functions' own settings (`shared.settings.Settings`) keep
their defaults unless a field here says otherwise.

    cdk synth -c prefix=tidemq-staging -c nat_gateways=1 -c alarm_email=ops@example.com
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Network
from typing import Any, Literal

from aws_cdk import aws_logs as logs
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from functions.push.handler import RESERVE_MS
from shared.settings import Settings
from tidemq_protocol.limits import KIB, MIB
from tidemq_store.config import StoreConfig

API_TIMEOUT_S = 29
"""API Gateway ends an HTTP API integration at 30 s: the API functions end before it, with their own answer."""

LOG_RETENTION = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    731: "TWO_YEARS",
}
"""The retentions CloudWatch Logs offers (a subset), by days."""

FUNCTION_MEMORY_MB = {
    "admin": 1024,
    "produce": 1024,
    "consume": 1024,
    "kv": 1024,
    "console": 1024,
    "push": 1024,
    "maintenance": 1024,
}
FUNCTION_TIMEOUT_S = {name: API_TIMEOUT_S for name in ("admin", "produce", "consume", "kv", "console")}


class DeployConfig(BaseModel):
    """One deployment's choices (CDK context keys are the field names)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stack_name: str = Field(default="TideMQ", description="The CloudFormation stack.")
    prefix: str = Field(
        default=StoreConfig.model_fields["dynamodb_prefix"].default,
        pattern=r"^[a-z0-9][a-z0-9-]{0,30}$",
        description="Names the DynamoDB tables (`<prefix>-topics`, TIDEMQ_DYNAMODB_PREFIX) and the functions "
        "(`<prefix>-produce`); two deployments in one account and region need two prefixes.",
    )
    tier_prefix: str = Field(
        default=StoreConfig.model_fields["tier_prefix"].default,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Key prefix of the cold tier in the data bucket (TIDEMQ_TIER_PREFIX).",
    )
    availability_zones: int = Field(default=2, ge=2, le=6, description="AZs of the VPC (EFS mount targets).")
    nat_gateways: int = Field(
        default=0,
        ge=0,
        le=6,
        description="0: no internet egress (S3 and DynamoDB through gateway endpoints, Lambda through an interface "
        "endpoint); webhook push targets need 1 or more.",
    )
    api_rate_limit: int = Field(default=500, ge=1, description="HTTP API steady-state requests per second.")
    api_burst_limit: int = Field(default=1000, ge=1, description="HTTP API burst of requests.")
    max_request_bytes: int = Field(
        default=4 * MIB,
        le=4 * MIB + 512 * KIB,
        description="TIDEMQ_MAX_REQUEST_BYTES of the API functions: API Gateway hands a binary body to Lambda in "
        "base64 (4/3 its size) and Lambda takes at most 6 MB, so 4 MiB is the largest body sure to arrive.",
    )
    memory_mb: dict[str, int] = Field(
        default=FUNCTION_MEMORY_MB, description="Memory of each function (MB); CPU grows with it."
    )
    push_timeout_s: int = Field(
        default=120,
        ge=10,
        le=900,
        description="The push function's timeout: a target call is only started when it can end in time "
        "(TIDEMQ_PUSH_TARGET_TIMEOUT_S), and a continuation is handed over in the last seconds.",
    )
    maintenance_timeout_s: int = Field(default=300, ge=60, le=900, description="The maintenance function's timeout.")
    push_lambda_targets: str = Field(
        default="",
        description="Function names (an IAM pattern, `*` allowed) the push function may invoke as `lambda:` "
        "targets; empty: `<prefix>-target-*`.",
    )
    authorizer: Literal["lambda", "off"] = Field(
        default="lambda",
        description="lambda: a Lambda authorizer refuses unsigned, unknown or stale requests before they reach a "
        "function (docs/deploy.md); off: only the functions verify signatures.",
    )
    authorizer_cache_s: int = Field(
        default=300, ge=0, le=3600, description="API Gateway's cache of the authorizer's answers (0: none)."
    )
    tracing: bool = Field(default=True, description="X-Ray active tracing of the functions.")
    log_retention_days: int = Field(default=30, description="CloudWatch Logs retention of every log group.")
    retain_data: bool = Field(
        default=True,
        description="Keep the tables, buckets, file system and auth key when the stack is deleted (and protect "
        "the tables from deletion); false: `make destroy` removes them and their data.",
    )
    alarm_email: str | None = Field(default=None, description="An address subscribed to the alarm topic.")
    upload_lag_alarm_s: int = Field(default=300, ge=60, description="Alarm when a queue's upload lag exceeds this.")
    push_failed_calls_alarm: int = Field(
        default=10, ge=1, description="Alarm when push target calls fail this often in 5 minutes."
    )
    maintenance_upload_minutes: int = Field(
        default=1, ge=1, description="How often the maintenance function uploads to the cold tier."
    )
    maintenance_retention_minutes: int = Field(
        default=60, ge=1, description="How often the maintenance function applies topic retention."
    )
    maintenance_timers_minutes: int = Field(
        default=1,
        ge=1,
        description="How often the maintenance function moves due delay messages (a consumer reading moves them too).",
    )
    maintenance_transactions_minutes: int = Field(
        default=1,
        ge=1,
        description="How often the maintenance function opens due transaction check-backs and rolls back at the limit.",
    )
    maintenance_console_minutes: int = Field(
        default=1, ge=1, description="How often the maintenance function samples the web console's rolling series."
    )
    grpc_proxy: bool = Field(
        default=False,
        description="Deploy the RocketMQ 5 gRPC proxy: ECS Fargate tasks behind an internet-facing Application Load "
        "Balancer (docs/deploy.md; it costs while idle, the rest of the stack does not).",
    )
    grpc_proxy_certificate_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+$",
        description="The ACM certificate of the proxy's HTTPS listener (gRPC needs TLS at the load balancer); "
        "required with grpc_proxy.",
    )
    grpc_proxy_max_tasks: int = Field(default=4, ge=1, le=100, description="Most proxy tasks autoscaling runs.")
    grpc_proxy_cpu_target: int = Field(
        default=60, ge=10, le=90, description="Average CPU (%) of the proxy tasks that autoscaling keeps them at."
    )
    grpc_proxy_ingress_cidr: IPv4Network = Field(
        default=IPv4Network("0.0.0.0/0"),
        description="Who may reach the proxy's load balancer (port 443); every request is signed regardless.",
    )
    emr_release_label: str = Field(default="emr-7.9.0", description="The EMR Serverless release of the Spark jobs.")
    emr_max_vcpu: int = Field(default=16, ge=1, description="Most vCPUs the EMR Serverless application may use.")
    emr_max_memory_gb: int = Field(default=64, ge=1, description="Most memory (GB) it may use.")
    emr_idle_minutes: int = Field(default=15, ge=1, description="Idle minutes before the application stops.")
    spark_package: str = Field(
        default="dist/spark", description="Where `make spark-package` builds the Spark package (built if missing)."
    )
    compaction_schedule: str = Field(default="cron(0 3 * * ? *)", description="When the compaction job runs (UTC).")
    retention_schedule: str = Field(default="cron(30 3 * * ? *)", description="When the retention job runs (UTC).")
    migration_schedule: str = Field(
        default="cron(0 4 ? * SUN *)",
        description="When the migration job would run; the schedule is created disabled (docs/deploy.md: EMR "
        "Serverless cannot mount EFS).",
    )

    @field_validator("log_retention_days")
    @classmethod
    def _offered_retention(cls, days: int) -> int:
        if days not in LOG_RETENTION:
            raise ValueError(f"log_retention_days must be one of {', '.join(map(str, LOG_RETENTION))}")
        return days

    @model_validator(mode="after")
    def _consistent(self) -> DeployConfig:
        unknown = set(self.memory_mb) - set(FUNCTION_MEMORY_MB)
        if unknown:
            raise ValueError(f"memory_mb names no function: {', '.join(sorted(unknown))}")
        push_needs_s = Settings.model_fields["push_target_timeout_s"].default + RESERVE_MS / 1000 + 5
        if self.push_timeout_s < push_needs_s:
            raise ValueError(f"push_timeout_s must be at least {push_needs_s:.0f} (a target call and the hand-over)")
        if self.grpc_proxy and not self.grpc_proxy_certificate_arn:
            raise ValueError(
                "grpc_proxy needs grpc_proxy_certificate_arn: the ARN of an ACM certificate, in the stack's region, "
                "for the load balancer's HTTPS listener (RocketMQ clients reach the proxy over TLS)"
            )
        longest_poll_s = Settings.model_fields["max_get_wait_ms"].default / 1000
        if longest_poll_s + 5 > API_TIMEOUT_S:
            raise ValueError("the longest long poll must end well within the API functions' timeout")
        return self

    @property
    def log_retention(self) -> logs.RetentionDays:
        return logs.RetentionDays[LOG_RETENTION[self.log_retention_days]]

    @property
    def grpc_proxy_region(self) -> str:
        """The region of the proxy's certificate, which is the load balancer's (ACM certificates are regional)."""
        return (self.grpc_proxy_certificate_arn or "").split(":")[3]

    def memory(self, function: str) -> int:
        return {**FUNCTION_MEMORY_MB, **self.memory_mb}[function]

    @property
    def push_target_functions(self) -> str:
        return self.push_lambda_targets or f"{self.prefix}-target-*"

    def function_name(self, function: str) -> str:
        return f"{self.prefix}-{function}"


def from_context(get: Callable[[str], Any]) -> DeployConfig:
    """The configuration from CDK context: `get(key)` is `node.try_get_context`; absent keys keep their default.
    Values given on the command line arrive as strings, which the fields convert (`-c nat_gateways=1`)."""
    given = {name: get(name) for name in DeployConfig.model_fields}
    given = {name: value for name, value in given.items() if value is not None}
    if isinstance(given.get("memory_mb"), str):
        given["memory_mb"] = dict(
            (function, int(mb)) for function, mb in (part.split("=") for part in given["memory_mb"].split(","))
        )
    return DeployConfig.model_validate(given)
