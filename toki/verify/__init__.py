"""z3 models: operator laws, provenance laws, isolation axioms, bounded witness search (layer 9: may
import the layers below; it uses sched, levels, judges and the pure core; used by cli and
experiments).

Public entry points: :func:`toki.verify.prove.run` (what ``toki prove`` runs),
:func:`toki.verify.isolation.derive_cell` (one matrix cell with its witness history) and
:mod:`toki.verify.solver` (the only module that imports z3; verdicts proved/refuted/unknown).
"""

from toki.verify.solver import Verdict

__all__ = ["Verdict"]
