"""The layers of toki import one way (down the list below), checked over the real import graph.

Every ``import``/``from ... import`` of a toki module anywhere in a module (lazy imports inside
functions included: they are dependencies too) must point to a layer at or below the
importer's. A new package must be given a layer here before it can pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "toki"

# Layer of each top-level module or package of toki (lower imports nothing higher).
LAYERS = {
    "errors": 0,
    "__init__": 1,  # toki's facade re-exports the pure layer
    "model": 1, "provenance": 1, "operators": 1, "slots": 1,
    "judges": 2,
    "levels": 3,
    "backends": 4,
    "runinfo": 4,
    "db": 5,
    "sched": 6,
    "check": 7, "matrix": 7, "cluster": 7,
    "engines": 8, "faults": 8,
    "verify": 9,
    "cli": 10,
}
# Packages installed under toki from other folders: properties/ beside the engines, experiments/
# beside the command line that runs them (they compose the library and print with cli.render).
ABOVE = {"properties": 9, "experiments": 10, "schedules": 0}


def _layer_of(parts: list[str]) -> int | None:
    head = parts[0]
    if head in LAYERS:
        return LAYERS[head]
    return ABOVE.get(head)


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(ROOT.parent).with_suffix("").parts
    pkg = rel if rel[0] == "toki" else ("toki", *rel)  # properties/ and experiments/ install as toki.*
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names if a.name.startswith("toki."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg[:-node.level]) if path.name != "__init__.py" else list(pkg[: len(pkg) - node.level + 1])
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "toki" or name.startswith("toki."):
                out.append((name, node.lineno))
    return out


def test_every_toki_module_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
            if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert tops <= set(LAYERS), f"give these a layer in tests/test_layers.py: {sorted(tops - set(LAYERS))}"


def _sources():
    for path in sorted(ROOT.rglob("*.py")):
        yield path, _layer_of(list(path.relative_to(ROOT).with_suffix("").parts))
    for folder, layer in (("properties", ABOVE["properties"]), ("experiments", ABOVE["experiments"])):
        for path in sorted((ROOT.parent / folder).rglob("*.py")):
            yield path, layer


def test_imports_point_down_the_layers():
    bad = []
    for path, mine in _sources():
        for name, line in _imports(path):
            parts = name.split(".")[1:]
            if not parts:
                continue
            theirs = _layer_of(parts)
            if theirs is not None and mine is not None and theirs > mine:
                bad.append(f"{path.relative_to(ROOT.parent)}:{line} (layer {mine}) imports {name} (layer {theirs})")
    assert not bad, "imports that point up the layers:\n" + "\n".join(bad)
