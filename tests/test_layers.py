"""Imports flow one way: geogen knows nothing of the others; trainloop imports no method;
flowcaps and baselines may read geogen and use trainloop, never each other; benchmark sits on
top."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("geogen", "trainloop", "flowcaps", "baselines", "benchmark")
# What each package may import of the project's others.
ALLOWED = {
    "geogen": set(),
    "trainloop": set(),
    "flowcaps": {"geogen", "trainloop"},
    "baselines": {"geogen", "trainloop"},
    "benchmark": {"geogen", "trainloop", "flowcaps", "baselines"},
}


def imported_packages(path: Path) -> set[str]:
    """The project packages a file imports, at any depth of the file (function bodies too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {n.split(".")[0] for n in names} & set(PACKAGES)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_flow_one_way(package):
    wrong = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_packages(path) - ALLOWED[package] - {package}
        if bad:
            wrong[str(path.relative_to(ROOT))] = sorted(bad)
    assert not wrong, f"imports against the layering: {wrong}"


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from flowcaps.trainer import x\n    import baselines.psd\n")
    assert imported_packages(f) == {"flowcaps", "baselines"}
