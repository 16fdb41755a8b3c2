"""The deployment's choices: CDK context read as the CLI passes it (strings), checked, and each documented."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from infra_cdk.config import DeployConfig, from_context

DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def test_every_context_setting_is_documented():
    documented = DEPLOY_DOC.read_text()
    for name in DeployConfig.model_fields:
        assert f"| `{name}` |" in documented, name


def test_context_given_on_the_command_line_is_converted():
    given = {"nat_gateways": "1", "retain_data": "false", "memory_mb": "produce=2048,consume=512", "authorizer": "off"}
    config = from_context(given.get)
    assert config.nat_gateways == 1 and config.retain_data is False and config.authorizer == "off"
    assert config.memory("produce") == 2048 and config.memory("consume") == 512 and config.memory("admin") == 1024
    assert from_context({}.get) == DeployConfig()


@pytest.mark.parametrize(
    "given",
    [
        {"push_timeout_s": "20"},  # shorter than one target call and the hand-over
        {"memory_mb": "pusher=512"},
        {"log_retention_days": "31"},
        {"prefix": "Bad_Prefix"},
        {"max_request_bytes": str(6 * 1024 * 1024)},  # base64 of it would not fit Lambda's payload
    ],
)
def test_a_setting_that_cannot_work_is_refused_at_synth(given):
    with pytest.raises(ValidationError):
        from_context(given.get)
