"""The TideMQ stack: network, storage, functions, API, pipeline and monitoring, one construct each (and, as an option,
the RocketMQ 5 gRPC proxy), and what an operator needs afterwards as outputs (the API's URL; the settings of
`python -m spark_emr run --emr`; the proxy's endpoint)."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from .api import Api
from .config import DeployConfig
from .functions import Functions
from .grpc_proxy import GrpcProxy
from .monitoring import Monitoring
from .network import Network
from .pipeline import Pipeline
from .storage import Storage

CDK_PROVIDED = ("Custom::CDKBucketDeployment", "Custom::S3AutoDeleteObjectsCustomResourceProvider")
"""Singleton functions the CDK adds for the Spark package's upload and (retain_data=false) emptying buckets."""


class TideMQStack(Stack):
    """Everything one TideMQ deployment is."""

    def __init__(self, scope: Construct, id: str, *, config: DeployConfig, **kwargs) -> None:
        super().__init__(scope, id, description="TideMQ: a serverless message platform", **kwargs)
        self.config = config
        self.network = Network(self, "Network", config=config)
        self.storage = Storage(self, "Storage", config=config, network=self.network)
        self.functions = Functions(self, "Functions", config=config, network=self.network, storage=self.storage)
        self.api = Api(self, "Api", config=config, functions=self.functions)
        self.pipeline = Pipeline(
            self,
            "Pipeline",
            config=config,
            network=self.network,
            storage=self.storage,
            dead_letters_arn=self.functions.dead_letters.queue_arn,
        )
        self.monitoring = Monitoring(
            self, "Monitoring", config=config, functions=self.functions, api=self.api, pipeline=self.pipeline
        )
        self.grpc_proxy = None
        if config.grpc_proxy:
            self.grpc_proxy = GrpcProxy(
                self, "GrpcProxy", config=config, network=self.network, storage=self.storage, functions=self.functions
            )
        self._suppress_cdk_provided()

        outputs = {
            "ApiUrl": (self.api.url, "The TideMQ endpoint (TIDEMQ_URL)"),
            "DataBucket": (self.storage.data.bucket_name, "TIDEMQ_TIER_BUCKET"),
            "EmrApplicationId": (self.pipeline.application.attr_application_id, "TIDEMQ_EMR_APPLICATION_ID"),
            "EmrRoleArn": (self.pipeline.job_role.role_arn, "TIDEMQ_EMR_ROLE_ARN"),
            "EmrPackageUri": (self.pipeline.package.uri(""), "TIDEMQ_EMR_PACKAGE_URI"),
            "AlarmTopicArn": (self.monitoring.topic.topic_arn, "Subscribe to be told of alarms"),
            "AuthKeySecretArn": (self.storage.auth_key.secret_arn, "TIDEMQ_AUTH_KEY (key + 'A=')"),
            "BootstrapFunctionName": (
                self.functions.functions["bootstrap"].function_name,
                "Makes the first super user (make first-user)",
            ),
        }
        if self.grpc_proxy is not None:
            outputs["GrpcProxyEndpoint"] = (self.grpc_proxy.endpoint, "RocketMQ 5 clients' endpoint (TLS on)")
        for name, (value, description) in outputs.items():
            CfnOutput(self, name, value=value, description=description)

    def _suppress_cdk_provided(self) -> None:
        for child in self.node.children:
            if child.node.id.startswith(CDK_PROVIDED):
                NagSuppressions.add_resource_suppressions(
                    child,
                    [
                        NagPackSuppression(
                            id=rule,
                            reason="A singleton function of the CDK itself (copying the Spark package into the "
                            "artifacts bucket, or emptying buckets on delete): its runtime, managed logging policy and "
                            "wildcards over its bucket's objects are the CDK's, and it runs only during deployments.",
                        )
                        for rule in ("AwsSolutions-L1", "AwsSolutions-IAM4", "AwsSolutions-IAM5")
                    ],
                    apply_to_children=True,
                )
