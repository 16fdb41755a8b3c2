"""Each function: python3.12 on arm64 with both layers, its environment read by the settings model, stated memory
and timeout; push with reserved concurrency 1; maintenance on its EventBridge schedules."""

from __future__ import annotations

import base64
import json
import os
import typing

import pytest
from aws_cdk.assertions import Template

from functions.maintenance.handler import MaintenanceEvent
from functions.push.handler import RESERVE_MS
from functions.routes import FUNCTIONS as API_FUNCTIONS
from infra_cdk.config import API_TIMEOUT_S, DeployConfig
from infra_cdk.functions import EFS_MOUNT
from shared.settings import Settings
from tests.infra.cloud import render

EVERY_FUNCTION = (*API_FUNCTIONS, "console", "push", "maintenance", "authorizer", "bootstrap")
USERS_ONLY = ("authorizer", "bootstrap")
SETTING_NAMES = {f"TIDEMQ_{name.upper()}" for name in Settings.model_fields}
STAND_INS = {
    "StorageData": "tidemq-data-1a2b3c",
    "StorageAuthKey": base64.b64encode(bytes(32)).decode(),
    "StorageConsoleSessionKey": "k" * 64,
}
"""What a deployment puts where the template holds a reference (a bucket name, the auth key)."""


def deployed_value(value) -> str:
    if isinstance(value, str):
        return value
    written = render(value)
    for logical_id, stand_in in STAND_INS.items():
        if logical_id in written:
            return stand_in
    raise AssertionError(f"no stand-in for {written}")


def test_there_is_one_function_per_handler(functions_by_name):
    assert set(functions_by_name) == set(EVERY_FUNCTION)


@pytest.mark.parametrize("name", EVERY_FUNCTION)
def test_each_function_runs_python312_on_arm64_with_the_engine_and_dependencies_layers(
    synthesized, functions_by_name, name
):
    _, properties = functions_by_name[name]
    assert properties["Runtime"] == "python3.12"
    assert properties["Architectures"] == ["arm64"]
    assert properties["Handler"] == f"functions.{name}.handler.lambda_handler"
    layers = {render(layer).strip("<>") for layer in properties["Layers"]}
    layer_descriptions = {
        logical_id: resource["Properties"]["Description"]
        for logical_id, resource in synthesized.of_type("AWS::Lambda::LayerVersion").items()
        if logical_id in layers
    }
    assert len(layer_descriptions) == 2
    assert any("store engine" in description for description in layer_descriptions.values())
    assert any("Third-party" in description for description in layer_descriptions.values())
    assert properties["MemorySize"] >= 256
    assert properties["Timeout"] >= 1


@pytest.mark.parametrize("name", EVERY_FUNCTION)
def test_each_function_environment_is_read_by_the_settings_model(functions_by_name, name, monkeypatch):
    variables = functions_by_name[name][1]["Environment"]["Variables"]
    tidemq = {key: value for key, value in variables.items() if key.startswith("TIDEMQ_")}
    assert set(tidemq) <= SETTING_NAMES
    assert set(variables) - set(tidemq) <= {
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_METRICS_NAMESPACE",
        "POWERTOOLS_LOG_LEVEL",
    }
    for key in [key for key in os.environ if key.startswith("TIDEMQ_")]:
        monkeypatch.delenv(key)
    for key, value in tidemq.items():
        monkeypatch.setenv(key, deployed_value(value))
    settings = Settings()  # as the function reads its environment at start
    assert settings.backend == "serverless"
    assert settings.dynamodb_prefix == DeployConfig().prefix
    assert settings.auth == "on" and settings.auth_key is not None
    assert settings.local_aws == "off"
    assert str(settings.home).startswith("/tmp/")
    if name in USERS_ONLY:
        assert settings.tier == "off"
    else:
        assert settings.tier == "s3" and settings.tier_bucket == STAND_INS["StorageData"]
        assert str(settings.efs_path) == EFS_MOUNT
        assert settings.push_mode == "lambda" and settings.push_function == functions_by_name["push"][1]["FunctionName"]


