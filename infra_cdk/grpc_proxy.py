"""The RocketMQ 5 gRPC proxy (servers/grpc_proxy) as a deployable option (`-c grpc_proxy=true`, docs/deploy.md):
API Gateway's HTTP APIs do not carry gRPC, so the proxy runs as ECS Fargate tasks behind an Application Load Balancer.

    clients --TLS, HTTP/2 (gRPC)--> ALB :443 (public subnets; the ACM certificate of grpc_proxy_certificate_arn)
            --gRPC (h2c)--> Fargate tasks :8081 (private subnets; `python -m servers.grpc_proxy`, arm64)
            --> EFS (the functions' access point), DynamoDB and S3 (gateway endpoints), the push function

Why an ALB and not an NLB: its target group speaks gRPC (protocol version GRPC), so each RPC, not each connection,
is balanced over the tasks (a client's one long-lived HTTP/2 connection would pin it to one task behind an NLB, and
new tasks would take no load until clients reconnect), and its health check is a gRPC call whose status it reads.

The tasks run with the store functions' own settings (functions.store_settings) and the table and bucket access of
the functions whose logic they serve (permissions.PROXY_TABLES); the auth key comes as an ECS secret. Without NAT
(the default) the tasks reach ECR, CloudWatch Logs and Secrets Manager through interface endpoints made here.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk.region_info import RegionInfo
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from servers.grpc_proxy.protocol import SERVICE
from shared.settings import Settings

from . import assets
from .config import DeployConfig
from .functions import EFS_MOUNT, Functions, settings_environment, store_settings
from .network import Network
from .permissions import PROXY_TABLES, PROXY_TIER, bucket_statements, shared_directory_statement, table_statements
from .storage import AUTH_KEY_SUFFIX, Storage

PROXY_PORT = Settings.model_fields["grpc_port"].default
TASK_CPU, TASK_MEMORY_MIB = 256, 512
"""The smallest Fargate task (0.25 vCPU, 0.5 GB): the proxy waits on the store; autoscaling adds tasks."""
CONTAINER = "proxy"
VOLUME = "shared-directory"
HEALTH_CHECK_PATH = f"/{SERVICE}/Heartbeat"
"""The load balancer's health check calls Heartbeat unsigned: the proxy answers it with gRPC status OK (and
UNAUTHORIZED in the body, as every error is answered), which proves the service, not only the port, is served."""
IDLE_TIMEOUT = Duration.seconds(350)
"""Longer than a client's quietest interval on a connection (it sends its settings on Telemetry every 300 s)."""
DEREGISTRATION_DELAY = Duration.seconds(30)
"""A stopping task's long polls (at most TIDEMQ_GRPC_MAX_LONG_POLLING_MS, 20 s) end before it is cut off."""
ENDPOINTS = {
    "Ecr": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
}
"""What a task reaches beyond the VPC's gateway endpoints: its image (ECR; the layers come from S3), its log group,
the auth key. Made only without NAT."""
ACCESS_LOG_PREFIX = "grpc-proxy-lb"
LOG_DELIVERY = "logdelivery.elasticloadbalancing.amazonaws.com"
LAUNCH_COMMAND = f'TIDEMQ_AUTH_KEY="$TIDEMQ_AUTH_KEY"{AUTH_KEY_SUFFIX} exec python -m servers.grpc_proxy'
"""The secret holds the key without its last characters (storage.py says why), as the functions' environment
completes it; the shell completes it here and hands over to the proxy (SIGTERM then reaches it directly)."""


