"""The plug-in contract is declared, and the public API is what callers use.

- Every member toki reads from an engine object is either one the ``Engine`` Protocol requires or
  one of the optional members declared, with its default, in ``toki.harness.engine.OPTIONAL``
  (found by reading every ``getattr(engine, "...")`` in toki, the experiments and the properties).
- Loading a plug-in writes nothing onto it.
- ``toki.harness.__all__`` is exactly the public names its ``__init__`` binds.
- Code outside the harness (the library's other packages, the experiments, the properties and
  the pytest plugin) imports from it only the names ``toki.harness.__all__`` declares public,
  except where it is built into the harness's implementation, each such place named below with
  why (the fault injector runs the controller with a crash in it).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import toki.harness
from toki.engines.registry import load_engine
from toki.harness.engine import OPTIONAL, Engine, origin

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"name", "version", "executed", "scenarios", "open", "close", "state"}
ENGINE_NAMES = {"engine", "eng"}


def _reads() -> set[tuple[str, str]]:
    """(file, member) of every getattr(engine-ish, "member") in the library's code."""
    found = set()
    for folder in ("toki", "experiments", "properties"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                        and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                        and isinstance(node.args[1].value, str)):
                    continue
                target = node.args[0]
                name = target.id if isinstance(target, ast.Name) else \
                    target.attr if isinstance(target, ast.Attribute) else None
                if name in ENGINE_NAMES:
                    found.add((str(path.relative_to(ROOT)), node.args[1].value))
    return found


def test_every_member_toki_reads_from_a_plugin_is_declared():
    reads = _reads()
    assert reads, "the scan found no getattr on an engine: it no longer sees the code"
    undeclared = sorted((f, m) for f, m in reads if m not in REQUIRED and m not in OPTIONAL)
    assert not undeclared, f"members read from plug-ins but not declared in OPTIONAL: {undeclared}"
    for member, (default, doc) in OPTIONAL.items():
        assert doc and isinstance(doc, str), member


def test_loading_a_plugin_writes_nothing_onto_it():
    import tests.toy_engine as toy

    made = []
    real = toy.counter
    try:
        toy.counter = lambda: made.append(real()) or made[-1]
        eng = load_engine(None, "tests.toy_engine:counter")
    finally:
        toy.counter = real
    fresh = real()
    assert set(vars(eng)) == set(vars(fresh)), set(vars(eng)) ^ set(vars(fresh))
    assert origin(eng) == ("tests.toy_engine:counter", False)
    assert origin(fresh) is None
    assert isinstance(eng, Engine)


def test_the_harness_declares_exactly_the_public_names_it_binds():
    bound = {n for n in vars(toki.harness) if not n.startswith("_")
             and getattr(vars(toki.harness)[n], "__module__", "").startswith("toki.harness")
             and not isinstance(vars(toki.harness)[n], type(toki))}
    assert set(toki.harness.__all__) == bound, set(toki.harness.__all__) ^ bound


# Where code outside the harness is built into its implementation: (path, or path prefix, name
# or None for any) -> why. Nothing else outside toki/harness imports a name it does not declare.
BUILT_IN = {
    ("toki/faults/", None): "the fault injector runs the controller with a crash in it: a Controller subclass, the "
                            "file hook's class, a trial's hooks and its open/prepare/bind sequence",
    ("toki/engines/registry.py", "note_origin"): "the loader records where a plug-in came from, for its witnesses",
    ("toki/engines/sodamem_engine.py", "controlled_connect"): "sodamem-fixed's recording clients need the "
                                                              "connection class the harness's sqlite3 hook makes",
}


def _harness_imports():
    """(file, line, module, name) of every import from toki.harness outside it (name None: a module)."""
    for folder in ("toki", "experiments", "properties"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("toki/harness/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and not node.level and (
                        node.module == "toki.harness" or node.module.startswith("toki.harness.")):
                    for a in node.names:
                        yield rel, node.lineno, node.module, a.name
                elif isinstance(node, ast.Import):  # the package itself is its public names
                    for a in node.names:
                        if a.name.startswith("toki.harness."):
                            yield rel, node.lineno, a.name, None


def test_code_outside_the_harness_imports_only_the_names_it_declares_public():
    public = set(toki.harness.__all__)
    seen, bad = 0, []
    for rel, line, module, name in _harness_imports():
        seen += 1
        if any(rel.startswith(where) and what in (None, name) for where, what in BUILT_IN):
            continue
        same = name in public and (module == "toki.harness" or getattr(
            importlib.import_module(module), name, None) is getattr(toki.harness, name))
        if not same:
            bad.append(f"{rel}:{line} imports {name or module} from {module}")
    assert seen > 10, "the scan found almost no import of the harness: it no longer sees the code"
    assert not bad, ("names imported from the harness that it does not declare public (add them to "
                     "toki.harness.__all__ if callers need them, or use a public one):\n" + "\n".join(bad))
