"""Least privilege: no `*` action on a data resource, no `*` resource where the ARN is known, and each function with
the table access of infra_cdk/permissions.py and nothing more."""

from __future__ import annotations

import pytest

from infra_cdk.config import DeployConfig
from infra_cdk.permissions import FUNCTION_TABLES, TableUse
from tests.infra.cloud import render

WITHOUT_RESOURCE_LEVEL = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
"""Actions IAM offers on `*` only."""
CDK_SINGLETONS = ("CustomCDKBucketDeployment",)


def statements(synthesized) -> list[tuple[str, dict]]:
    """(policy's logical id, statement) of every identity policy in the template."""
    found = []
    for name, policy in synthesized.of_type("AWS::IAM::Policy").items():
        found += [(name, statement) for statement in policy["Properties"]["PolicyDocument"]["Statement"]]
    for name, role in synthesized.of_type("AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            found += [(name, statement) for statement in inline["PolicyDocument"]["Statement"]]
    return found


def listed(value) -> list:
    return value if isinstance(value, list) else [value]


def data_resources(synthesized) -> set[str]:
    kinds = ("AWS::DynamoDB::Table", "AWS::EFS::FileSystem", "AWS::EFS::AccessPoint", "AWS::SecretsManager::Secret")
    names = {name for kind in kinds for name in synthesized.of_type(kind)}
    return names | {name for name in synthesized.of_type("AWS::S3::Bucket") if name.startswith("StorageData")}


def test_no_policy_grants_a_wildcard_action_on_a_data_resource(synthesized):
    data = data_resources(synthesized)
    for policy, statement in statements(synthesized):
        resources = " ".join(str(render(resource)) for resource in listed(statement["Resource"]))
        touches_data = resources == "*" or any(f"<{name}" in resources for name in data)
        for action in listed(statement["Action"]):
            assert action != "*", policy
            if touches_data:
                assert "*" not in action, (policy, action, resources)


def test_no_policy_of_ours_names_every_resource_where_the_arn_is_known(synthesized):
    for policy, statement in statements(synthesized):
        if policy.startswith(CDK_SINGLETONS) or statement["Effect"] != "Allow":
            continue
        if "*" in listed(statement["Resource"]):
            assert set(listed(statement["Action"])) <= WITHOUT_RESOURCE_LEVEL, (policy, statement["Action"])


def role_policies(synthesized, role_prefix: str) -> list[dict]:
    return [s for policy, s in statements(synthesized) if policy.startswith(role_prefix)]


@pytest.mark.parametrize("function", sorted(FUNCTION_TABLES))
def test_each_function_gets_only_the_table_actions_it_uses(synthesized, function):
    prefix = f"{DeployConfig().prefix}-"
    tables = {
        resource["Properties"]["TableName"].removeprefix(prefix): logical_id
        for logical_id, resource in synthesized.of_type("AWS::DynamoDB::Table").items()
    }
    granted: dict[str, set[str]] = {table: set() for table in tables}
    for statement in role_policies(synthesized, f"Functions{function}role"):
        for resource in listed(statement["Resource"]):
            written = render(resource)
            for table, logical_id in tables.items():
                if written.startswith(f"<{logical_id}.Arn>"):
                    granted[table] |= set(listed(statement["Action"]))
    uses = FUNCTION_TABLES[function]
    assert granted == {table: set(uses.get(table, TableUse.OPEN).value) for table in tables}


def test_the_spark_job_role_reaches_only_the_package_its_logs_and_the_tier(synthesized):
    buckets = {name: f"<{name}.Arn>" for name in synthesized.of_type("AWS::S3::Bucket")}
    (artifacts,) = [arn for name, arn in buckets.items() if name.startswith("StorageArtifacts")]
    (data,) = [arn for name, arn in buckets.items() if name.startswith("StorageData")]
    reached = set()
    for statement in role_policies(synthesized, "PipelineJobRole"):
        reached |= {render(r) for r in listed(statement["Resource"]) if render(r).startswith(tuple(buckets.values()))}
    tier = DeployConfig().tier_prefix
    assert reached == {artifacts, f"{artifacts}/spark/*", f"{artifacts}/emr-logs/*", data, f"{data}/{tier}/*"}
