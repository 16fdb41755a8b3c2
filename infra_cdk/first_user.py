"""`make first-user`: the first super user of a deployed stack, into a credentials file.

It reads the stack's outputs (`BootstrapFunctionName`, `ApiUrl`), invokes the bootstrap function once
(functions/bootstrap/handler.py) with the caller's AWS credentials, and writes what it answers as the `default`
profile of `~/.tidemq/credentials` (or `--credentials PATH`), readable by its owner only, with the API's URL, so
that `tidemq` and the SDK use it as they are. A store that has users already gets none: it says so and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import boto3

from tidemq.credentials import DEFAULT_PROFILE, Credentials, write_profile

from .config import DeployConfig

DEFAULT_FILE = Path("~/.tidemq/credentials")


def stack_outputs(stack: str) -> dict[str, str]:
    described = boto3.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}


def invoke(function: str) -> dict[str, Any]:
    answer = boto3.client("lambda").invoke(FunctionName=function, Payload=b"{}")
    payload = json.loads(answer["Payload"].read() or b"{}")
    if answer.get("FunctionError"):
        raise RuntimeError(f"{function} failed: {payload.get('errorMessage', payload)}")
    return payload


def save(answer: dict[str, Any], url: str, path: Path, profile: str = DEFAULT_PROFILE) -> str:
    """Write the bootstrap function's answer as `profile` of `path`; what to tell the operator."""
    if not answer.get("created"):
        raise RuntimeError(answer.get("reason") or f"no user made: {answer}")
    credentials = Credentials(answer["user"], answer["secret_key"], url)
    comment = f"TideMQ credentials of super user {credentials.access_key!r}, made by the bootstrap function."
    write_profile(path, credentials, profile, comment=comment)
    return f"super user {credentials.access_key!r} made; its credentials are in {path} (readable by you only)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra_cdk.first_user", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default=DeployConfig.model_fields["stack_name"].default, help="the stack's name")
    parser.add_argument("--credentials", type=Path, default=DEFAULT_FILE, help="where to write (default %(default)s)")
    parser.add_argument("--profile", default=DEFAULT_PROFILE, help="the profile to write (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        outputs = stack_outputs(args.stack)
        answer = invoke(outputs["BootstrapFunctionName"])
        print(save(answer, outputs["ApiUrl"], args.credentials.expanduser(), args.profile))
    except Exception as error:  # one line for the operator, as the CLI does
        print(f"first-user: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
