"""Mutation testing of the record formats (`make mutation`): do the record tests notice every small change to the
package that reads and writes the commit-log records?

    .venv/bin/python -m devtools.mutation               # every mutant (make mutation)
    .venv/bin/python -m devtools.mutation --survivors   # the last run's survivors again, after adding tests
    .venv/bin/python -m devtools.mutation --report      # the last run's results again

cosmic-ray lists every mutant of each of MODULES, every module of the record package (an operator swapped, a
comparison or a number changed, `or` made `and`, a `not` added, ...); each one is written into a copy of the
repository and TESTS are run against it, with the copy's packages imported (IMPORT_PATHS), several copies at once.
A mutant the tests still pass *survived*. The run takes about half an hour on two cores, so `make test` leaves it
out. Mutants inside annotations are skipped: the modules do `from __future__ import annotations`, so they are never
evaluated and no test could tell them apart.

Survivors listed in EQUIVALENTS (devtools/record_mutants.toml: a mutant that behaves exactly as the original does,
and why) are reported as such; any other survivor fails the run (exit 1): add the test that tells it apart. The
report gives the score of each module and of all. The checkout itself is never changed (the copies are made from
its files, committed or not, under a temporary directory).
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
RECORD_PACKAGE = "shared/tidemq/src/tidemq_protocol/record"
"""The package under test, relative to the repository: the one place to change when it moves."""
MODULES = sorted(f"{RECORD_PACKAGE}/{module.name}" for module in (REPO / RECORD_PACKAGE).glob("*.py"))
"""The modules mutated: every module of RECORD_PACKAGE, so that a new one is never left out."""
PACKAGES = ("tidemq_protocol", "tidemq_store")
IMPORT_PATHS = ("shared/tidemq/src", "layers/store_engine", ".")
"""Where a copy's PACKAGES are imported from (before the checkout's own editable installs): the tests must run
against the copy's mutated modules, never the checkout's."""
TESTS = (
    "tests/unit/test_record.py",
    "tests/unit/test_record_checks.py",
    "tests/unit/test_golden_formats.py",
    "tests/integration/test_record_versions.py",
    "tests/unit/test_sql_filter.py",  # what a SQL92 filter peeks at in a record (properties.py, reader.py)
)
EQUIVALENTS = REPO / "devtools" / "record_mutants.toml"
SESSION = REPO / "build" / "mutation" / "record.sqlite"


class Mutant(NamedTuple):
    """One mutant as its diff shows it: the module (its name in the record package), the operator, the function it
    is in ("" at module level), and the line before and after (stripped). Line numbers are left out: they change
    with every edit of the module."""

    module: str
    operator: str
    function: str
    line: str
    mutated: str


def module_name(module_path: str) -> str:
    """A mutated module's name in the record package (`reader.py`), from its path in the repository."""
    return Path(module_path).relative_to(RECORD_PACKAGE).as_posix()


def mutant_of(mutation, diff: str) -> Mutant:
    """The `Mutant` of a cosmic-ray MutationSpec and its diff."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return Mutant(
        module_name(str(mutation.module_path)),
        mutation.operator_name,
        mutation.definition_name or "",
        " / ".join(removed),
        " / ".join(added),
    )


def known_equivalents() -> dict[Mutant, str]:
    """EQUIVALENTS: each mutant known to behave as the original does, with why."""
    listed = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    fields = Mutant._fields
    return {Mutant(*(entry[field] for field in fields)): entry["why"] for entry in listed}


def copy_repository(target: Path) -> None:
    """The checkout's files (committed or not, less what git ignores) under `target`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def pytest_command() -> str:
    return " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS])


def copy_environment(copy: Path) -> dict[str, str]:
    """The environment a test run in `copy` needs: the copy's packages first, no third-party pytest plugins (the
    record tests use none, and loading schemathesis and hypothesis would double each run)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(copy / path) for path in IMPORT_PATHS),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def enter_copy(copies) -> None:
    """A worker process's start: take a copy of its own and run everything there."""
    copy = Path(copies.get())
    os.chdir(copy)
    os.environ.update(copy_environment(copy))


