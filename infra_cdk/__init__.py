"""AWS CDK app for TideMQ (HTTP API, functions + store_engine layer, EFS, S3, DynamoDB, EMR Serverless).

Built by the infrastructure issue; `cdk.json` already points at `infra_cdk.app`.
"""
