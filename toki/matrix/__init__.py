"""``toki.matrix``: the matrix engine. Anomaly programs run on a real database under the runner.

Layer 8: may import ``toki.cluster`` and everything below it (sched, db, levels, the pure core);
used by the command line (``toki matrix``, ``toki matrix --composition``), the property suites,
the experiments and the benchmarks. It has nothing to do with Jepsen histories (that is
:mod:`toki.check`).

Modules:

* :mod:`toki.matrix.workloads`: the transaction programs of each predicate (P0..N2 and the
  variant rows), written as agents run them, each with its minimal witness interleaving and a
  detector that decides from what happened;
* :mod:`toki.matrix.memory`: the memory predicates (lost increment, N1 replay inconsistency,
  N2 belief-drift skew, N3 audit erasure...) read off observations, shared with the property
  suites and the experiments;
* :mod:`toki.matrix.cells`: plan, run and assemble the 9 x 6 matrix (and its extra grids) on
  one lane per worker process or on a Dask cluster;
* :mod:`toki.matrix.composition`: the composition grid (operator pipelines at every level).

Public API::

    from toki.matrix import cells
    jobs = cells.plan(trials=100, mode="witness", seed=0)
    doc = cells.assemble(cells.execute(jobs), trials=100, mode="witness", seed=0, elapsed_s=0.0)
"""