def test_the_functions_that_share_the_directory_mount_it_through_the_access_point(synthesized, functions_by_name):
    ((access_point, _),) = synthesized.of_type("AWS::EFS::AccessPoint").items()
    for name in ("admin", "produce", "consume", "console", "push", "maintenance"):
        (mount,) = functions_by_name[name][1]["FileSystemConfigs"]
        assert mount["LocalMountPath"] == EFS_MOUNT
        assert f"<{access_point}>" in render(mount["Arn"])
        assert functions_by_name[name][1]["VpcConfig"]["SubnetIds"]
    for name in USERS_ONLY:
        assert "FileSystemConfigs" not in functions_by_name[name][1] and "VpcConfig" not in functions_by_name[name][1]


def test_the_bootstrap_function_is_reached_by_no_route_and_writes_only_the_users_table(synthesized, functions_by_name):
    bootstrap_id, _ = functions_by_name["bootstrap"]
    integrations = synthesized.of_type("AWS::ApiGatewayV2::Integration").values()
    assert integrations and all(f"<{bootstrap_id}" not in str(render(i["Properties"])) for i in integrations)
    permissions = synthesized.of_type("AWS::Lambda::Permission").values()
    assert not [p for p in permissions if f"<{bootstrap_id}" in str(render(p["Properties"]))]
    outputs = synthesized.template["Outputs"]
    assert render(outputs["BootstrapFunctionName"]["Value"]) == f"<{bootstrap_id}>"


def test_timeouts_fit_the_api_and_push_delivery(functions_by_name):
    for name in (*API_FUNCTIONS, "console"):
        assert functions_by_name[name][1]["Timeout"] <= API_TIMEOUT_S
    push_timeout_s = functions_by_name["push"][1]["Timeout"]
    assert push_timeout_s > Settings.model_fields["push_target_timeout_s"].default + RESERVE_MS / 1000


def test_the_push_function_has_reserved_concurrency_one_and_a_dead_letter_queue(synthesized, functions_by_name):
    _, push = functions_by_name["push"]
    assert push["ReservedConcurrentExecutions"] == 1
    (queue,) = synthesized.of_type("AWS::SQS::Queue")
    assert render(push["DeadLetterConfig"]["TargetArn"]) == f"<{queue}.Arn>"
    for name, (_, properties) in functions_by_name.items():
        if name != "push":
            assert "ReservedConcurrentExecutions" not in properties, name


def test_the_maintenance_function_runs_on_its_schedules(synthesized, functions_by_name):
    maintenance_id, _ = functions_by_name["maintenance"]
    jobs = {}
    for rule in synthesized.of_type("AWS::Events::Rule").values():
        (target,) = rule["Properties"]["Targets"]
        assert render(target["Arn"]) == f"<{maintenance_id}.Arn>"
        event = json.loads(target["Input"]) if "Input" in target else {}  # none: EventBridge's scheduled event
        jobs[MaintenanceEvent.model_validate(event).job] = rule["Properties"]["ScheduleExpression"]
        assert "DeadLetterConfig" in target
    assert set(jobs) == set(typing.get_args(MaintenanceEvent.model_fields["job"].annotation))
    assert jobs == {
        "upload": "rate(1 minute)",
        "retention": "rate(1 hour)",
        "timers": "rate(1 minute)",
        "transactions": "rate(1 minute)",
        "console": "rate(1 minute)",
    }


def test_the_vpc_has_no_nat_gateway_and_gateway_endpoints_for_s3_and_dynamodb(synthesized):
    template = Template.from_json(synthesized.template)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    endpoints = [render(resource["Properties"]) for resource in synthesized.of_type("AWS::EC2::VPCEndpoint").values()]
    kinds = {(e.get("VpcEndpointType", "Gateway"), e["ServiceName"].rsplit(".", 1)[-1]) for e in endpoints}
    assert kinds == {("Gateway", "s3"), ("Gateway", "dynamodb"), ("Interface", "lambda")}
