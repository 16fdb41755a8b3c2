"""Run a Spark job on this machine: `spark-submit --master local[2]` with this interpreter for the Python workers.

    python -m spark_emr list                              # the jobs
    python -m spark_emr run export --bucket tidemq-tier --topic orders --output /tmp/orders
    python -m spark_emr run retention --help              # a job's own arguments
    python -m spark_emr run --master 'local[4]' retention --dynamodb-prefix tidemq --bucket tidemq-tier

S3 and DynamoDB are reached as this process reaches them (`AWS_ENDPOINT_URL`: a moto server, LocalStack, or AWS
itself when unset). The exit code is spark-submit's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

JOBS = Path(__file__).with_name("jobs")


def jobs() -> list[str]:
    return sorted(path.stem for path in JOBS.glob("*.py") if not path.stem.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_emr", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list the jobs")
    run = commands.add_parser("run", help="run a job with spark-submit")
    run.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    run.add_argument("job", choices=jobs(), help="the job")
    run.add_argument("arguments", nargs=argparse.REMAINDER, help="the job's own arguments (see its --help)")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(jobs()))
        return 0
    submit = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
    command = [submit, "--master", args.master, str(JOBS / f"{args.job}.py"), *args.arguments]
    return subprocess.call(command, env={**os.environ, "PYSPARK_PYTHON": sys.executable})


if __name__ == "__main__":
    sys.exit(main())
