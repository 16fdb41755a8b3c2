"""The Spark pipeline: an EMR Serverless application (Spark, arm64) in the VPC, the job role, the Spark package of
`make spark-package` copied to the artifacts bucket (s3://<artifacts>/spark/, manifest included, so that
`python -m spark_emr run --emr` finds it as TIDEMQ_EMR_PACKAGE_URI), and EventBridge Scheduler schedules that
start the job runs exactly as spark_emr/emr.py starts them (entry point, code zip, environment archive).

    compaction   --dynamodb-prefix <prefix> --bucket <data bucket> --prefix <tier prefix>   daily, 03:00 UTC
    retention    --dynamodb-prefix <prefix> --bucket <data bucket> --prefix <tier prefix>   daily, 03:30 UTC
    migrate      the same and --efs-path /mnt/tidemq                                          created DISABLED

The migration job reads the functions' shared directory on every executor, and EMR Serverless mounts no file
system: its schedule exists so that the run is one switch away where a mount becomes possible, and the scheduled
maintenance function (every minute) does the same upload meanwhile. Each argument list is checked here against
the job's own parser. A schedule's run gets `clientToken` = the scheduler's execution id, so a retried start is
one run.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from aws_cdk import Duration, Size, Stack
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_scheduler as scheduler
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from shared.settings import EmrPlatform, Settings
from spark_emr.emr import spark_submit_parameters
from spark_emr.package import REPO, Target
from spark_emr.package import PackageUri as SparkPackageUri

from . import assets
from .config import DeployConfig
from .functions import EFS_MOUNT
from .network import Network
from .permissions import JOB_TABLES, BucketUse, bucket_statements, table_statements
from .storage import EMR_LOGS_PREFIX, SPARK_PREFIX, Storage

ARCHITECTURES = {EmrPlatform.AARCH64: "ARM64", EmrPlatform.X86_64: "X86_64"}
TARGET = Target(Settings.model_fields["emr_platform"].default, Settings.model_fields["emr_python_version"].default)
"""The package's platform and Python: the settings' defaults, which `make spark-package` builds for too."""
START_JOB_RUN = "arn:aws:scheduler:::aws-sdk:emrserverless:startJobRun"
SCHEDULED_JOBS = ("compaction", "retention", "migrate")


def job_arguments(job: str, config: DeployConfig, bucket: str) -> list[str]:
    """A scheduled run's arguments, checked by the job's own parser (spark_emr/jobs/<job>.py)."""
    argv = ["--dynamodb-prefix", config.prefix, "--bucket", bucket, "--prefix", config.tier_prefix]
    if job == "migrate":
        argv += ["--efs-path", EFS_MOUNT]
    try:
        import_module(f"spark_emr.jobs.{job}").arguments(argv)
    except SystemExit as refused:
        raise ValueError(f"spark_emr/jobs/{job}.py refuses the scheduled arguments {argv}") from refused
    return argv


class Pipeline(Construct):
    """The EMR Serverless application, job role, Spark package and job schedules."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        network: Network,
        storage: Storage,
        dead_letters_arn: str,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        directory = Path(config.spark_package)
        directory = directory if directory.is_absolute() else REPO / directory
        self.manifest = assets.ensure_spark_package(directory, TARGET)
        self.package_directory = directory

        self.deployment = s3deploy.BucketDeployment(
            self,
            "SparkPackage",
            sources=[s3deploy.Source.asset(str(directory))],
            destination_bucket=storage.artifacts,
            destination_key_prefix=SPARK_PREFIX,
            prune=True,
            memory_limit=1024,
            ephemeral_storage_size=Size.gibibytes(2),
        )
        self.package = SparkPackageUri(storage.artifacts.bucket_name, SPARK_PREFIX)

        self.application = emrserverless.CfnApplication(
            self,
            "Spark",
            name=f"{config.prefix}-spark",
            release_label=config.emr_release_label,
            type="SPARK",
            architecture=ARCHITECTURES[TARGET.platform],
            auto_start_configuration=emrserverless.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrserverless.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=config.emr_idle_minutes
            ),
            maximum_capacity=emrserverless.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=f"{config.emr_max_vcpu} vCPU", memory=f"{config.emr_max_memory_gb} GB"
            ),
            network_configuration=emrserverless.CfnApplication.NetworkConfigurationProperty(
                subnet_ids=network.private_subnet_ids,
                security_group_ids=[network.jobs_sg.security_group_id],
            ),
        )

        self.job_role = iam.Role(
            self,
            "JobRole",
            description="TideMQ Spark job runs (EMR Serverless)",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnEquals": {"aws:SourceArn": self.application.attr_arn},
                },
            ),
        )
        for statement in [
            *bucket_statements(storage.artifacts, SPARK_PREFIX, BucketUse.READ),
            *bucket_statements(storage.artifacts, EMR_LOGS_PREFIX, BucketUse.PUT),
            *bucket_statements(storage.data, config.tier_prefix, BucketUse.WRITE),
            *table_statements(storage.tables, JOB_TABLES),
        ]:
            self.job_role.add_to_policy(statement)
        NagSuppressions.add_resource_suppressions(
            self.job_role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Object actions under three prefixes whose object names are made at run time: the Spark "
                    "package (read), the job runs' logs (written), the cold tier's segments (compacted, expired).",
                    applies_to=[{"regex": r"/^Resource::<.*(Data|Artifacts).*\.Arn>/.*\*$/"}],
                )
            ],
            apply_to_children=True,
        )

        scheduler_role = iam.Role(
            self,
            "SchedulerRole",
            description="EventBridge Scheduler: starts TideMQ's Spark job runs",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
        )
        scheduler_role.add_to_policy(
            iam.PolicyStatement(actions=["emr-serverless:StartJobRun"], resources=[self.application.attr_arn])
        )
        scheduler_role.add_to_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.job_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
            )
        )
        scheduler_role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[dead_letters_arn]))

        schedules = {
            "compaction": config.compaction_schedule,
            "retention": config.retention_schedule,
            "migrate": config.migration_schedule,
        }
        self.job_arguments = {job: job_arguments(job, config, storage.data.bucket_name) for job in SCHEDULED_JOBS}
        self.schedules: dict[str, scheduler.CfnSchedule] = {}
        for job in SCHEDULED_JOBS:
            run = {
                "applicationId": self.application.attr_application_id,
                "clientToken": "<aws.scheduler.execution-id>",
                "executionRoleArn": self.job_role.role_arn,
                "name": f"tidemq-{job}",
                "jobDriver": {
                    "sparkSubmit": {
                        "entryPoint": self.package.uri(self.manifest["entry_points"][job]),
                        "entryPointArguments": self.job_arguments[job],
                        "sparkSubmitParameters": spark_submit_parameters(self.package, self.manifest),
                    }
                },
                "configurationOverrides": {
                    "monitoringConfiguration": {
                        "s3MonitoringConfiguration": {
                            "logUri": f"s3://{storage.artifacts.bucket_name}/{EMR_LOGS_PREFIX}/"
                        }
                    }
                },
            }
            schedule = scheduler.CfnSchedule(
                self,
                f"Run-{job}",
                name=f"{config.prefix}-{job}",
                description=f"Starts the TideMQ {job} Spark job on EMR Serverless",
                schedule_expression=schedules[job],
                schedule_expression_timezone="UTC",
                state="DISABLED" if job == "migrate" else "ENABLED",
                flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(
                    mode="FLEXIBLE", maximum_window_in_minutes=15
                ),
                target=scheduler.CfnSchedule.TargetProperty(
                    arn=START_JOB_RUN,
                    role_arn=scheduler_role.role_arn,
                    input=stack.to_json_string(run),
                    dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(arn=dead_letters_arn),
                    retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                        maximum_event_age_in_seconds=int(Duration.hours(1).to_seconds()), maximum_retry_attempts=3
                    ),
                ),
            )
            schedule.node.add_dependency(self.deployment)  # no run before its package is in place
            self.schedules[job] = schedule
