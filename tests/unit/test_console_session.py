"""The console's session key: set, it signs; unset, a process makes its own, except in Lambda, where the console
function refuses to start without one (its instances must accept each other's cookies)."""

from __future__ import annotations

import pytest

from functions.console import session
from shared.settings import Settings


def test_a_lambda_function_without_a_session_key_refuses_to_start(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-console")
    with pytest.raises(RuntimeError, match="TIDEMQ_CONSOLE_SESSION_KEY must be set in Lambda"):
        session.session_key(Settings())


def test_a_set_key_is_used_and_a_short_one_refused(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "tidemq-console")
    assert session.session_key(Settings(console_session_key="k" * 40)) == b"k" * 40
    with pytest.raises(ValueError, match="at least 32"):
        Settings(console_session_key="short")


def test_locally_one_key_is_made_per_process(monkeypatch):
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    made = session.session_key(Settings())
    assert len(made) == session.KEY_BYTES and session.session_key(Settings()) == made
