"""The engine's seams hold: the cold tier touches no private name of another module (import-linter, run by
`make test`, checks which packages import which; this checks what it cannot)."""

from __future__ import annotations

import ast
from pathlib import Path

import tidemq_store.tiered

TIERED = Path(tidemq_store.tiered.__file__).parent
NAMED_TUPLE_API = {"_make", "_replace", "_asdict", "_fields"}  # public, underscored so as not to clash with fields


def private_names_used(path: Path) -> list[str]:
    """`obj._name` on anything but self/cls, and `from x import _name`, in one module."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr not in NAMED_TUPLE_API:
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner not in ("self", "cls") and not node.attr.startswith("__"):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        if isinstance(node, ast.ImportFrom):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_no_module_of_the_tier_touches_a_private_name_of_another_module():
    modules = sorted(TIERED.glob("*.py"))
    assert len(modules) >= 6
    assert [use for module in modules for use in private_names_used(module)] == []


def test_the_check_would_catch_a_reach_into_the_hot_stores_internals(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(hot):\n    return hot._max_offset('t', 0), hot.cq._db\nfrom x import _private\n")
    assert sorted(private_names_used(bad)) == ["bad.py:2: ._db", "bad.py:2: ._max_offset", "bad.py:3: import _private"]
