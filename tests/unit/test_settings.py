"""One settings model, read from TIDEMQ_* variables, every field documented on the settings page (docs/settings.md)."""

from __future__ import annotations

from pathlib import Path

from shared.settings import Settings
from tidemq_store import FlushDiskType

SETTINGS_PAGE = (Path(__file__).parents[2] / "docs" / "settings.md").read_text()


def test_every_setting_is_documented_in_the_readme():
    missing = [name for name in Settings.model_fields if f"`TIDEMQ_{name.upper()}`" not in SETTINGS_PAGE]
    assert missing == []


def test_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TIDEMQ_PORT", "9999")
    monkeypatch.setenv("TIDEMQ_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEMQ_FLUSH_DISK_TYPE", "ASYNC")
    settings = Settings()
    assert (settings.port, settings.home, settings.flush_disk_type) == (9999, tmp_path, FlushDiskType.ASYNC)
