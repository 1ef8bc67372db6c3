"""The matrix's phantom rows (P3, P3-reread) run on a real database and written as a Jepsen
history with predicate reads, for ``toki check --workload predicate`` (docs/checker.md).

Each trial runs the row's programs exactly as the matrix does (same builders, seeds, witness or
random interleaving, lane and reset), with each session's connection wrapped so that the
statements on the ``policy`` table are recorded as they run:

- ``select ... from policy where set_key = %s and active`` is a predicate read
  ``["rp", {"where": {"set_key": S, "active": true}}, rows]``, each returned row
  ``["policy:<policy_id>", {"set_key": S, "chosen_index": i, "active": true}]``;
- ``insert into policy (...)`` is a write of the same shape (the row the predicate would match);
- other inserts (the re-read form's ``callback_log``) are writes of ``"<table>:<first value>"``.

A session becomes one transaction: an ``invoke`` at its first step and an ``ok`` (committed) or
``fail`` (rolled back, its SQLSTATE in ``error``) completion at its last, in the order the
steps ran. Each trial has its own processes (2 per trial) and its own keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from toki.levels import Level, parse_level
from toki.matrix.cells import Bench, build_schedule, trial_rng
from toki.matrix.workloads import BUILDERS

ROWS = ("P3", "P3-reread")
_INSERT = re.compile(r"^\s*insert\s+into\s+(\w+)\s*\(([^)]*)\)\s*values\s*\(([^)]*)\)", re.I)
_LITERAL = re.compile(r"\s*(%s|'(?:[^']|'')*'|-?\d+(?:\.\d+)?|true|false|null|[^,]+?)\s*(?:,|$)", re.I)
_POLICY_READ = re.compile(r"^\s*select\s+policy_id\s*,\s*chosen_index\s+from\s+policy\s+where\s+set_key\s*=\s*%s"
                          r"\s+and\s+active\b", re.I)


class _Recorder:
    """A session's connection that records its policy reads and its inserts as micro-ops."""

    def __init__(self, conn, log: list):
        self._conn, self._log = conn, log

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def execute(self, sql, params=None, *a, **kw):
        cur = self._conn.execute(sql, params, *a, **kw)
        text = str(sql)
        if _POLICY_READ.match(text):
            set_key = params[0]
            rows = cur.fetchall()
            self._log.append(["rp", {"where": {"set_key": set_key, "active": True}},
                              [[f"policy:{pid}", _policy_row(set_key, ci)] for pid, ci in rows]])
            return _Rows(rows)
        m = _INSERT.match(text)
        if m:
            table, cols = m.group(1).lower(), [c.strip() for c in m.group(2).split(",")]
            vals = dict(zip(cols, _values(m.group(3), list(params or ()))))
            if table == "policy":
                self._log.append(["w", f"policy:{vals['policy_id']}",
                                  _policy_row(vals["set_key"], vals.get("chosen_index"))])
            elif vals:
                first = next(iter(vals.values()))
                self._log.append(["w", f"{table}:{first}", {c: _plain(v) for c, v in list(vals.items())[1:]}])
        return cur


class _Rows:
    def __init__(self, rows):
        self._rows = rows

    def fetchall(self):
        return list(self._rows)

    def fetchone(self):
        return self._rows[0] if self._rows else None


def _values(text: str, params: list) -> list:
    """The values of an INSERT's VALUES list: parameters in order, and SQL literals."""
    out = []
    for tok in (t for t in _LITERAL.findall(text) if t):
        low = tok.lower()
        if tok == "%s":
            out.append(params.pop(0) if params else None)
        elif tok.startswith("'"):
            out.append(tok[1:-1].replace("''", "'"))
        elif low in ("true", "false", "null"):
            out.append({"true": True, "false": False, "null": None}[low])
        elif re.fullmatch(r"-?\d+", tok):
            out.append(int(tok))
        else:
            out.append(tok)
    return out


def _policy_row(set_key, chosen_index) -> dict:
    return {"set_key": set_key, "chosen_index": chosen_index, "active": True}


def _plain(v):
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def _recorded(trial) -> dict[str, list]:
    """Wrap the trial's Python steps so each session's statements land in its own log."""
    logs: dict[str, list] = {s: [] for s in trial.programs}
    for s, prog in trial.programs.items():
        for i, (label, body) in enumerate(prog):
            if callable(body):
                prog[i] = (label, _wrap(body, logs[s]))
    return logs


def _wrap(fn: Callable, log: list) -> Callable:
    def step(conn, ctx):
        return fn(_Recorder(conn, log), ctx)
    return step


def history(row: str, level: Level | str, *, trials: int = 10, seed: int = 42, mode: str = "witness",
            dsn: str | None = None, server=None, on_trial: Callable[[], None] | None = None) -> list[dict]:
    """``trials`` trials of a phantom row at one level, as one Jepsen history (a list of ops)."""
    from toki.db.server import resolve
    from toki.errors import ConfigError
    from toki.sched.runner import Runner

    if row not in ROWS:
        raise ConfigError(f"no history export for row {row!r}", fix="use one of " + ", ".join(ROWS))
    lvl = parse_level(level) if isinstance(level, str) else level
    if lvl.callback:
        raise ConfigError("the phantom rows' histories are exported at plain levels", fix="drop +cb from the level")
    bench = Bench(Runner(server or resolve(dsn), record_history=False))
    events: list[tuple[float, int, dict]] = []
    try:
        for t in range(trials):
            rng = trial_rng(seed, row, lvl.name, mode, t)
            trial = BUILDERS[row](rng)
            logs = _recorded(trial)
            lane = bench.lane(trial.judge_log_form)
            if hasattr(lane, "reset_store"):
                lane.reset_store()
            else:
                from toki.matrix.cells import RESET_TABLES

                lane.admin.execute(RESET_TABLES)
            trial.setup(lane.admin)
            schedule = build_schedule(trial, lvl, mode, rng)
            result = bench.runner.run(schedule, lvl, lane=lane, check_expect=False)
            events += _trial_events(t, result, logs, base=t * 10_000)
            if on_trial:
                on_trial()
    finally:
        bench.close()
    events.sort(key=lambda e: (e[0], e[1]))
    ops = []
    for i, (_, _, op) in enumerate(events):
        op["index"] = op["time"] = i
        ops.append(op)
    return ops


def _trial_events(t: int, result, logs: dict[str, list], base: int) -> list:
    out = []
    for p, (name, micro) in enumerate(logs.items()):
        steps = [s for s in result.steps if s.session == name]
        if not steps or not micro:
            continue
        first = min(s.index for s in steps)
        last = max(s.completed_at if s.completed_at is not None else s.index for s in steps)
        committed = result.sessions.get(name) == "committed"
        process = 2 * t + p
        invoke = [[m[0], m[1], None] if m[0] == "rp" else m for m in micro]
        done = {"type": "ok" if committed else "fail", "process": process, "f": "txn", "value": micro}
        err = next((s.sqlstate for s in steps if s.status == "error" and s.sqlstate), None)
        if not committed and err:
            done["error"] = err
        out.append((base + first, 0, {"type": "invoke", "process": process, "f": "txn", "value": invoke}))
        out.append((base + last + 0.5, 1, done))
    return out


__all__ = ["ROWS", "history"]
