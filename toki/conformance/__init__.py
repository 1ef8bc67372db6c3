"""Hermitage's isolation table for any database toki reaches (layer 7: uses sched and below).

``measure(server)`` runs Hermitage's cases (G0 G1a G1b G1c OTV PMP P4 G-single G2-item G2) at
every level the database offers and decides each cell from what happened: prevented by
blocking, by an abort, by a snapshot, or the anomaly observed (:mod:`toki.conformance.judge`).
``describe_database`` records the settings that change the answers; ``hermitage`` holds the
published PostgreSQL and MySQL tables to compare with.
"""

from toki.conformance.cases import CASES, FORMS
from toki.conformance.judge import Decision, decide
from toki.conformance.measure import measure

__all__ = ["CASES", "FORMS", "Decision", "decide", "measure"]
