"""The RocketMQ 5 gRPC proxy as a deployable option (infra_cdk/grpc_proxy.py): absent by default; with
`-c grpc_proxy=true` Fargate tasks over the same backend as the store functions, with their settings and no more
access than the functions it serves, behind a load balancer that speaks gRPC, autoscaled on CPU, cdk-nag clean."""

from __future__ import annotations

import csv

import pytest
from pydantic import ValidationError

from infra_cdk import assets
from infra_cdk.config import DeployConfig, from_context
from infra_cdk.functions import EFS_MOUNT
from infra_cdk.grpc_proxy import HEALTH_CHECK_PATH, PROXY_PORT, TASK_CPU, TASK_MEMORY_MIB
from infra_cdk.permissions import PROXY_TABLES, TableUse
from tests.infra import test_least_privilege as least_privilege
from tests.infra.cloud import render, storage_secret
from tests.infra.conftest import PROXY_CONTEXT
from tests.infra.test_least_privilege import listed, statements
from tests.infra.test_nag import findings

PROXY_KINDS = (
    "AWS::ECS::Service",
    "AWS::ECS::TaskDefinition",
    "AWS::ElasticLoadBalancingV2::LoadBalancer",
    "AWS::ElasticLoadBalancingV2::TargetGroup",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::EC2::InternetGateway",
)


def one(synthesized, kind: str) -> tuple[str, dict]:
    ((name, resource),) = synthesized.of_type(kind).items()
    return name, resource["Properties"]


def container(synthesized) -> dict:
    _, task = one(synthesized, "AWS::ECS::TaskDefinition")
    (found,) = task["ContainerDefinitions"]
    return found


def test_the_default_stack_deploys_no_proxy(synthesized):
    for kind in PROXY_KINDS:
        assert synthesized.of_type(kind) == {}, kind
    assert "GrpcProxyEndpoint" not in synthesized.template["Outputs"]


def test_the_option_needs_a_certificate_for_the_listener():
    with pytest.raises(ValidationError, match="grpc_proxy_certificate_arn"):
        from_context({"grpc_proxy": "true"}.get)
    with pytest.raises(ValidationError):
        from_context({**PROXY_CONTEXT, "grpc_proxy_certificate_arn": "not-an-arn"}.get)


