"""Histories of write-path runs in Jepsen's format (rw-register micro-ops; docs/design.md#histories-and-toki-check-output).

Keys are fact rows (``fact_id``), judge-log keys (``judge:<digest>``), policy sets
(``policy:<set key>``) and callback requests (``callback:<set key>``). A read records the value
it saw (``None`` for absent), a write the value it installed; closing a row writes
``closed:<session>``. Each write-path transaction becomes an ``invoke`` when its first phase is
sent and an ``ok`` (committed) or ``fail`` (aborted, the SQLSTATE in ``error``) completion, or
an ``info`` one when the COMMIT's acknowledgement was lost (the outcome is unknown).
"""

from __future__ import annotations

from typing import Any


def _value(key: str, v: Any, session: str) -> Any:
    if key.startswith(("judge:", "policy:", "callback:")):
        return None if v is None else f"vote={v}"
    if v is None:
        return f"closed:{session}"
    return v


def txn_micro_ops(txn, session: str) -> list[list[Any]]:
    ops = [["r", k, None if v is None else _value(k, v, session)] for k, v in txn.reads]
    ops += [["w", k, _value(k, v, session)] for k, v in txn.writes]
    return ops


def from_sessions(sessions: dict, execution) -> list[dict]:
    """One invoke and one completion per write-path transaction, ordered by step position."""
    events: list[tuple[float, int, dict]] = []
    for process, (name, sess) in enumerate(sessions.items()):
        for txn in getattr(sess, "txns", []):
            log = getattr(txn, "step_log", [])
            if not log:
                continue
            first = log[0][1]
            last = log[-1][1]
            res = execution.results[last]
            at = res.completed_at if res.completed_at is not None else last
            micro = txn_micro_ops(txn, name)
            committed = txn.done and txn.outcome is not None and res.status == "ok" and log[-1][0] == "commit"
            invoke = {"type": "invoke", "process": process, "f": "txn",
                      "value": [[m[0], m[1], None] if m[0] == "r" else m for m in micro]}
            # A commit whose acknowledgement was lost may or may not have happened: Jepsen's :info
            # (its writes may be visible, its reads are unknown), never :fail.
            unknown = txn.outcome is not None and getattr(txn.outcome, "action", None) == "unknown"
            kind = "info" if unknown else ("ok" if committed else "fail")
            done = {"type": kind, "process": process, "f": "txn",
                    "value": [[m[0], m[1], None] if m[0] == "r" else m for m in micro] if unknown else micro}
            if not committed and not unknown and res.sqlstate:
                done["error"] = res.sqlstate
            events.append((first, 0, invoke))
            events.append((at + 0.5, 1, done))
    events.sort(key=lambda e: (e[0], e[1]))
    history = []
    for i, (_, _, op) in enumerate(events):
        op["index"] = i
        op["time"] = i
        history.append(op)
    return history