class GrpcProxy(Construct):
    """The proxy's image, tasks, service, autoscaling, load balancer and network access."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        network: Network,
        storage: Storage,
        functions: Functions,
    ) -> None:
        super().__init__(scope, id)
        # Outbound open as the functions' is: from the private subnets it reaches only what the VPC routes to (the
        # endpoints, EFS; with NAT the internet). Inbound: the load balancer on the proxy's port, nothing else.
        self.security_group = ec2.SecurityGroup(
            self, "Tasks", vpc=network.vpc, description="TideMQ gRPC proxy tasks", allow_all_outbound=True
        )
        storage.file_system.connections.allow_default_port_from(self.security_group, "NFS from the gRPC proxy")
        network.lambda_endpoint.connections.allow_default_port_from(self.security_group, "HTTPS from the gRPC proxy")
        if not config.nat_gateways:
            self._endpoints(network)

        self.task_definition = self._task_definition(config, storage, functions)
        cluster = ecs.Cluster(self, "Cluster", vpc=network.vpc)
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=cluster,
            task_definition=self.task_definition,
            vpc_subnets=network.private_subnets,
            security_groups=[self.security_group],
            assign_public_ip=False,
            platform_version=ecs.FargatePlatformVersion.LATEST,
            min_healthy_percent=100,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            health_check_grace_period=Duration.seconds(60),
        )
        self.service.node.add_dependency(storage.file_system.mount_targets_available)
        self.scaling = self.service.auto_scale_task_count(min_capacity=1, max_capacity=config.grpc_proxy_max_tasks)
        self.scaling.scale_on_cpu_utilization(
            "Cpu",
            target_utilization_percent=config.grpc_proxy_cpu_target,
            scale_out_cooldown=Duration.minutes(1),
            scale_in_cooldown=Duration.minutes(5),
        )
        self._load_balancer(config, network, storage)
        self._suppress(cluster)

    def _endpoints(self, network: Network) -> None:
        endpoint_sg = ec2.SecurityGroup(
            self, "Endpoints", vpc=network.vpc, description="Endpoints of the gRPC proxy", allow_all_outbound=False
        )
        endpoint_sg.add_ingress_rule(self.security_group, ec2.Port.tcp(443), "HTTPS from the gRPC proxy")
        for name, service in ENDPOINTS.items():
            network.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=network.private_subnets,
                security_groups=[endpoint_sg],
                private_dns_enabled=True,
                open=False,
            )

    def _task_definition(self, config: DeployConfig, storage: Storage, functions: Functions) -> ecs.TaskDefinition:
        task = ecs.FargateTaskDefinition(
            self,
            "Task",
            cpu=TASK_CPU,
            memory_limit_mib=TASK_MEMORY_MIB,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
        )
        task.add_volume(
            name=VOLUME,
            efs_volume_configuration=ecs.EfsVolumeConfiguration(
                file_system_id=storage.file_system.file_system_id,
                transit_encryption="ENABLED",
                authorization_config=ecs.AuthorizationConfig(
                    access_point_id=storage.access_point.access_point_id, iam="ENABLED"
                ),
            ),
        )
        for statement in [
            shared_directory_statement(storage),
            *table_statements(storage.tables, PROXY_TABLES),
            *bucket_statements(storage.data, config.tier_prefix, PROXY_TIER),
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[functions.push_arn]),
        ]:
            task.add_to_task_role_policy(statement)

        self.log_group = logs.LogGroup(
            self, "Logs", retention=config.log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        environment = settings_environment(
            **store_settings(config, storage),
            host="0.0.0.0",  # the load balancer reaches the task on its VPC address
            grpc_port=PROXY_PORT,
            max_request_bytes=config.max_request_bytes,  # as the HTTP API's: one limit whichever the protocol
        )
        container = task.add_container(
            CONTAINER,
            image=ecs.ContainerImage.from_asset(
                str(assets.build_proxy_context()), platform=ecr_assets.Platform.LINUX_ARM64
            ),
            entry_point=["sh", "-c"],
            command=[LAUNCH_COMMAND],
            environment=environment,
            secrets={"TIDEMQ_AUTH_KEY": ecs.Secret.from_secrets_manager(storage.auth_key, "key")},
            port_mappings=[ecs.PortMapping(container_port=PROXY_PORT, protocol=ecs.Protocol.TCP)],
            logging=ecs.LogDrivers.aws_logs(
                stream_prefix="grpc-proxy", log_group=self.log_group, mode=ecs.AwsLogDriverMode.NON_BLOCKING
            ),
            stop_timeout=Duration.seconds(30),
        )
        container.add_mount_points(ecs.MountPoint(container_path=EFS_MOUNT, source_volume=VOLUME, read_only=False))
        return task

    def _load_balancer(self, config: DeployConfig, network: Network, storage: Storage) -> None:
        lb_sg = ec2.SecurityGroup(
            self,
            "LoadBalancerSg",
            vpc=network.vpc,
            description="TideMQ gRPC proxy load balancer",
            allow_all_outbound=False,
        )
        lb_sg.add_ingress_rule(
            ec2.Peer.ipv4(str(config.grpc_proxy_ingress_cidr)), ec2.Port.tcp(443), "gRPC over TLS from clients"
        )
        NagSuppressions.add_resource_suppressions(
            lb_sg,
            [
                NagPackSuppression(
                    id="AwsSolutions-EC23",
                    reason="RocketMQ clients connect from wherever they run (grpc_proxy_ingress_cidr narrows it): only "
                    "443 is open, TLS ends at the listener, and the proxy refuses every unsigned request.",
                )
            ],
        )
        self.load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=network.vpc,
            vpc_subnets=network.public_subnets,
            internet_facing=True,
            security_group=lb_sg,
            idle_timeout=IDLE_TIMEOUT,
            drop_invalid_header_fields=True,
        )
        self._log_access(config, storage)
        listener = self.load_balancer.add_listener(
            "Grpc",
            port=443,
            protocol=elbv2.ApplicationProtocol.HTTPS,
            certificates=[elbv2.ListenerCertificate.from_arn(config.grpc_proxy_certificate_arn)],
            ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
            open=False,  # the ingress rule above says who
        )
        self.target_group = listener.add_targets(
            "Tasks",
            port=PROXY_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            protocol_version=elbv2.ApplicationProtocolVersion.GRPC,
            targets=[self.service.load_balancer_target(container_name=CONTAINER, container_port=PROXY_PORT)],
            deregistration_delay=DEREGISTRATION_DELAY,
            health_check=elbv2.HealthCheck(
                path=HEALTH_CHECK_PATH,
                healthy_grpc_codes="0",
                interval=Duration.seconds(30),
                timeout=Duration.seconds(5),
                healthy_threshold_count=2,
                unhealthy_threshold_count=3,
            ),
        )

    def _log_access(self, config: DeployConfig, storage: Storage) -> None:
        """Access logs to the access-log bucket. The CDK's `log_access_logs` needs the stack's region, which this
        environment-agnostic stack leaves open; the certificate's region is the load balancer's (ACM certificates are
        regional), so the principal that delivers the logs is chosen from it, as `log_access_logs` would: the
        region's Elastic Load Balancing account, or in regions opened since August 2022 the log-delivery service."""
        account = RegionInfo.get(config.grpc_proxy_region).elbv2_account
        principal = iam.AccountPrincipal(account) if account else iam.ServicePrincipal(LOG_DELIVERY)
        storage.access_logs.grant_put(principal, f"{ACCESS_LOG_PREFIX}/AWSLogs/{Aws.ACCOUNT_ID}/*")
        for name, value in {
            "access_logs.s3.enabled": "true",
            "access_logs.s3.bucket": storage.access_logs.bucket_name,
            "access_logs.s3.prefix": ACCESS_LOG_PREFIX,
        }.items():
            self.load_balancer.set_attribute(name, value)
        self.load_balancer.node.add_dependency(storage.access_logs)  # its policy first: ELB checks it

    @property
    def endpoint(self) -> str:
        """What a RocketMQ client is given: the load balancer's DNS name and port 443 (with TLS on)."""
        return f"{self.load_balancer.load_balancer_dns_name}:443"

    def _suppress(self, cluster: ecs.Cluster) -> None:
        NagSuppressions.add_resource_suppressions(
            cluster,
            [
                NagPackSuppression(
                    id="AwsSolutions-ECS4",
                    reason="Container Insights bills its per-task metrics as custom metrics; the service's CPU and "
                    "memory (AWS/ECS, free) are what autoscaling and an operator need for one small service.",
                )
            ],
        )
        NagSuppressions.add_resource_suppressions(
            self.task_definition,
            [
                NagPackSuppression(
                    id="AwsSolutions-ECS2",
                    reason="The environment holds the proxy's settings (table prefix, bucket name, paths), as the "
                    "functions' does; the one secret, the auth key, is an ECS secret from Secrets Manager.",
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Segment objects are named as messages arrive (topic/queue/kind/offset): the task may "
                    "read objects under the tier's prefix of the data bucket only.",
                    applies_to=[{"regex": r"/^Resource::<.*Data.*\.Arn>/.*\*$/"}],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="The execution role's ecr:GetAuthorizationToken has no resource-level permission, and "
                    "the awslogs driver names its log streams at run time, in the proxy's own log group.",
                    applies_to=["Resource::*", {"regex": r"/^Resource::<.*Logs.*\.Arn>:\*$/"}],
                ),
            ],
            apply_to_children=True,
        )
