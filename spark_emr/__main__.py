"""Run the Spark jobs: here (`spark-submit --master local[2]` with this interpreter for the Python workers), or as
EMR Serverless job runs (`--emr`) of the package built for EMR (`package`) and uploaded to S3 (`upload`).

    python -m spark_emr list                              # the jobs
    python -m spark_emr run export --bucket tidemq-tier --topic orders --output /tmp/orders
    python -m spark_emr run retention --help              # a job's own arguments
    python -m spark_emr run --master 'local[4]' retention --dynamodb-prefix tidemq --bucket tidemq-tier
    python -m spark_emr package                           # dist/spark/: entry points, code zip, environment archive
    python -m spark_emr upload                            # dist/spark/ to TIDEMQ_EMR_PACKAGE_URI
    python -m spark_emr run --emr retention --dynamodb-prefix tidemq --bucket tidemq-tier
    python -m spark_emr follow JOB_RUN_ID                 # a run started before, to its end

S3, DynamoDB and EMR Serverless are reached as this process reaches them (`AWS_ENDPOINT_URL`: a moto server,
LocalStack, or AWS itself when unset). A local run's exit code is spark-submit's; an EMR run's is 0 when it ends in
SUCCESS, 1 when it ends otherwise or cannot start, 2 when its settings are missing (TIDEMQ_EMR_APPLICATION_ID,
TIDEMQ_EMR_ROLE_ARN, TIDEMQ_EMR_PACKAGE_URI). A failed step prints one line on stderr saying which.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import ValidationError

from shared.settings import EmrPlatform, Settings

from .emr import EmrError, SettingsMissing, follow, required, start_run
from .package import JOBS, PackageError, PackageUri, Target, build, jobs, progress, upload

DEFAULT_PACKAGE = Path("dist/spark")
DEFAULT_POLL_S = 10.0


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_emr", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the jobs")
    run = commands.add_parser("run", help="run a job: spark-submit here, or an EMR Serverless job run (--emr)")
    where = run.add_mutually_exclusive_group()
    where.add_argument("--master", default="local[2]", help="Spark master of a local run (default local[2])")
    where.add_argument("--emr", action="store_true", help="start an EMR Serverless job run and follow it to its end")
    run.add_argument("--poll-s", type=float, default=DEFAULT_POLL_S, help="--emr: seconds between two reads")
    run.add_argument("job", choices=jobs(), help="the job")
    run.add_argument("arguments", nargs=argparse.REMAINDER, help="the job's own arguments (see its --help)")
    watch = commands.add_parser("follow", help="follow an EMR Serverless job run to its end")
    watch.add_argument("--poll-s", type=float, default=DEFAULT_POLL_S, help="seconds between two reads")
    watch.add_argument("job_run_id", help="the job run (of TIDEMQ_EMR_APPLICATION_ID)")
    packaging = commands.add_parser("package", help="build what EMR Serverless runs (make spark-package)")
    packaging.add_argument("--output", type=Path, default=DEFAULT_PACKAGE, help=f"default {DEFAULT_PACKAGE}")
    platforms = [platform.value for platform in EmrPlatform]
    packaging.add_argument("--platform", choices=platforms, help="default TIDEMQ_EMR_PLATFORM (aarch64)")
    packaging.add_argument("--python-version", help="major.minor; default TIDEMQ_EMR_PYTHON_VERSION (3.11)")
    put = commands.add_parser("upload", help="upload a built package to TIDEMQ_EMR_PACKAGE_URI")
    put.add_argument("--package", type=Path, default=DEFAULT_PACKAGE, help=f"default {DEFAULT_PACKAGE}")
    return parser.parse_args(argv)


def run_here(args: argparse.Namespace) -> int:
    submit = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
    command = [submit, "--master", args.master, str(JOBS / f"{args.job}.py"), *args.arguments]
    return subprocess.call(command, env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def build_package(settings: Settings, args: argparse.Namespace) -> int:
    try:
        platform = EmrPlatform(args.platform or settings.emr_platform)
        target = Target(platform, args.python_version or settings.emr_python_version)
    except ValueError as error:
        progress(f"spark_emr: {error}")
        return 2
    build(args.output, target, progress)
    progress(f"package: done: {args.output} for {target.platform}, Python {target.python_version}")
    return 0


def run_on_emr(settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "run":
        application_id, run_id = start_run(settings, args.job, args.arguments)
        progress(f"emr: started {args.job} as job run {run_id} of application {application_id}")
    else:
        [application_id], run_id = required(settings, "emr_application_id"), args.job_run_id
    try:
        run = follow(application_id, run_id, args.poll_s, progress)
    except KeyboardInterrupt:
        progress(f"emr: stopped following job run {run_id}, which goes on (python -m spark_emr follow {run_id})")
        return 130
    if run["state"] != "SUCCESS":
        progress(f"emr: job run {run_id} ended {run['state']}: {run.get('stateDetails') or 'no details'}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.command == "list":
        print("\n".join(jobs()))
        return 0
    if args.command == "run" and not args.emr:
        return run_here(args)
    try:
        settings = Settings()
    except ValidationError as error:
        problem = error.errors()[0]
        progress(f"spark_emr: TIDEMQ_{str(problem['loc'][0]).upper()}: {problem['msg']}")
        return 2
    try:
        if args.command == "package":
            return build_package(settings, args)
        if args.command == "upload":
            [package_uri] = required(settings, "emr_package_uri")
            upload(args.package, PackageUri.parse(package_uri), progress)
            return 0
        return run_on_emr(settings, args)
    except SettingsMissing as error:
        progress(f"spark_emr: {error}")
        return 2
    except PackageError as error:
        progress(str(error))
        return 1
    except EmrError as error:
        progress(f"emr: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
