"""The function and layer assets as the deployment uploads them: every handler, the whole engine, every third-party
package the handlers import, and native code built for Lambda (cp312, manylinux, aarch64), not for this machine."""

from __future__ import annotations

import ast
import re
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from infra_cdk import assets

ELF_AARCH64 = 183  # e_machine of an ELF file for AArch64
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # a function and its layers, unzipped
NATIVE_TAG = re.compile(r"^(cp312-cp312|cp3\d+-abi3)-(manylinux2014|manylinux_2_(1[7-9]|2\d|3[0-4]))_aarch64$")


def directory_size(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")


@pytest.fixture(scope="module")
def staged(synthesized, functions_by_name) -> dict[str, Path]:
    """The staged code, engine layer and dependencies layer."""
    _, produce = functions_by_name["produce"]
    found = {"code": synthesized.asset_directory(produce["Code"])}
    for layer in synthesized.of_type("AWS::Lambda::LayerVersion").values():
        description = layer["Properties"].get("Description", "")
        kind = "engine" if "store engine" in description else "dependencies" if "Third-party" in description else None
        if kind:
            found[kind] = synthesized.asset_directory(layer["Properties"]["Content"])
    for name, (_, properties) in functions_by_name.items():
        assert synthesized.asset_directory(properties["Code"]) == found["code"], name  # one code asset for all
    return found


@pytest.fixture(scope="module")
def handler_imports(functions_by_name):
    return assets.lambda_imports(list(functions_by_name))


@pytest.mark.parametrize("name", ["admin", "produce", "consume", "push", "maintenance", "authorizer"])
def test_each_function_handler_is_in_the_code_asset(staged, functions_by_name, name):
    module, _, attribute = functions_by_name[name][1]["Handler"].rpartition(".")
    path = staged["code"] / f"{module.replace('.', '/')}.py"
    defined = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            defined |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.add(node.name)
    assert attribute in defined


def test_the_code_asset_holds_every_project_module_the_handlers_import(staged, handler_imports):
    for name, source in handler_imports.modules.items():
        inside = staged["code"] / assets.module_path(name, source)
        if name.partition(".")[0] in assets.CODE_PACKAGES:
            assert inside.read_bytes() == source.read_bytes(), name
        else:
            assert not inside.exists(), f"{name} belongs in a layer"


def test_the_engine_layer_is_the_whole_store_engine(staged):
    engine = staged["engine"] / assets.LAYER_ROOT / "tidemq_store"
    sources = {p.relative_to(assets.ENGINE) for p in assets.ENGINE.rglob("*.py") if "__pycache__" not in p.parts}
    shipped = {p.relative_to(engine) for p in engine.rglob("*.py")}
    assert shipped == sources and len(sources) > 20
    for relative in sources:
        assert (engine / relative).read_bytes() == (assets.ENGINE / relative).read_bytes(), relative


def test_every_third_party_package_the_handlers_import_is_in_the_dependencies_layer(staged, handler_imports):
    root = staged["dependencies"] / assets.LAYER_ROOT
    tops = assets.third_party_tops(handler_imports)
    assert {"pydantic", "boto3", "pynamodb", "aws_lambda_powertools", "cryptography", "rocksdict"} <= tops
    for top in tops:
        assert (root / top).is_dir() or (root / f"{top}.py").is_file() or list(root.glob(f"{top}.*.so")), top
    versions = {
        assets.canonical(dist.metadata["Name"]): dist.version
        for dist in (PathDistribution(info) for info in root.glob("*.dist-info"))
    }
    expected = assets.closure(assets.lambda_requirements(handler_imports))
    assert versions == expected  # the versions the tests ran with, and nothing else


def test_native_code_is_built_for_lambda_not_for_this_machine(staged):
    root = staged["dependencies"] / assets.LAYER_ROOT
    libraries = list(root.rglob("*.so")) + list(root.rglob("*.so.*"))
    assert len(libraries) >= 5  # pydantic_core, rocksdict, crc32c, pybase64, cryptography, ...
    for library in libraries:
        assert elf_machine(library) == ELF_AARCH64, library
        if library.name.count(".") >= 2 and "cpython" in library.name:
            assert "cpython-312-aarch64-linux-gnu" in library.name, library
    native = 0
    for wheel in root.glob("*.dist-info/WHEEL"):
        fields = dict(line.split(": ", 1) for line in wheel.read_text().splitlines() if ": " in line)
        if fields.get("Root-Is-Purelib") == "false":
            native += 1
            tags = [line.split(": ", 1)[1] for line in wheel.read_text().splitlines() if line.startswith("Tag: ")]
            assert tags and all(NATIVE_TAG.match(tag) for tag in tags), (wheel.parent.name, tags)
    assert native >= 5


def test_local_only_imports_are_reached_only_inside_functions(handler_imports):
    """moto and werkzeug (the embedded AWS of local runs) are not shipped: no module the handlers import may import
    them when it is loaded."""
    for name, path in handler_imports.modules.items():
        for node in module_level(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            assert not {n.partition(".")[0] for n in names} & assets.LOCAL_ONLY, (name, node.lineno)


def module_level(tree: ast.Module):
    """The statements run when a module is loaded (class bodies too, function bodies not)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def test_a_function_and_its_layers_fit_lambdas_unzipped_limit(staged):
    assert sum(directory_size(path) for path in staged.values()) < LAMBDA_UNZIPPED_LIMIT


def test_a_second_build_reuses_the_dependencies_without_downloading(staged, handler_imports, monkeypatch):
    def no_pip(*arguments):
        raise AssertionError(f"pip ran again: {arguments}")

    monkeypatch.setattr(assets, "pip", no_pip)
    specs = assets.lambda_requirements(handler_imports)
    built = assets.build_dependencies(specs, assets.closure(specs))
    assert built.is_dir() and (built / "requirements.json").is_file()
