"""The network: a VPC for the functions that mount EFS and for the Spark jobs, with no NAT gateway by default.

S3 and DynamoDB are reached through gateway endpoints (free); the Lambda API through one interface endpoint, which
the produce, admin and push functions need to invoke the push function (and push, its `lambda:` targets). Nothing
else in the VPC calls an AWS API: logs and metrics (EMF) leave through Lambda's own log delivery. With
`nat_gateways` > 0 the functions also reach the internet (webhook push targets). With `grpc_proxy` the VPC has public
subnets too, where the proxy's load balancer is (grpc_proxy.py).
"""

from __future__ import annotations

from aws_cdk import Annotations, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from .config import DeployConfig


class Network(Construct):
    """The VPC, its endpoints and the security groups of the functions and the Spark jobs."""

    def __init__(self, scope: Construct, id: str, *, config: DeployConfig) -> None:
        super().__init__(scope, id)
        if config.nat_gateways:
            private = ec2.SubnetType.PRIVATE_WITH_EGRESS
            subnets = [
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="private", subnet_type=private, cidr_mask=22),
            ]
        else:
            private = ec2.SubnetType.PRIVATE_ISOLATED
            subnets = [ec2.SubnetConfiguration(name="private", subnet_type=private, cidr_mask=22)]
            if config.grpc_proxy:  # after the private ones, so that turning it on leaves their addresses as they are
                subnets.append(ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24))
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=config.availability_zones,
            nat_gateways=config.nat_gateways,
            subnet_configuration=subnets,
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
                "DynamoDB": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
            },
        )
        self.private_subnets = ec2.SubnetSelection(subnet_type=private)
        self.private_subnet_ids = self.vpc.select_subnets(subnet_type=private).subnet_ids
        self.public_subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=config.log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.vpc.add_flow_log(
            "Rejected",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,  # what was refused is what needs looking at; all traffic costs
        )

        self.functions_sg = ec2.SecurityGroup(
            self, "Functions", vpc=self.vpc, description="TideMQ functions", allow_all_outbound=True
        )
        # Rules to reach EFS added by the Lambda file-system configuration are already covered by allow_all_outbound
        Annotations.of(self.functions_sg).acknowledge_warning(
            "@aws-cdk/aws-ec2:ipv4IgnoreEgressRule", "the functions may reach anything the VPC routes to"
        )
        self.jobs_sg = ec2.SecurityGroup(
            self, "SparkJobs", vpc=self.vpc, description="TideMQ Spark jobs (EMR Serverless)", allow_all_outbound=True
        )
        endpoint_sg = ec2.SecurityGroup(
            self, "LambdaEndpoint", vpc=self.vpc, description="Lambda API endpoint", allow_all_outbound=False
        )
        endpoint_sg.add_ingress_rule(self.functions_sg, ec2.Port.tcp(443), "HTTPS from the functions")
        self.lambda_endpoint = self.vpc.add_interface_endpoint(
            "Lambda",
            service=ec2.InterfaceVpcEndpointAwsService.LAMBDA_,
            subnets=self.private_subnets,
            security_groups=[endpoint_sg],
            private_dns_enabled=True,
            open=False,
        )
