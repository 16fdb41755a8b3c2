"""cdk-nag's AwsSolutions rules, run on the synthesized app (the app adds them itself, so `make synth` runs them too):
no finding left unsuppressed, and each suppression with its reason."""

from __future__ import annotations

import csv

from infra_cdk.config import DeployConfig


def findings(synthesized, kind: str) -> list[str]:
    entries = synthesized.artifact.find_metadata_by_type(kind)
    return [str(entry.data) for entry in entries if "AwsSolutions-" in str(entry.data)]


def test_aws_solutions_checks_find_no_unsuppressed_error_or_warning(synthesized):
    assert findings(synthesized, "aws:cdk:error") == []
    assert findings(synthesized, "aws:cdk:warning") == []


def test_the_checks_ran_and_every_suppression_says_why(synthesized):
    (report,) = synthesized.outdir.glob(f"AwsSolutions-*{DeployConfig().stack_name}-NagReport.csv")
    rows = list(csv.DictReader(report.open()))
    assert len(rows) > 50  # the rules did look at the stack
    assert {row["Compliance"] for row in rows} <= {"Compliant", "Suppressed"}
    for row in rows:
        if row["Compliance"] == "Suppressed":
            assert len(row["Exception Reason"].split()) >= 8, row
