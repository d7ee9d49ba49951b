"""The package's layers import only downward (issue 16): core < serving < api < analysis <
cli, webapp. A module that imports a higher layer fails here with the offending line."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "perfmodel"
LAYER = {"core": 0, "serving": 1, "api": 2, "analysis": 3, "cli": 4, "webapp": 4, "__main__": 4}


def _layer(dotted: str) -> int | None:
    parts = dotted.split(".")
    if parts[0] != "perfmodel" or len(parts) < 2:
        return None
    return LAYER.get(parts[1])


def _imports(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            yield node.lineno, names
        elif isinstance(node, ast.Import):
            yield node.lineno, [a.name for a in node.names]


def _violations(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        for line, names in _imports(path):
            layers = [x for x in (_layer(n) for n in names) if x is not None]
            if layers and min(layers) > own:
                bad.append(f"{rel}.py:{line} imports {names[0]} (layer {min(layers)} > {own})")
    return bad


def test_every_module_sits_in_a_layer():
    top = {p.stem for p in PKG.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert top - {"__init__", "__main__"} <= set(LAYER), top - set(LAYER)  # __main__: `python -m perfmodel`, the CLI entry


def test_imports_only_run_downward():
    assert _violations(PKG) == []


def test_the_check_catches_an_upward_import(tmp_path):
    core = tmp_path / "perfmodel" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text("from perfmodel.api import evaluate\n")
    (core / "good.py").write_text("from perfmodel.core.specs import ModelSpec\n")
    found = _violations(tmp_path / "perfmodel")
    assert len(found) == 1 and "bad.py:1" in found[0]
