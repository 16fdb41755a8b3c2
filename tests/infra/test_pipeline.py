"""The EMR Serverless application, the Spark package as an asset, and the schedules that start the job runs as
spark_emr/emr.py starts them."""

from __future__ import annotations

import json
from importlib import import_module

from aws_cdk.assertions import Template

from infra_cdk.pipeline import SCHEDULED_JOBS, START_JOB_RUN
from spark_emr.emr import spark_submit_parameters
from spark_emr.package import MANIFEST, PackageUri
from tests.infra.cloud import render


def test_the_emr_serverless_application_runs_spark_on_arm64_and_stops_when_idle(synthesized):
    template = Template.from_json(synthesized.template)
    template.resource_count_is("AWS::EMRServerless::Application", 1)
    template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "Type": "SPARK",
            "Architecture": "ARM64",
            "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": 15},
        },
    )


def test_the_spark_package_is_uploaded_as_an_asset_with_its_manifest(synthesized):
    (deployment,) = synthesized.of_type("Custom::CDKBucketDeployment").values()
    properties = deployment["Properties"]
    assert properties["DestinationBucketKeyPrefix"] == "spark"
    (key,) = properties["SourceObjectKeys"]
    staged = synthesized.outdir / f"asset.{key.removesuffix('.zip')}"
    manifest = json.loads((staged / MANIFEST).read_text())
    assert manifest["platform"] == "aarch64"
    for entry in manifest["entry_points"].values():
        assert (staged / entry).is_file()
    assert (staged / manifest["code"]).is_file() and (staged / manifest["environment"]).is_file()


def test_schedules_start_the_compaction_retention_and_migration_runs(synthesized):
    schedules = {
        r["Properties"]["Name"].rsplit("-", 1)[1]: r["Properties"]
        for r in synthesized.of_type("AWS::Scheduler::Schedule").values()
    }
    assert set(schedules) == set(SCHEDULED_JOBS) == {"compaction", "retention", "migrate"}
    (application,) = synthesized.of_type("AWS::EMRServerless::Application")
    (role,) = [name for name in synthesized.of_type("AWS::IAM::Role") if name.startswith("PipelineJobRole")]
    (artifacts,) = [name for name in synthesized.of_type("AWS::S3::Bucket") if name.startswith("StorageArtifacts")]
    (deployment,) = synthesized.of_type("Custom::CDKBucketDeployment").values()
    staged = synthesized.outdir / f"asset.{deployment['Properties']['SourceObjectKeys'][0].removesuffix('.zip')}"
    manifest = json.loads((staged / MANIFEST).read_text())
    package = PackageUri(f"<{artifacts}>", "spark")
    for job, schedule in schedules.items():
        assert schedule["State"] == ("DISABLED" if job == "migrate" else "ENABLED"), job
        target = schedule["Target"]
        assert target["Arn"] == START_JOB_RUN
        assert "DeadLetterConfig" in target and "RetryPolicy" in target
        run = json.loads(render(target["Input"]))
        assert run["applicationId"] == f"<{application}.ApplicationId>"
        assert run["executionRoleArn"] == f"<{role}.Arn>"
        assert run["clientToken"] == "<aws.scheduler.execution-id>"
        driver = run["jobDriver"]["sparkSubmit"]
        assert driver["entryPoint"] == package.uri(manifest["entry_points"][job])
        assert driver["sparkSubmitParameters"] == spark_submit_parameters(package, manifest)
        args = import_module(f"spark_emr.jobs.{job}").arguments(driver["entryPointArguments"])
        assert args.dynamodb_prefix == "tidemq" and args.bucket.startswith("<StorageData")


def test_the_scheduler_may_start_runs_and_pass_only_the_job_role(synthesized):
    statements = [
        statement
        for name, policy in synthesized.of_type("AWS::IAM::Policy").items()
        if name.startswith("PipelineSchedulerRole")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {statement["Action"]: render(statement["Resource"]) for statement in statements}
    assert actions["emr-serverless:StartJobRun"].endswith(".Arn>")
    assert actions["iam:PassRole"].startswith("<PipelineJobRole")
