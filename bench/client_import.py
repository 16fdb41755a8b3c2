"""How long the client takes to start: the wall time of a new interpreter importing it, and of `tidemq --help`.

Each is a subprocess, run `--runs` times (the commands in turn, so a busy moment hits them alike) after one
unmeasured run, which writes any bytecode the install left out (PYTHONDONTWRITEBYTECODE is dropped for them: a
user's second run finds it); one JSON line per command:

    {"bench": "client_import", "what": "import tidemq", "median_s": ..., "p90_s": ..., "runs": 21, "python": ...}

`what` is one of: `python` (the interpreter alone: the floor under the others), `import tidemq` (the package,
whose names load on first use), `from tidemq import Producer` (what a producing script pays), `tidemq --help` (the
command line, its subcommands imported only when run). The target for `import tidemq` is under 0.15 s.

    .venv/bin/python bench/client_import.py                               # this interpreter (the dev venv)
    .venv/bin/python bench/client_import.py --python /tmp/client/bin/python  # a venv holding the client alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def commands(python: Path) -> dict[str, list[str]]:
    """What is timed, by name: Python statements run by `python`, and the `tidemq` script beside it."""
    return {
        "python": [str(python), "-c", "pass"],
        "import tidemq": [str(python), "-c", "import tidemq"],
        "from tidemq import Producer": [str(python), "-c", "from tidemq import Producer"],
        "tidemq --help": [str(python.parent / "tidemq"), "--help"],
    }


def wall_time(command: list[str], cwd: str) -> float:
    """Seconds from starting `command` to its exit; it must succeed."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, default=Path(sys.executable), help="the interpreter [default: this]")
    parser.add_argument("--runs", type=int, default=21, help="measured runs of each command [default: 21]")
    args = parser.parse_args()
    timed = commands(args.python)
    samples: dict[str, list[float]] = {what: [] for what in timed}
    with tempfile.TemporaryDirectory() as cwd:  # not the repository: `-c` puts the working directory on sys.path
        for command in timed.values():
            wall_time(command, cwd)
        for _ in range(args.runs):
            for what, command in timed.items():
                samples[what].append(wall_time(command, cwd))
    host = {"python": str(args.python), "cpus": os.cpu_count(), "loadavg": round(os.getloadavg()[0], 2)}
    for what, times in samples.items():
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
        line = {"bench": "client_import", "what": what, "median_s": round(statistics.median(times), 4)}
        print(json.dumps({**line, "p90_s": round(p90, 4), "runs": args.runs, **host}), flush=True)


if __name__ == "__main__":
    main()
