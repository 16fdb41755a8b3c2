"""The tables are the pynamodb models' own; EFS, the buckets and the tables are encrypted, private and recoverable."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from infra_cdk.config import DeployConfig
from infra_cdk.storage import model_schema, table_models, ttl_attribute
from tests.infra.cloud import render, storage_secret


def as_set(items: list[dict]) -> set[tuple]:
    return {tuple(sorted(item.items())) for item in items}


def test_the_tables_are_the_pynamodb_models_with_their_keys_and_indexes(synthesized):
    tables = {
        r["Properties"]["TableName"]: r["Properties"] for r in synthesized.of_type("AWS::DynamoDB::Table").values()
    }
    models = table_models(DeployConfig().prefix)
    assert set(tables) == {model.Meta.table_name for model in models.values()}
    assert {"topics", "groups", "users", "offsets", "queues", "batches"} <= set(models)
    for model in models.values():
        schema, table = model_schema(model), tables[model.Meta.table_name]
        assert as_set(table["KeySchema"]) == as_set(schema["key_schema"]), model.Meta.table_name
        assert as_set(table["AttributeDefinitions"]) == as_set(schema["attribute_definitions"]), model.Meta.table_name
        deployed_indexes = {
            index["IndexName"]: (as_set(index["KeySchema"]), index["Projection"]["ProjectionType"])
            for index in table.get("GlobalSecondaryIndexes", [])
        }
        model_indexes = {
            index["index_name"]: (as_set(index["key_schema"]), index["projection"]["ProjectionType"])
            for index in schema["global_secondary_indexes"]
        }
        assert deployed_indexes == model_indexes, model.Meta.table_name
        assert "LocalSecondaryIndexes" not in table
        ttl = table.get("TimeToLiveSpecification")
        assert (ttl and ttl["AttributeName"]) == ttl_attribute(model), model.Meta.table_name  # DynamoDB expires
    assert ttl_attribute(models["kv_changes"]) == "purge_at"  # KV history and expired keys go by TTL


def test_the_tables_are_on_demand_recoverable_and_encrypted(synthesized):
    template = Template.from_json(synthesized.template)
    template.all_resources_properties(
        "AWS::DynamoDB::Table",
        {
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "SSESpecification": {"SSEEnabled": True},
            "DeletionProtectionEnabled": True,
        },
    )
    template.all_resources("AWS::DynamoDB::Table", {"DeletionPolicy": "Retain"})


def test_every_bucket_is_encrypted_private_tls_only_and_aborts_incomplete_uploads(synthesized):
    template = Template.from_json(synthesized.template)
    template.all_resources_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [Match.object_like({"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}})]
                )
            },
        },
    )
    buckets = set(synthesized.of_type("AWS::S3::Bucket"))
    tls_only = set()
    for policy in synthesized.of_type("AWS::S3::BucketPolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                tls_only.add(render(policy["Properties"]["Bucket"]).strip("<>"))
    assert tls_only == buckets


def test_the_data_bucket_is_not_versioned_and_logs_its_access(synthesized):
    (data,) = [r for name, r in synthesized.of_type("AWS::S3::Bucket").items() if name.startswith("StorageData")]
    assert "VersioningConfiguration" not in data["Properties"]  # docs/deploy.md: why
    assert data["Properties"]["LoggingConfiguration"]["LogFilePrefix"] == "data/"
    assert data["DeletionPolicy"] == "Retain"


def test_the_file_system_is_encrypted_and_reached_only_through_its_access_point(synthesized):
    template = Template.from_json(synthesized.template)
    template.has_resource_properties("AWS::EFS::FileSystem", {"Encrypted": True})
    template.has_resource_properties(
        "AWS::EFS::AccessPoint",
        {"PosixUser": Match.object_like({"Uid": Match.any_value()}), "RootDirectory": Match.any_value()},
    )
    (file_system,) = synthesized.of_type("AWS::EFS::FileSystem").values()
    for statement in file_system["Properties"]["FileSystemPolicy"]["Statement"]:
        if statement["Effect"] == "Allow" and statement.get("Principal") == {"AWS": "*"}:
            # nobody mounts it anonymously: ClientMount is the functions' roles' own (condition: the access point)
            assert "elasticfilesystem:ClientMount" not in statement["Action"]
    (functions_sg,) = [
        name for name in synthesized.of_type("AWS::EC2::SecurityGroup") if name.startswith("NetworkFunctions")
    ]
    nfs = [
        rule["Properties"]
        for rule in synthesized.of_type("AWS::EC2::SecurityGroupIngress").values()
        if rule["Properties"]["FromPort"] == 2049
    ]
    assert nfs and all(render(rule["SourceSecurityGroupId"]) == f"<{functions_sg}.GroupId>" for rule in nfs)
    for group in synthesized.of_type("AWS::EC2::SecurityGroup").values():
        for rule in group["Properties"].get("SecurityGroupIngress", []):
            assert rule.get("CidrIp") != "0.0.0.0/0", rule


def test_the_auth_key_is_generated_at_deploy_time_and_never_in_the_template(synthesized, functions_by_name):
    secret_id = storage_secret(synthesized, "AuthKey")
    secret = synthesized.of_type("AWS::SecretsManager::Secret")[secret_id]
    assert secret["Properties"]["GenerateSecretString"]["PasswordLength"] == 42
    for _, properties in functions_by_name.values():
        key = render(properties["Environment"]["Variables"]["TIDEMQ_AUTH_KEY"])
        assert key == f"{{{{resolve:secretsmanager:<{secret_id}>:SecretString:key::}}}}A="
