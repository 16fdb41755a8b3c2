"""Alarms on what an operator must act on, to one topic, and a dashboard of the same figures; the figures are ones
the functions emit."""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk.assertions import Template

from infra_cdk.config import DeployConfig
from infra_cdk.monitoring import TIDEMQ_METRICS
from tests.infra.cloud import render

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"


def test_alarms_cover_errors_throttles_upload_lag_push_failures_dead_letters_and_job_runs(synthesized):
    alarms = {
        r["Properties"]["AlarmName"]: r["Properties"] for r in synthesized.of_type("AWS::CloudWatch::Alarm").values()
    }
    prefix = DeployConfig().prefix
    expected = {
        f"{prefix}-{name}-errors"
        for name in ("admin", "produce", "consume", "kv", "console", "push", "maintenance", "authorizer")
    }
    expected |= {
        f"{prefix}-{name}-throttles"
        for name in ("admin", "produce", "consume", "kv", "console", "maintenance", "authorizer")
    }
    expected |= {
        f"{prefix}-{name}"
        for name in (
            "push-dropped-events",
            "upload-lag",
            "maintenance-failing",
            "push-dead-lettered",
            "push-failing-calls",
            "dead-letters",
            "job-runs-failed",
            "api-5xx",
        )
    }
    assert set(alarms) == expected
    (topic,) = synthesized.of_type("AWS::SNS::Topic")
    for name, alarm in alarms.items():
        assert [render(action) for action in alarm["AlarmActions"]] == [f"<{topic}>"], name
        assert alarm["TreatMissingData"] == "notBreaching"
    assert alarms[f"{prefix}-job-runs-failed"]["Namespace"] == "AWS/EMRServerless"


def test_the_dashboard_shows_every_alarm(synthesized):
    template = Template.from_json(synthesized.template)
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    (dashboard,) = synthesized.of_type("AWS::CloudWatch::Dashboard").values()
    body = render(dashboard["Properties"]["DashboardBody"])
    for alarm in synthesized.of_type("AWS::CloudWatch::Alarm"):
        assert f"<{alarm}.Arn>" in body
    for metric in TIDEMQ_METRICS:
        assert f'"{metric}"' in body


def test_the_alarmed_metrics_are_ones_the_functions_emit():
    source = "\n".join(path.read_text() for path in FUNCTIONS_DIR.rglob("*.py"))
    emitted = set(re.findall(r'"([A-Z][A-Za-z]+)"', source))
    assert set(TIDEMQ_METRICS) <= emitted
