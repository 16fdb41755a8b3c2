"""The Lambda functions: python3.12 on arm64, each from the same code asset with the store engine and the third-party
packages as two layers (assets.py), configured through the settings model's own variables.

    admin, produce, consume   behind the HTTP API (functions/routes.py says which serves which route)
    console                   the web console, behind the HTTP API at /console (no signature: its own login)
    push                      invoked asynchronously by produce and admin (and by itself, to continue), reserved
                              concurrency 1 (functions/push/handler.py says why)
    maintenance               on four EventBridge schedules: every minute the scheduled event (upload to the cold
                              tier), {"job": "timers"} (due delay messages) and {"job": "transactions"} (transaction
                              check-backs), every hour {"job": "retention"} (functions/maintenance/handler.py)
    authorizer                the HTTP API's Lambda authorizer (api.py); outside the VPC: it reads users only
    bootstrap                 makes the first super user, invoked once by an operator (`make first-user`); no
                              route reaches it; outside the VPC: it writes users only

Each function has a role of its own with the table and bucket access of permissions.py, writes to a log group of its
own, and sends what its asynchronous invocations could not handle to one dead-letter queue.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from functions.maintenance.handler import MaintenanceEvent
from functions.routes import FUNCTIONS as API_FUNCTIONS
from shared.settings import Settings

from . import assets
from .config import FUNCTION_TIMEOUT_S, DeployConfig
from .network import Network
from .permissions import FUNCTION_TABLES, FUNCTION_TIER, bucket_statements, shared_directory_statement, table_statements
from .storage import Storage

CONSOLE = "console"
"""The web console (functions/console): behind the HTTP API as the API's functions, its own login."""
STORE_FUNCTIONS = (*API_FUNCTIONS, CONSOLE, "push", "maintenance")
AUTHORIZER = "authorizer"
BOOTSTRAP = "bootstrap"
USERS_ONLY = (AUTHORIZER, BOOTSTRAP)
"""Functions that touch the users table alone: outside the VPC, no shared directory, no cold tier."""
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
HOME = "/tmp/tidemq"  # the only writable directory in Lambda; the serverless store keeps nothing there
EFS_MOUNT = "/mnt/tidemq"
SERVICE, NAMESPACE = "tidemq", "TideMQ"
"""POWERTOOLS_SERVICE_NAME and POWERTOOLS_METRICS_NAMESPACE (functions/api/observability.py's defaults, set
explicitly so that the alarms' metrics cannot drift from them)."""
PUSH_RESERVED_CONCURRENCY = 1
PUSH_MAX_EVENT_AGE = Duration.hours(6)
"""A push event waits at most this long in Lambda's queue (the next produce of the topic delivers anyway)."""


def handler(function: str) -> str:
    """A function's Lambda handler: `lambda_handler` of `functions.<name>.handler` (functions/routes.py)."""
    return f"{assets.handler_modules([function])[0]}.lambda_handler"


def settings_environment(**values: Any) -> dict[str, str]:
    """The environment that sets these `shared.settings.Settings` fields, named as the model reads them
    (`TIDEMQ_<FIELD>`); a field the model does not have is a KeyError, and each value known now (not a deploy-time
    reference) is validated by the model, as the function will validate it."""
    if unknown := sorted(set(values) - set(Settings.model_fields)):
        raise KeyError(f"not settings of shared.settings.Settings: {', '.join(unknown)}")
    known = {name: value for name, value in values.items() if not Token.is_unresolved(value)}
    Settings.model_validate(known)
    prefix = Settings.model_config["env_prefix"]
    return {f"{prefix}{name}".upper(): str(value) for name, value in values.items()}


def serverless_settings(config: DeployConfig) -> dict[str, Any]:
    """The settings of every process of this stack that opens a store: the serverless backend over its tables, with
    authentication on (the auth key is given apart: an environment variable of the functions, a secret of the gRPC
    proxy's tasks)."""
    return dict(backend="serverless", home=HOME, local_aws="off", dynamodb_prefix=config.prefix, auth="on")


def store_settings(config: DeployConfig, storage: Storage) -> dict[str, Any]:
    """The settings of a process serving messages (the store functions, the gRPC proxy's tasks): the shared
    directory mounted at EFS_MOUNT, the cold tier in the data bucket, push delivery set going by invoking the push
    function."""
    return dict(
        **serverless_settings(config),
        efs_path=EFS_MOUNT,
        tier="s3",
        tier_bucket=storage.data.bucket_name,
        tier_prefix=config.tier_prefix,
        push_mode="lambda",
        push_function=config.function_name("push"),
    )


