"""Reading a synthesized cloud assembly: its template's resources, the assets staged for them, and template values
with their intrinsic functions written out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import cx_api


@dataclass(frozen=True)
class Synthesized:
    """A synthesized app read back from its directory: the stack's artifact (metadata included) and its template."""

    outdir: Path
    artifact: cx_api.CloudFormationStackArtifact
    template: dict

    @classmethod
    def read(cls, outdir: Path, stack_name: str) -> Synthesized:
        artifact = cx_api.CloudAssembly(str(outdir)).get_stack_by_name(stack_name)
        return cls(outdir, artifact, json.loads((outdir / artifact.template_file).read_text()))

    @property
    def resources(self) -> dict[str, dict]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict]:
        return {name: resource for name, resource in self.resources.items() if resource["Type"] == kind}

    def asset_directory(self, code: dict) -> Path:
        """The staged directory of a function's or layer's code (`Code` / `Content` of the template)."""
        key = code["S3Key"]
        return self.outdir / f"asset.{key.removesuffix('.zip')}"


def storage_secret(synthesized: Synthesized, name: str) -> str:
    """The logical id of the storage construct's secret `name` (AuthKey, ConsoleSessionKey)."""
    (found,) = [
        logical_id
        for logical_id in synthesized.of_type("AWS::SecretsManager::Secret")
        if logical_id.startswith(f"Storage{name}")
    ]
    return found


def render(value: Any) -> Any:
    """A template value with its intrinsic functions written out: {"Ref": "X"} as "<X>", {"Fn::GetAtt": ["X", "Arn"]}
    as "<X.Arn>", Fn::Join joined; what a deployment would substitute stays visible as a placeholder."""
    if isinstance(value, dict) and len(value) == 1:
        ((kind, argument),) = value.items()
        if kind == "Ref":
            return f"<{argument}>"
        if kind == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        if kind == "Fn::Join":
            separator, parts = argument
            return separator.join(str(render(part)) for part in parts)
        if kind == "Fn::Sub":
            return argument if isinstance(argument, str) else argument[0]
    if isinstance(value, dict):
        return {key: render(item) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item) for item in value]
    return value
