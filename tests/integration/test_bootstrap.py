"""The first super user of a deployed stack (functions/bootstrap, `make first-user`): the bootstrap function, on
the serverless backend configured as infra_cdk configures it (users only: no cold tier, a scratch directory), makes
`admin` once and answers its secret; after that it makes nobody. `infra_cdk.first_user.save` writes the answer
as a credentials profile the SDK reads."""

from __future__ import annotations

import stat
import uuid

import pytest

from functions import store as store_module
from functions.api.auth import authenticator
from functions.bootstrap.handler import lambda_handler
from infra_cdk.first_user import save
from servers.adapter import LocalContext
from shared.settings import get_settings
from tidemq.credentials import read_profile
from tidemq_protocol.acl import UserType


@pytest.fixture
def deployed_settings(tmp_path, monkeypatch, aws_env):
    for name, value in {
        "TIDEMQ_BACKEND": "serverless",
        "TIDEMQ_LOCAL_AWS": "off",
        "TIDEMQ_AUTH": "on",
        "TIDEMQ_HOME": str(tmp_path / "home"),
        "TIDEMQ_EFS_PATH": str(tmp_path / "home" / "efs"),
        "TIDEMQ_TIER": "off",
        "TIDEMQ_DYNAMODB_PREFIX": f"b{uuid.uuid4().hex[:8]}",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield
    store_module.close_store()
    get_settings.cache_clear()


def bootstrap() -> dict:
    return lambda_handler({}, LocalContext("tidemq-bootstrap", "test-request"))


def test_the_first_invocation_makes_a_super_user_whose_secret_authenticates_and_later_ones_make_none(
    deployed_settings, tmp_path
):
    made = bootstrap()
    assert (made["created"], made["user"]) == (True, "admin")
    record, secret = authenticator().user("admin")
    assert record.user_type is UserType.SUPER and secret == made["secret_key"]

    again = bootstrap()
    assert again["created"] is False and "has users already" in again["reason"]
    assert "secret_key" not in again

    path = tmp_path / "operator" / "credentials"
    assert "admin" in save(made, "https://api.example", path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = read_profile(path)
    assert (saved.access_key, saved.secret_key, saved.url) == ("admin", made["secret_key"], "https://api.example")
    with pytest.raises(RuntimeError, match="has users already"):
        save(again, "https://api.example", tmp_path / "other")
    assert not (tmp_path / "other").exists()
