"""The CDK app (`cdk.json`: `python -m infra_cdk.app`; `make synth`, `make deploy`, `make destroy`).

One stack, configured by CDK context (config.py); the cdk-nag AwsSolutions checks run on every synth, and an
unsuppressed finding fails it. No account or region is set: the stack is environment-agnostic, so it synthesizes
offline without credentials, and deploys to the account and region of the caller's AWS profile.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Aspects
from cdk_nag import AwsSolutionsChecks

from .config import from_context
from .stack import TideMQStack

FEATURE_FLAGS = {
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,  # access logs by bucket policy, not ACLs
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-efs:denyAnonymousAccess": True,  # only IAM-authorized clients (the functions) mount EFS
    "@aws-cdk/aws-efs:mountTargetOrderInsensitiveLogicalId": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
}
"""The CDK's newer defaults this app is written for (a new project's cdk.json would list them; cdk.json and the
command line may still override each)."""


def build_app(context: dict[str, Any] | None = None, outdir: str | None = None) -> tuple[App, TideMQStack]:
    """The app and its stack (`context` adds to cdk.json's and the command line's; `outdir`: where to synthesize)."""
    app = App(context={**FEATURE_FLAGS, **(context or {})}, outdir=outdir)
    config = from_context(app.node.try_get_context)
    stack = TideMQStack(app, config.stack_name, config=config)
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return app, stack


def main() -> None:
    app, _ = build_app()
    app.synth()


if __name__ == "__main__":
    main()
