"""Fixtures of the integration tests."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def serverless(tmp_path, open_test_store, aws_env):
    """Open serverless stores sharing one shared directory, DynamoDB prefix and S3 bucket (as concurrent
    Lambda invocations do); keyword arguments override the settings they share."""
    shared = {
        "backend": "serverless",
        "efs_path": tmp_path / "efs",
        "dynamodb_prefix": f"m{uuid.uuid4().hex[:8]}",
        "tier": "s3",
        "tier_bucket": f"tier-{uuid.uuid4().hex[:12]}",
    }
    return lambda **overrides: open_test_store(**(shared | overrides))
