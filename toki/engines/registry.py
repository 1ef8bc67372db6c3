"""The engines toki ships, and loading an engine toki does not ship (``module:factory``)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from toki.engines.base import EngineInfo
from toki.errors import ConfigError
from toki.harness.engine import note_origin

ENGINES: dict[str, EngineInfo] = {e.name: e for e in (
    EngineInfo("sodamem", "toki.engines.sodamem_engine:sodamem",
               "SodaMem (PyPI sodamem), its unmodified code on SQLite", ("sodamem",)),
    EngineInfo("sodamem-fixed", "toki.engines.sodamem_engine:sodamem_fixed",
               "SodaMem with each call in one BEGIN IMMEDIATE transaction under the store lock (a wrapper fix)",
               ("sodamem",)),
    EngineInfo("atommem", "toki.engines.atommem_model:atommem",
               "AtomMem, a model of its published code (whole-file JSON load and save)", executed="model"),
    EngineInfo("atommem-atomic", "toki.engines.atommem_model:atommem_atomic",
               "the AtomMem model with a lock held from load to save and atomic replace (a fix)", executed="model"),
    EngineInfo("letta", "toki.engines.models.letta:letta",
               "Letta's memory blocks, a model of its public code (step-start load, last-writer-wins flush, "
               "optimistic version check at flush only); letta-sqlite and letta-postgres run the real code",
               executed="model"),
    EngineInfo("letta-sqlite", "toki.engines.letta_engine:letta_sqlite",
               "Letta (PyPI letta 0.16.8, the Python server), its unmodified agent, block and tool-executor "
               "services on SQLite (aiosqlite)", ("letta", "aiosqlite"), extra="letta", release=("letta", "0.16.")),
    EngineInfo("letta-postgres", "toki.engines.letta_engine:letta_postgres",
               "Letta (PyPI letta 0.16.8, the Python server), its unmodified agent, block and tool-executor "
               "services on PostgreSQL (psycopg 3, async)", ("letta", "pgvector"), extra="letta",
               release=("letta", "0.16.")),
    EngineInfo("mirix", "toki.engines.models.mirix:mirix",
               "MIRIX's semantic memory agent, a model of its public code (delete old ids then insert, hard delete)", executed="model"),
    EngineInfo("comparator", "toki.engines.models.comparator:comparator",
               "the judge-free comparator (WorldDB): one serializable transaction per write, bitemporal, audited", executed="model"),
    EngineInfo("mem0-v1", "toki.engines.mem0_v1_engine:mem0_v1",
               "mem0 1.0.x (PyPI mem0ai 1.0.11, the paper's mem0 v2), its unmodified Memory on PostgreSQL+pgvector "
               "and a SQLite history, in an environment of its own (mem0ai 2.x shares its import name)",
               ("mem0", "psycopg_pool"), extra="mem0-v1", release=("mem0ai", "1.0.")),
    EngineInfo("mem0-v2", "toki.engines.models.mem0_v2:mem0_v2",
               "mem0 1.0.x (ADD/UPDATE/DELETE/NONE judge), a model of its public code", executed="model"),
    EngineInfo("graphiti", "toki.engines.graphiti_engine:graphiti",
               "Graphiti (PyPI graphiti-core), its unmodified add_episode on embedded Kuzu", ("graphiti_core", "kuzu")),
    EngineInfo("zep", "toki.engines.graphiti_engine:zep",
               "Zep CE's graph write path, a model: Graphiti's real add_episode in server mode (one worker per agent)",
               ("graphiti_core", "kuzu"), executed="model"),
    EngineInfo("toki", "toki.engines.toki_engine:toki_engine",
               "TOKI's own write path (each operator at and below its precondition) on PostgreSQL"),
    EngineInfo("mem0", "toki.engines.mem0_engine:mem0", "mem0 (PyPI mem0ai 2.x), its unmodified code on PostgreSQL+pgvector and a SQLite history", ("mem0",)),
    EngineInfo("langmem", "toki.engines.langmem_engine:langmem",
               "LangMem (PyPI langmem), its unmodified memory manager on LangGraph's SqliteStore",
               ("langmem", "langgraph.store.sqlite")),
    EngineInfo("langmem-postgres", "toki.engines.langmem_engine:langmem_postgres",
               "LangMem (PyPI langmem), its unmodified memory manager on LangGraph's PostgresStore (pgvector)",
               ("langmem", "langgraph.store.postgres")),
    # Checked and not certifiable here: each names its blocker (toki.engines.blocked), never a silent gap.
    EngineInfo("memori", "toki.engines.blocked:memori",
               "Memori (PyPI memori 3.3.6): blocked, its memories are written by its own background threads after a "
               "hosted extraction call", executed="blocked"),
    EngineInfo("a-mem", "toki.engines.blocked:a_mem",
               "A-MEM (PyPI a-mem 0.2.6): blocked, ChromaDB's native store and a downloaded sentence-transformers model",
               executed="blocked"),
    EngineInfo("cognee", "toki.engines.blocked:cognee",
               "cognee (PyPI cognee 1.6.5): blocked, every graph and vector store it ships is native, asyncpg or a "
               "network client", executed="blocked"),
)}


def available(info: EngineInfo) -> bool:
    """The engine's code is installed here (a blocked engine never is: loading it names its blocker)."""
    if info.executed == "blocked" or not all(importlib.util.find_spec(n) is not None for n in info.needs):
        return False
    if info.release is not None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(info.release[0]).startswith(info.release[1])
        except PackageNotFoundError:
            return False
    return True


