"""The layers of toki import one way (down the list below), checked over the real import graph.

Every ``import``/``from ... import`` of a toki module anywhere in a module (lazy imports inside
functions included: they are dependencies too) must point to a layer at or below the
importer's. A new package must be given a layer here before it can pass.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "toki"

# Layer of each top-level module or package of toki (lower imports nothing higher).
LAYERS = {
    "errors": 0,
    "moved": 0,  # old import paths of moved modules, kept for a release with a DeprecationWarning
    "__init__": 1,  # toki's facade re-exports the pure layer
    "model": 1, "provenance": 1, "operators": 1, "slots": 1,
    "render": 1,  # tables and JSON output; imports nothing from toki
    "judges": 2,
    "levels": 3,
    "backends": 4,
    "runinfo": 4,
    "db": 5,
    "sched": 6,
    "check": 7, "cluster": 7, "conformance": 7,
    "matrix": 8, "harness": 8, "engines": 8.5, "faults": 8.5, "record": 8.5,
    "verify": 9,
    "cli": 10,
}
# Packages installed under toki from other folders: properties/ beside the engines, experiments/
# beside the command line that runs them (they compose the library and print with toki.render).
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


@pytest.mark.slow
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


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("").parts
    mod = rel if rel[0] == "toki" else ("toki", *rel)
    return ".".join(mod[:-1] if mod[-1] == "__init__" else mod)


def _graph() -> dict[str, set[str]]:
    """Module -> the toki modules it imports (a ``from pkg import name`` counts as pkg.name when
    that is a module, else as pkg)."""
    paths = [p for p, _ in _sources()]
    modules = {_module_of(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        me = _module_of(path)
        deps = graph.setdefault(me, set())
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toki") and not node.level:
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    deps.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("toki."))
        deps.discard(me)
    return {m: {d for d in ds if d in modules} for m, ds in graph.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@pytest.mark.slow
def test_no_import_cycle_between_packages():
    """Same-layer packages may import each other only one way (lazy imports count)."""
    graph: dict[str, set[str]] = {}
    for m, deps in _graph().items():
        graph.setdefault(_top(m), set()).update(_top(d) for d in deps if _top(d) != _top(m))
    graph.pop("__init__", None)  # the facade re-exports the pure layer; nothing imports it back
    for deps in graph.values():
        deps.discard("__init__")
    assert not _cycles(graph), f"import cycles between toki's packages: {_cycles(graph)}"


@pytest.mark.slow
def test_no_import_cycle_between_modules():
    assert not _cycles(_graph()), f"import cycles between toki's modules: {_cycles(_graph())}"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# -- private names stay in their module ------------------------------------------------------

# Packages whose modules may still reach private names of other modules: none (toki/check/ left it
# when it was laid out by job); a package that joins it must say why here.
PRIVATE_IMPORT_EXEMPT: set[str] = set()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_reaches(path: Path, modules: set[str]) -> list[tuple[int, str]]:
    """``from m import _name`` and ``m._name`` where ``m`` is another toki module (relative imports
    and aliases resolved). A package's private submodule may be imported inside that package; the
    standard library's private names (``os._exit``, ``sys._getframe``) are not toki's to judge."""
    me = _module_of(path)
    pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    alias: dict[str, str] = {}  # local name -> the toki module it is bound to
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                src = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if src != "toki" and not src.startswith("toki."):
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in modules:
                    alias[a.asname or a.name] = sub
                    if _private(a.name) and not (me + ".").startswith(src + "."):
                        out.append((node.lineno, f"from {src} import {a.name}"))
                elif _private(a.name) and src != me:
                    out.append((node.lineno, f"from {src} import {a.name}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("toki.") and a.asname:
                    alias[a.asname] = a.name
                if any(_private(p) for p in a.name.split(".")) and not (me + ".").startswith(
                        a.name.rpartition(".")[0] + "."):
                    out.append((node.lineno, f"import {a.name}"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain, v = [], node.value
        while isinstance(v, ast.Attribute):
            chain.append(v.attr)
            v = v.value
        if not isinstance(v, ast.Name):
            continue
        chain = [v.id, *reversed(chain)]
        if chain[0] in alias:
            target = ".".join([alias[chain[0]], *chain[1:]])
        elif chain[0] == "toki":
            target = ".".join(chain)
        else:
            continue
        if target in modules and target != me:
            out.append((node.lineno, f"{target}.{node.attr}"))
    return out


def test_no_module_reaches_a_private_name_of_another():
    paths = [p for p, _ in _sources()]
    modules = {_module_of(p) for p in paths}
    bad = []
    for path in paths:
        if _top(_module_of(path)) in PRIVATE_IMPORT_EXEMPT:
            continue
        bad += [f"{path.relative_to(ROOT.parent)}:{line}: {what}" for line, what in _private_reaches(path, modules)]
    assert not bad, ("private names reached across modules (make the name public, with a clear name, or add an "
                     "API):\n" + "\n".join(bad))


def test_the_private_name_finder_finds_each_form(tmp_path, monkeypatch):
    pkg = tmp_path / "toki" / "harness"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    src = pkg / "mine.py"
    src.write_text("import os\nfrom toki.harness.trial import _bind, TrialRunner\nfrom . import controller as ctl\n"
                   "from toki.harness import _internal\nimport toki.harness.effects as fx\n"
                   "ctl._local.agent = None\nfx._seen()\nos._exit(0)\nctl.current_agent()\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "toki")
    modules = {"toki.harness", "toki.harness.mine", "toki.harness.trial", "toki.harness.controller",
               "toki.harness._internal", "toki.harness.effects"}
    found = sorted(what for _, what in _private_reaches(src, modules))
    assert found == ["from toki.harness.trial import _bind", "toki.harness.controller._local",
                     "toki.harness.effects._seen"]
