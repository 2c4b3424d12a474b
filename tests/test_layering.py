"""The package's layering (DESIGN.md), checked by walking every import of src/neurips26:

* the library layer (every module but ``reproduce/``, ``cli.py`` and the subcommands'
  ``cli_*.py``) never imports the experiments, the CLI, plotting or progress bars;
* no field imports another field sideways: a helper two fields need lives one level down
  (``linalg``, ``geometry``, ``moe``, ...), in a top-level module;
* no module imports another module's private (``_name``) objects.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import neurips26

PACKAGE_ROOT = Path(neurips26.__file__).parent
APP_LAYER = {"reproduce", "cli"}  # may import anything in the library
FORBIDDEN_IN_LIBRARY = {"matplotlib", "rich", "tqdm"}


def _module_name(path: Path) -> str:
    parts = ("neurips26",) + path.relative_to(PACKAGE_ROOT).with_suffix("").parts
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def _imports(path: Path):
    """(imported module, imported names, line) for every import statement of the file,
    relative imports resolved against the file's package."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [a.name for a in node.names], node.lineno


def _field(module: str) -> str | None:
    """The first-level part under neurips26 for modules inside a subpackage (a field or the
    app layer); None for top-level shared modules (linalg, geometry, moe, _atomic)."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "neurips26":
        return None
    top = parts[1]
    if top.startswith("cli_"):  # a subcommand's own module (cli_hyperp, ...): part of the CLI
        return "cli"
    return top if (PACKAGE_ROOT / top).is_dir() or top in APP_LAYER else None


def _violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        importer = _module_name(path)
        own = _field(importer)
        where = f"{path.relative_to(PACKAGE_ROOT.parent)}"
        for target, names, line in _imports(path):
            root = target.split(".")[0]
            if own not in APP_LAYER:
                if root in FORBIDDEN_IN_LIBRARY:
                    found.append(f"{where}:{line}: library code imports {target}")
                if _field(target) in APP_LAYER:
                    found.append(f"{where}:{line}: library code imports the app layer ({target})")
            other = _field(target)
            if own not in APP_LAYER and other is not None and other != own and other not in APP_LAYER:
                found.append(f"{where}:{line}: field {own or 'top level'!r} imports field {other!r} sideways ({target})")
            if root == "neurips26" and target != importer:
                for name in names:
                    if name.startswith("_") and not name.startswith("__"):
                        found.append(f"{where}:{line}: imports the private name {name} from {target}")
    return found


def test_the_walk_sees_every_module_and_resolves_relative_imports():
    modules = {_module_name(p) for p in PACKAGE_ROOT.rglob("*.py")}
    assert {"neurips26.linalg", "neurips26.optim", "neurips26.reproduce._harness"} <= modules
    harness = PACKAGE_ROOT / "reproduce" / "_harness.py"
    assert any(t == "neurips26._atomic" for t, _, _ in _imports(harness))


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ..optim.norms import Norm\n", "imports field 'optim' sideways"),
        ("from .rennala import _Server\n", "private name _Server"),
        ("import matplotlib.pyplot as plt\n", "library code imports matplotlib"),
        ("from ..reproduce import EXPERIMENTS\n", "imports the app layer"),
    ],
)
def test_the_walk_catches_each_kind_of_violation(tmp_path, monkeypatch, source, expected):
    root = tmp_path / "neurips26"
    (root / "distributed").mkdir(parents=True)
    (root / "optim").mkdir()
    (root / "reproduce").mkdir()
    for pkg in (root, root / "distributed", root / "optim", root / "reproduce"):
        (pkg / "__init__.py").write_text("")
    (root / "distributed" / "runner.py").write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE_ROOT", root)
    assert any(expected in v for v in _violations()), _violations()


def test_no_sideways_imports_no_private_names_no_app_layer_in_the_library():
    violations = _violations()
    assert not violations, "layering violations:\n" + "\n".join(violations)
