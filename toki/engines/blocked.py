"""Memory engines on PyPI that toki checked and cannot certify here, each with the blocker and the
evidence: a verdict row names it instead of leaving a gap (``toki engines list``,
``toki experiment verdicts``). Read from the released wheels on 2026-12-03; the paths are inside
each wheel. Loading one raises :class:`toki.errors.ConfigError` with the reason.

An engine is certifiable when its writes reach storage through a path the harness grants step by
step (sqlite3, psycopg 3, PyMySQL, Python files under the run's folder) on an agent's thread or a
worker fed through a queue by an agent, and when its LLM and embedder can be replaced through the
engine's own extension points (docs/engines.md, "What the harness sees").
"""

from __future__ import annotations

from toki.errors import ConfigError

BLOCKERS: dict[str, tuple[str, str, str]] = {
    # name: (package and version checked, the blocker, what would unblock it)
    "memori": (
        "memori 3.3.6 (PyPI; a Rust core, memori_python.abi3.so)",
        "its memories are written off the caller's thread: Memori.llm's post-invoke hands the conversation to "
        "memory/augmentation/_manager.py Manager.enqueue, which schedules it with asyncio.run_coroutine_threadsafe on "
        "the process-wide 'memori-augmentation' event-loop thread (_runtime.py); that thread sends the conversation to "
        "Memori's hosted extraction service (_network.py augmentation_async: https://api.memorilabs.ai/sdk/augmentation, "
        "MEMORI_API_URL_BASE to override) and queues the resulting facts for the 'memori-db-writer' thread "
        "(_db_writer.py), which batches the writes of every caller (batch_timeout 0.1 s) into one connection and one "
        "commit. No agent feeds that writer: toki refuses storage calls on a thread doing no agent's request, and a "
        "batch mixing two agents' writes has no single owner. Embeddings come from the Rust core with onnxruntime "
        "1.23.2 downloaded from GitHub at first use (_rust_core.py _download_asset_with_retries): not offline",
        "a synchronous, in-process augmentation path (extraction and writes on the caller's thread) with a "
        "pluggable extractor and embedder"),
    "a-mem": (
        "a-mem 0.2.6 (PyPI, agentic_memory)",
        "its store is ChromaDB's PersistentClient (agentic_memory/retrievers.py ChromaRetriever.__init__: "
        "chromadb.PersistentClient(path=...)): chromadb's Rust core writes its SQLite and HNSW files from native "
        "code, which no intercepted call grants, so toki refuses the run (observed with chromadb 1.5.9: two agents "
        "adding to one PersistentClient collection are unverifiable, its HNSW files data_level0.bin, header.bin, "
        "length.bin and link_lists.bin changed while no agent held a granted call; tests/test_engines_blocked.py); "
        "and the embedder is built there from a model name, "
        "SentenceTransformerEmbeddingFunction(model_name='all-MiniLM-L6-v2'), downloaded from Hugging Face at first "
        "use, with no argument to pass another embedding function (AgenticMemorySystem passes only model_name "
        "through): not offline",
        "a store reached through sqlite3 or psycopg (or a Python-file store), and an embedding-function argument"),
    "cognee": (
        "cognee 1.6.5 (PyPI)",
        "every graph and vector store it ships writes through a path toki refuses: graph (infrastructure/databases/"
        "graph/get_graph_engine.py) ladybug/kuzu (the default) and turso write native files, postgres/postgres_demo "
        "goes through SQLAlchemy on asyncpg, neo4j, ladybug-remote and neptune are network clients; vectors (infrastructure/databases/vector/create_vector_engine.py) LanceDB (Rust, native files; the "
        "default), pgvector through SQLAlchemy on asyncpg (postgresql+asyncpg, a driver toki does not intercept), "
        "qdrant, chromadb and turso. Only its relational store (sqlite+aiosqlite) is controllable, and cognify's "
        "memory (entities, edges, chunks' vectors) is not kept there. Its LLM calls go through litellm/instructor "
        "and its default embedder is fastembed (a model download): a stand-in is possible through litellm's custom "
        "providers, the storage is not",
        "a graph or vector adapter over sqlite3 or psycopg 3 (cognee's supported_databases registry takes community "
        "adapters, but such an adapter would be toki's storage code, not cognee's)"),
}


def _blocked(name: str):
    what, why, fix = BLOCKERS[name]

    def factory():
        raise ConfigError(f"{what} cannot be certified here: {why}", fix=f"needs {fix}")
    factory.__name__ = name.replace("-", "_")
    return factory


memori = _blocked("memori")
a_mem = _blocked("a-mem")
cognee = _blocked("cognee")