class Functions(Construct):
    """The functions, their layers, roles and log groups, the dead-letter queue and the maintenance schedules."""

    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, network: Network, storage: Storage) -> None:
        super().__init__(scope, id)
        self.config, self.network, self.storage = config, network, storage
        wanted = [*STORE_FUNCTIONS, BOOTSTRAP, *([AUTHORIZER] if config.authorizer == "lambda" else [])]
        self.assets = assets.build_lambda_assets(wanted)
        self.code = lambda_.Code.from_asset(str(self.assets.code))
        self.layers = [
            lambda_.LayerVersion(
                self,
                "Engine",
                code=lambda_.Code.from_asset(str(self.assets.engine)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description="TideMQ store engine (layers/store_engine/tidemq_store)",
            ),
            lambda_.LayerVersion(
                self,
                "Dependencies",
                code=lambda_.Code.from_asset(str(self.assets.dependencies)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description="Third-party packages of the TideMQ functions (cp312, manylinux aarch64)",
            ),
        ]
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        NagSuppressions.add_resource_suppressions(
            self.dead_letters,
            [
                NagPackSuppression(
                    id="AwsSolutions-SQS3",
                    reason="It is the dead-letter queue of the asynchronous invocations and schedules (the alarm "
                    "on its depth says when to look).",
                )
            ],
        )

        push_name = config.function_name("push")
        self.push_arn = Stack.of(self).format_arn(
            service="lambda",
            resource="function",
            resource_name=push_name,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        common = dict(**serverless_settings(config), auth_key=storage.auth_key_value)
        store = dict(**store_settings(config, storage), auth_key=storage.auth_key_value)
        self.functions: dict[str, lambda_.Function] = {}
        for name in STORE_FUNCTIONS:
            extra: dict[str, Any] = {}
            if name in API_FUNCTIONS:
                extra["max_request_bytes"] = config.max_request_bytes
            if name == CONSOLE:
                extra["console_session_key"] = storage.console_session_key_value
            self.functions[name] = self._function(name, settings_environment(**store, **extra), in_vpc=True)
        # One table: no shared directory (a scratch one in /tmp, never written), no cold tier, no VPC.
        users_only = settings_environment(**common, efs_path=f"{HOME}/efs", tier="off")
        for name in USERS_ONLY:
            if name in wanted:
                self.functions[name] = self._function(name, users_only, in_vpc=False)
        # set push delivery going (push: its continuations; consume and maintenance: the delay messages they move)
        for notifier in ("produce", "admin", "push", "consume", "maintenance"):
            self.functions[notifier].add_to_role_policy(
                iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.push_arn])
            )
        target_arn = Stack.of(self).format_arn(
            service="lambda",
            resource="function",
            resource_name=config.push_target_functions,
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.functions["push"].add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[target_arn])
        )
        NagSuppressions.add_resource_suppressions(
            self.functions["push"].role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="`lambda:` push targets are named by operators when they subscribe a group; the pattern "
                    "(context push_lambda_targets, default <prefix>-target-*) bounds which functions they may be.",
                    applies_to=[
                        f"Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:function:"
                        f"{config.push_target_functions}"
                    ],
                )
            ],
            apply_to_children=True,
        )

        self._schedule_maintenance()

    # ---- one function --------------------------------------------------------------------------------

    def _function(self, name: str, environment: dict[str, str], *, in_vpc: bool) -> lambda_.Function:
        config, storage = self.config, self.storage
        function_name = config.function_name(name)
        log_group = logs.LogGroup(
            self,
            f"{name}-logs",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            f"{name}-role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"TideMQ {name} function",
        )
        log_group.grant_write(role)
        for statement in table_statements(storage.tables, FUNCTION_TABLES[name]):
            role.add_to_policy(statement)
        if name in FUNCTION_TIER:
            for statement in bucket_statements(storage.data, self.config.tier_prefix, FUNCTION_TIER[name]):
                role.add_to_policy(statement)
        vpc: dict[str, Any] = {}
        if in_vpc:
            vpc = dict(
                vpc=self.network.vpc,
                vpc_subnets=self.network.private_subnets,
                security_groups=[self.network.functions_sg],
                filesystem=self._shared_directory(),
            )
            # Lambda's own policy for placing a function in a VPC (network interfaces it creates and names)
            role.add_managed_policy(
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole")
            )
        asynchronous: dict[str, Any] = {}
        if name in ("push", "maintenance"):
            asynchronous = dict(dead_letter_queue=self.dead_letters, retry_attempts=2)
        if name == "push":
            asynchronous.update(
                reserved_concurrent_executions=PUSH_RESERVED_CONCURRENCY,
                max_event_age=PUSH_MAX_EVENT_AGE,
                # push continues a delivery by invoking itself (functions/push/handler.py): a loop by design
                recursive_loop=lambda_.RecursiveLoop.ALLOW,
            )
        timeout = {
            "push": config.push_timeout_s,
            "maintenance": config.maintenance_timeout_s,
            AUTHORIZER: 10,
            BOOTSTRAP: 30,
        }.get(name, FUNCTION_TIMEOUT_S.get(name))
        function = lambda_.Function(
            self,
            name,
            function_name=function_name,
            description=f"TideMQ {name}",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler(name),
            code=self.code,
            layers=self.layers,
            memory_size=512 if name in USERS_ONLY else config.memory(name),
            timeout=Duration.seconds(timeout),
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
            },
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
            **vpc,
            **asynchronous,
        )
        suppressions = [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Lambda creates one log stream per execution environment, named at run time: the function "
                "may write streams of its own log group only.",
                applies_to=[{"regex": r"/^Resource::<.*logs.*\.Arn>:\*$/"}],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Segment objects are named as messages arrive (topic/queue/kind/offset): object actions are "
                "limited to the tier's prefix of the data bucket.",
                applies_to=[{"regex": r"/^Resource::<.*Data.*\.Arn>/.*\*$/"}],
            ),
        ]
        if config.tracing:
            suppressions.append(
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="X-Ray's PutTraceSegments and PutTelemetryRecords have no resource-level permissions.",
                    applies_to=["Resource::*"],
                )
            )
        if in_vpc:
            suppressions.append(
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AWSLambdaVPCAccessExecutionRole: the network-interface actions Lambda needs to place the "
                    "function in the VPC; the interfaces are created by Lambda, so no ARN can be named instead.",
                    applies_to=[
                        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
                    ],
                )
            )
        NagSuppressions.add_resource_suppressions(role, suppressions, apply_to_children=True)
        NagSuppressions.add_resource_suppressions(
            function,
            [
                NagPackSuppression(
                    id="AwsSolutions-L1",
                    reason="python3.12 is the runtime the code and its native wheels are built for (DESIGN.md: "
                    "Lambda targets python3.12); moving to a newer one is a deliberate step with a rebuild.",
                )
            ],
        )
        return function

    def _shared_directory(self) -> lambda_.FileSystem:
        """The EFS access point, mounted at EFS_MOUNT; the CDK's own `from_efs_access_point` allows ClientMount on
        `*` (with a condition), so the statements here name the file system instead."""
        storage = self.storage
        return lambda_.FileSystem(
            arn=storage.access_point.access_point_arn,
            local_mount_path=EFS_MOUNT,
            connections=storage.file_system.connections,
            dependency=[storage.file_system.mount_targets_available],
            policies=[shared_directory_statement(storage)],
        )

    # ---- schedules -----------------------------------------------------------------------------------

    def _schedule_maintenance(self) -> None:
        """EventBridge rules, as functions/maintenance/handler.py expects them: the scheduled event itself for an
        upload run, and the constant inputs {"job": "retention"}, {"job": "timers"}, {"job": "transactions"} and
        {"job": "console"}."""
        maintenance = self.functions["maintenance"]
        jobs = {
            "upload": (self.config.maintenance_upload_minutes, None),
            "retention": (
                self.config.maintenance_retention_minutes,
                events.RuleTargetInput.from_object(MaintenanceEvent(job="retention").model_dump()),
            ),
            "timers": (
                self.config.maintenance_timers_minutes,
                events.RuleTargetInput.from_object(MaintenanceEvent(job="timers").model_dump()),
            ),
            "transactions": (
                self.config.maintenance_transactions_minutes,
                events.RuleTargetInput.from_object(MaintenanceEvent(job="transactions").model_dump()),
            ),
            "console": (
                self.config.maintenance_console_minutes,
                events.RuleTargetInput.from_object(MaintenanceEvent(job="console").model_dump()),
            ),
        }
        self.maintenance_rules: dict[str, events.Rule] = {}
        for job, (minutes, event) in jobs.items():
            self.maintenance_rules[job] = events.Rule(
                self,
                f"maintenance-{job}",
                description=f"TideMQ maintenance: {job}",
                schedule=events.Schedule.rate(Duration.minutes(minutes)),
                targets=[
                    targets.LambdaFunction(
                        maintenance, event=event, dead_letter_queue=self.dead_letters, retry_attempts=2
                    )
                ],
            )

    @property
    def api_functions(self) -> dict[str, lambda_.Function]:
        return {name: self.functions[name] for name in (*API_FUNCTIONS, CONSOLE)}