def test_the_tasks_run_on_fargate_in_the_private_subnets(synthesized_with_proxy):
    _, service = one(synthesized_with_proxy, "AWS::ECS::Service")
    network = service["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert service["LaunchType"] == "FARGATE" and network["AssignPublicIp"] == "DISABLED"
    subnets = [render(subnet) for subnet in network["Subnets"]]
    assert subnets and all("privateSubnet" in subnet for subnet in subnets), subnets
    _, task = one(synthesized_with_proxy, "AWS::ECS::TaskDefinition")
    assert task["Cpu"] == str(TASK_CPU) and task["Memory"] == str(TASK_MEMORY_MIB)
    assert task["RuntimePlatform"]["CpuArchitecture"] == "ARM64"


def test_the_tasks_mount_the_functions_access_point(synthesized_with_proxy):
    _, task = one(synthesized_with_proxy, "AWS::ECS::TaskDefinition")
    (volume,) = task["Volumes"]
    efs = volume["EFSVolumeConfiguration"]
    (access_point,) = synthesized_with_proxy.of_type("AWS::EFS::AccessPoint")
    assert render(efs["AuthorizationConfig"]) == {"AccessPointId": f"<{access_point}>", "IAM": "ENABLED"}
    assert efs["TransitEncryption"] == "ENABLED"
    assert container(synthesized_with_proxy)["MountPoints"] == [
        {"ContainerPath": EFS_MOUNT, "ReadOnly": False, "SourceVolume": volume["Name"]}
    ]


def test_the_tasks_run_with_the_store_functions_settings(synthesized_with_proxy, functions_by_name):
    environment = {item["Name"]: item["Value"] for item in container(synthesized_with_proxy)["Environment"]}
    _, produce = functions_by_name["produce"]
    functions_settings = {
        name: value for name, value in produce["Environment"]["Variables"].items() if name.startswith("TIDEMQ_")
    }
    del functions_settings["TIDEMQ_AUTH_KEY"]  # the tasks get it as a secret
    assert environment["TIDEMQ_BACKEND"] == "serverless" and environment["TIDEMQ_PUSH_MODE"] == "lambda"
    assert {name: environment.get(name) for name in functions_settings} == functions_settings
    assert environment["TIDEMQ_HOST"] == "0.0.0.0" and environment["TIDEMQ_GRPC_PORT"] == str(PROXY_PORT)
    (secret,) = container(synthesized_with_proxy)["Secrets"]
    auth_key = storage_secret(synthesized_with_proxy, "AuthKey")
    assert secret["Name"] == "TIDEMQ_AUTH_KEY" and render(secret["ValueFrom"]).startswith(f"<{auth_key}>:key:")


def test_the_image_is_staged_from_the_repository_dockerfile_without_docker(synthesized_with_proxy):
    image = container(synthesized_with_proxy)["Image"]
    assert "cdk-hnb659fds-container-assets" in str(render(image))
    staged = [path for path in synthesized_with_proxy.outdir.glob("asset.*") if (path / "Dockerfile").is_file()]
    (context,) = staged
    assert (context / "Dockerfile").read_bytes() == assets.PROXY_DOCKERFILE.read_bytes()
    assert (context / assets.IMAGE_CODE / "servers" / "grpc_proxy" / "__main__.py").is_file()
    assert (context / assets.IMAGE_PACKAGES / "grpc").is_dir()


def test_the_load_balancer_speaks_grpc_over_tls(synthesized_with_proxy):
    _, listener = one(synthesized_with_proxy, "AWS::ElasticLoadBalancingV2::Listener")
    assert listener["Protocol"] == "HTTPS" and listener["Port"] == 443
    assert listener["Certificates"] == [{"CertificateArn": PROXY_CONTEXT["grpc_proxy_certificate_arn"]}]
    _, group = one(synthesized_with_proxy, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert (group["Protocol"], group["ProtocolVersion"], group["Port"]) == ("HTTP", "GRPC", PROXY_PORT)
    assert group["TargetType"] == "ip"
    assert group["HealthCheckPath"] == HEALTH_CHECK_PATH and group["Matcher"] == {"GrpcCode": "0"}
    _, balancer = one(synthesized_with_proxy, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    attributes = {item["Key"]: item["Value"] for item in balancer["LoadBalancerAttributes"]}
    assert balancer["Scheme"] == "internet-facing" and attributes["access_logs.s3.enabled"] == "true"
    assert "GrpcProxyEndpoint" in synthesized_with_proxy.template["Outputs"]


def test_the_tasks_scale_on_cpu(synthesized_with_proxy):
    _, target = one(synthesized_with_proxy, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, int(PROXY_CONTEXT["grpc_proxy_max_tasks"]))
    _, policy = one(synthesized_with_proxy, "AWS::ApplicationAutoScaling::ScalingPolicy")
    tracking = policy["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == "ECSServiceAverageCPUUtilization"
    assert tracking["TargetValue"] == DeployConfig().grpc_proxy_cpu_target


def test_the_shared_directory_and_the_lambda_endpoint_admit_the_tasks_and_the_tasks_only_the_load_balancer(
    synthesized_with_proxy,
):
    groups = synthesized_with_proxy.of_type("AWS::EC2::SecurityGroup")
    tasks = next(name for name in groups if name.startswith("GrpcProxyTasks"))
    ingress = [rule["Properties"] for rule in synthesized_with_proxy.of_type("AWS::EC2::SecurityGroupIngress").values()]
    from_tasks = {
        (render(rule["GroupId"]), rule["FromPort"])
        for rule in ingress
        if render(rule.get("SourceSecurityGroupId")) == f"<{tasks}.GroupId>"
    }
    assert any(group.startswith("<StorageSegments") and port == 2049 for group, port in from_tasks), from_tasks
    assert any(group.startswith("<NetworkLambdaEndpoint") and port == 443 for group, port in from_tasks), from_tasks
    into_tasks = [rule for rule in ingress if render(rule["GroupId"]) == f"<{tasks}.GroupId>"]
    sources = [(rule["FromPort"], render(rule["SourceSecurityGroupId"])) for rule in into_tasks]
    assert len(sources) == 1 and sources[0][0] == PROXY_PORT and sources[0][1].startswith("<GrpcProxyLoadBalancerSg")


def test_the_task_role_has_the_served_functions_table_access_and_nothing_more(synthesized_with_proxy):
    prefix = f"{DeployConfig().prefix}-"
    tables = {
        resource["Properties"]["TableName"].removeprefix(prefix): name
        for name, resource in synthesized_with_proxy.of_type("AWS::DynamoDB::Table").items()
    }
    granted: dict[str, set[str]] = {table: set() for table in tables}
    actions: set[str] = set()
    for policy, statement in statements(synthesized_with_proxy):
        if not policy.startswith("GrpcProxyTaskTaskRole"):
            continue
        actions |= set(listed(statement["Action"]))
        for resource in listed(statement["Resource"]):
            for table, name in tables.items():
                if render(resource).startswith(f"<{name}.Arn>"):
                    granted[table] |= set(listed(statement["Action"]))
    assert granted == {table: set(PROXY_TABLES.get(table, TableUse.OPEN).value) for table in tables}
    non_table = {action for action in actions if not action.startswith("dynamodb:")}
    assert non_table == {
        "elasticfilesystem:ClientMount",
        "elasticfilesystem:ClientWrite",
        "s3:ListBucket",
        "s3:GetObject",
        "lambda:InvokeFunction",
    }


def test_aws_solutions_checks_pass_with_the_proxy_and_every_suppression_says_why(synthesized_with_proxy):
    assert findings(synthesized_with_proxy, "aws:cdk:error") == []
    assert findings(synthesized_with_proxy, "aws:cdk:warning") == []
    (report,) = synthesized_with_proxy.outdir.glob("AwsSolutions-*-NagReport.csv")
    rows = list(csv.DictReader(report.open()))
    assert {row["Compliance"] for row in rows} <= {"Compliant", "Suppressed"}
    checked = {row["Resource ID"] for row in rows}
    assert any("/GrpcProxy/" in resource for resource in checked)
    for row in rows:
        if row["Compliance"] == "Suppressed":
            assert len(row["Exception Reason"].split()) >= 8, row


def test_no_policy_grants_a_wildcard_action_on_a_data_resource_with_the_proxy(synthesized_with_proxy):
    least_privilege.test_no_policy_grants_a_wildcard_action_on_a_data_resource(synthesized_with_proxy)


def test_only_actions_without_resource_level_permissions_name_every_resource(synthesized_with_proxy):
    everywhere = {
        action
        for policy, statement in statements(synthesized_with_proxy)
        if not policy.startswith(least_privilege.CDK_SINGLETONS) and "*" in listed(statement["Resource"])
        for action in listed(statement["Action"])
    }
    assert everywhere <= least_privilege.WITHOUT_RESOURCE_LEVEL | {"ecr:GetAuthorizationToken"}, everywhere