def load_engine(name: str | None = None, module: str | None = None):
    """An engine object by toki's name for it, or from ``pkg.mod:factory`` (``--engine-module``)."""
    if (name is None) == (module is None):
        raise ConfigError("name one engine", fix="pass --engine NAME (see `toki engines list`) or "
                          "--engine-module pkg.mod:factory")
    spec = module
    if name is not None:
        if name not in ENGINES:
            raise ConfigError(f"unknown engine {name!r}", fix="choose one of " + ", ".join(ENGINES)
                              + ", or plug your own in with --engine-module pkg.mod:factory")
        info = ENGINES[name]
        if info.executed == "blocked":  # its factory raises the ConfigError that names the blocker
            mod_name, _, attr = info.factory.partition(":")
            getattr(importlib.import_module(mod_name), attr)()
        if not available(info):
            what = f"{info.release[0]} {info.release[1]}x" if info.release else ", ".join(info.needs)
            raise ConfigError(f"engine {name} needs {what}, which is not installed here", fix=info.install)
        spec = info.factory
    if ":" not in spec:
        raise ConfigError(f"engine module {spec!r} is not of the form module:factory",
                          fix="pass e.g. --engine-module mypkg.memory:toki_engine")
    mod_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of the current directory resolve
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        dep = getattr(e, "name", None)
        if dep and dep != mod_name and not mod_name.startswith(dep + "."):
            raise ConfigError(f"engine module {mod_name!r} imports {dep!r}, which is not installed",
                              fix=f"install the package that provides {dep} in this environment") from None
        raise ConfigError(f"cannot import engine module {mod_name!r}: {e}",
                          fix="check the module path and that it is importable (PYTHONPATH)") from None
    except Exception as e:  # noqa: BLE001 - the module's own code failed while it was imported
        raise ConfigError(f"engine module {mod_name!r} raised {type(e).__name__} while it was imported: "
                          f"{str(e)[:200]}", fix=f"fix {mod_name} so that importing it succeeds "
                          f"(python -c 'import {mod_name}' shows the traceback)") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"module {mod_name!r} has no attribute {attr!r}",
                              fix="name a factory function or class defined in that module")
        obj = getattr(obj, part)
    if callable(obj) and not hasattr(obj, "scenarios"):
        try:
            engine = obj()
        except Exception as e:  # noqa: BLE001 - the plug-in's factory failed: name it, not a traceback
            raise ConfigError(f"engine factory {spec!r} raised {type(e).__name__}: {str(e)[:200]}",
                              fix=f"fix {attr}() in {mod_name} so that it returns the engine object") from None
    else:
        engine = obj
    missing = [a for a in ("name", "version", "scenarios", "open", "close", "state") if not hasattr(engine, a)]
    if missing:
        raise ConfigError(f"engine {spec!r} lacks {', '.join(missing)}",
                          fix=f"give what {attr} returns these members; see toki.harness.engine for the protocol "
                              "(name, version, executed, scenarios, open, close, state)")
    if getattr(engine, "executed", "real") not in ("real", "model"):
        raise ConfigError(f"engine {spec!r} says executed={engine.executed!r}", fix="use 'real' or 'model'")
    note_origin(engine, spec, name is not None)
    return engine