def run_mutant(mutations, command: str, timeout: float):
    from cosmic_ray.mutating import mutate_and_test

    return mutate_and_test(mutations=mutations, test_command=command, timeout=timeout)


def baseline(copy: Path) -> float:
    """Check the unmutated tests pass in `copy` against the copy's code; return how long they took (s)."""
    environment = copy_environment(copy)
    for package in PACKAGES:
        where = subprocess.run(
            [sys.executable, "-c", f"import {package}; print({package}.__file__)"],
            cwd=copy,
            env=environment,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not Path(where).is_relative_to(copy):
            raise SystemExit(f"the tests would import {package} from {where}, not from the copy in {copy}")
    started = time.monotonic()
    run = subprocess.run(pytest_command().split(), cwd=copy, env=environment, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the tests fail without any mutant:\n{run.stdout[-3000:]}")
    return time.monotonic() - started


def write_config(path: Path, timeout: float) -> None:
    path.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(MODULES)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{pytest_command()}"\n'
        "\n[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) as (line, column in characters) of every annotation in `source` (none unless annotations are
    postponed: only then is no annotation ever evaluated)."""
    tree = ast.parse(source)
    postponed = any(
        isinstance(node, ast.ImportFrom) and node.module == "__future__" and node.names[0].name == "annotations"
        for node in tree.body
    )
    lines = source.splitlines()

    def column(line: int, offset: int) -> int:  # ast counts UTF-8 bytes, cosmic-ray characters
        return len(lines[line - 1].encode()[:offset].decode())

    annotations = [
        annotation
        for node in ast.walk(tree)
        if postponed
        for annotation in (
            getattr(node, "returns", None),
            node.annotation if isinstance(node, ast.arg | ast.AnnAssign) else None,
        )
        if annotation is not None
    ]
    return [
        ((a.lineno, column(a.lineno, a.col_offset)), (a.end_lineno, column(a.end_lineno, a.end_col_offset)))
        for a in annotations
    ]


def skip_annotations(session: Path) -> int:
    """Record every mutant inside an annotation as skipped (as cosmic-ray's own filters do); return how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans: dict[Path, list] = {}
    skipped = WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output="in an annotation, never evaluated")
    with use_db(str(session), WorkDB.Mode.open) as db:
        inside = []
        for item in db.work_items:
            mutation = item.mutations[0]
            if mutation.module_path not in spans:
                spans[mutation.module_path] = annotation_spans((REPO / mutation.module_path).read_text())
            if any(start <= tuple(mutation.start_pos) < end for start, end in spans[mutation.module_path]):
                inside.append(item.job_id)
        db.set_multiple_results(inside, skipped)
    return len(inside)


def reset_survivors(session: Path) -> dict[str, str]:
    """Forget the results of the session's survivors, so that `execute` runs them again; their diffs by job."""
    with sqlite3.connect(session) as db:
        survivors = dict(db.execute("SELECT job_id, diff FROM work_results WHERE test_outcome = 'SURVIVED'"))
        db.executemany("DELETE FROM work_results WHERE job_id = ?", [(job,) for job in survivors])
    return survivors


def check_same_mutants(session: Path, before: dict[str, str]) -> None:
    """A survivor run again must be the same mutant: if a module changed since the session, run it whole."""
    with sqlite3.connect(session) as db:
        after = dict(db.execute("SELECT job_id, diff FROM work_results"))
    changed = [job for job, diff in before.items() if after.get(job) not in (None, diff)]  # None: skipped
    if changed:
        raise SystemExit(f"{RECORD_PACKAGE} changed since the last run ({len(changed)} mutants differ): run it whole")


def execute(session: Path, copies: list[Path], timeout: float) -> None:
    """Run every pending mutant of the session, one worker per copy, recording each result as it comes."""
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = list(db.pending_work_items)
        total, done = len(pending), 0
        manager = multiprocessing.Manager()
        queue = manager.Queue()
        for copy in copies:
            queue.put(str(copy))
        with ProcessPoolExecutor(len(copies), initializer=enter_copy, initargs=(queue,)) as pool:
            futures = {pool.submit(run_mutant, item.mutations, pytest_command(), timeout): item for item in pending}
            for future in as_completed(futures):
                db.set_result(futures[future].job_id, future.result())
                done += 1
                if done % 100 == 0 or done == total:
                    print(f"  {done}/{total} mutants run", flush=True)
        manager.shutdown()


def report(session: Path) -> int:
    """Print the score of each module and of all, and every survivor; 1 if a survivor is not a known equivalent."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    equivalents = known_equivalents()
    killed: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    skipped = failed = 0
    unexplained: list[tuple[Mutant, str]] = []
    explained: list[tuple[Mutant, str]] = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            mutation = item.mutations[0]
            if result.worker_outcome is WorkerOutcome.SKIPPED:
                skipped += 1
                continue
            if result.worker_outcome is not WorkerOutcome.NORMAL:
                failed += 1
                error = (result.output or "").strip().splitlines()[-1:] or ["?"]
                place = f"{mutation.module_path}:{mutation.start_pos[0]}"
                print(f"cosmic-ray could not make {mutation.operator_name} at {place}: {error[0]}")
                continue
            module = module_name(str(mutation.module_path))
            if result.test_outcome is TestOutcome.KILLED:
                killed[module] += 1
                continue
            survived[module] += 1
            mutant = mutant_of(mutation, result.diff)
            where = (
                f"{mutation.module_path}:{mutation.start_pos[0]} ({mutant.function or 'module'}) {mutant.operator}"
                f"\n    - {mutant.line}\n    + {mutant.mutated}"
            )
            why = equivalents.get(mutant)
            (explained if why else unexplained).append((mutant, f"{where}\n    equivalent: {why}" if why else where))
    print()
    for module in sorted(killed.keys() | survived.keys()):
        print(f"{module}: {killed[module]} of {killed[module] + survived[module]} mutants killed")
    total_killed, total_survived = sum(killed.values()), sum(survived.values())
    print(
        f"{RECORD_PACKAGE}: {total_killed} of {total_killed + total_survived} mutants killed, {total_survived} survived"
        f" ({len(explained)} listed as equivalent; {skipped} in annotations skipped, {failed} cosmic-ray could not"
        " make)"
    )
    for _, text in sorted(explained):
        print(text)
    if unexplained:
        print(f"\n{len(unexplained)} survivors the tests do not tell apart from the original:")
        for _, text in sorted(unexplained):
            print(text)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="copies tested at once")
    parser.add_argument("--session", type=Path, default=SESSION, help="cosmic-ray's session database")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--survivors", action="store_true", help="run the last session's survivors again")
    what.add_argument("--report", action="store_true", help="report the last session's results again")
    arguments = parser.parse_args()
    session = arguments.session.resolve()
    if arguments.report:
        return report(session)
    with tempfile.TemporaryDirectory(prefix="tidemq-mutation-") as scratch:
        copies = [Path(scratch) / f"copy{index}" for index in range(arguments.workers)]
        for copy in copies:
            copy_repository(copy)
        took = baseline(copies[0])
        timeout = max(10.0, round(5 * took, 1))
        if arguments.survivors:
            survivors = reset_survivors(session)
            print(f"{len(survivors)} survivors of the last run to run again", flush=True)
        else:
            session.parent.mkdir(parents=True, exist_ok=True)
            session.unlink(missing_ok=True)
            config = Path(scratch) / "cosmic-ray.toml"
            write_config(config, timeout)
            cosmic_ray = Path(sys.executable).with_name("cosmic-ray")
            subprocess.run([cosmic_ray, "init", config, session], cwd=copies[0], check=True)
        skipped = skip_annotations(session)
        print(f"{skipped} mutants in annotations skipped", flush=True)
        print(f"baseline {took:.1f} s; each mutant gets {timeout} s; {arguments.workers} at a time", flush=True)
        execute(session, copies, timeout)
        if arguments.survivors:
            check_same_mutants(session, survivors)
    return report(session)


if __name__ == "__main__":
    sys.exit(main())
