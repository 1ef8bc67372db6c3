"""Swimlane pictures of a witness: agents as lanes, each storage call a box, in grant order.

Runs of ordinary calls by one agent are folded into one box ("12 calls"); the calls that make
the anomaly are drawn one by one and labelled. Those are found from the steps alone: a read by
one agent, another agent's read of the same moment, and the writes each then makes without
re-reading (the read-read-write-write shape of a lost update or a write skew). Time spent
waiting for a lock, or answered SQLITE_BUSY, is a hatched span.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from toki.harness.controller import StepRecord

_FAMILY = {"read": "#4c78a8", "write": "#f58518", "commit": "#54a24b", "txn": "#54a24b", "lock": "#b279a2",
           "start": "#bab0ac", "resume": "#bab0ac", "group": "#e5e5e5"}


def family(kind: str) -> str:
    if kind.endswith("commit"):
        return "commit"
    for f in ("read", "write", "txn", "lock", "start", "resume"):
        if kind.endswith(f) or kind == f:
            return f
    if kind.startswith("file-open-w") or kind in ("file-rename", "sql-script"):
        return "write"
    if kind.startswith("file-open"):
        return "read"
    return "write" if "write" in kind else "read"


_OBJ = re.compile(r"\b(?:from|into|update|join|table)\s+([A-Za-z_][\w.]*)", re.I)
_FILE = re.compile(r"'([^']+)'")


def objects(step: StepRecord) -> set[str]:
    """Tables (or files) a step touches, read from its SQL or file operation."""
    if step.kind.startswith("file"):
        quoted = _FILE.findall(step.detail)
        return set(quoted[:1]) if quoted else {step.detail.split()[-1]}
    return {m.lower() for m in _OBJ.findall(step.detail)}


def marked_steps(steps: list[StepRecord]) -> set[int]:
    """Seq numbers of the reads and writes that make the anomaly, from the steps alone.

    Two shapes, matched on the table or file each step touches: a read by X and a read by Y both
    before X's and Y's writes (read-read-write-write: lost update, write skew, double supersede),
    and a read by Y between two writes of X that Y then acts on (Y saw X's write half done).
    """
    by_seq = sorted((s for s in steps if s.status != "busy" or s.completed is not None), key=lambda s: s.seq)
    rw = [(s, family(s.kind), objects(s)) for s in by_seq]
    marks: set[int] = set()

    def next_write(agent: str, after: int, obj: set[str]):
        return next((s for s, f, o in rw if s.agent == agent and s.seq > after and f == "write" and o & obj), None)

    for x_read, f, o in rw:  # read-read-write-write
        if f != "read" or not o:
            continue
        wx = next_write(x_read.agent, x_read.seq, o)
        if wx is None:
            continue
        for y_read, f2, o2 in rw:
            if y_read.agent == x_read.agent or f2 != "read" or not (o & o2) or not (x_read.seq < y_read.seq < wx.seq):
                continue
            wy = next_write(y_read.agent, y_read.seq, o & o2)
            if wy is not None:
                marks.update({x_read.seq, y_read.seq, wx.seq, wy.seq})
                return marks
    for need_act in (True, False):  # a read of a half-done write, acted on (else failed on: a torn read)
        for w1, f, o in rw:
            if f != "write" or not o:
                continue
            for y_read, f2, o2 in rw:
                if y_read.seq <= w1.seq or y_read.agent == w1.agent or f2 != "read" or not (o & o2):
                    continue
                w2 = next_write(w1.agent, y_read.seq, o)
                wy = next_write(y_read.agent, y_read.seq, o & o2)
                if w2 is not None and (wy is not None or not need_act):
                    last_w1 = max((s for s, ff, oo in rw if s.agent == w1.agent and ff == "write" and oo & o2
                                   and s.seq < y_read.seq), key=lambda s: s.seq)
                    marks.update({last_w1.seq, y_read.seq, w2.seq} | ({wy.seq} if wy is not None else set()))
                    return marks
                break
    return marks


def _columns(steps: list[StepRecord], marks: set[int], fold: int = 3):
    """[(agent, [steps], folded?)] in grant order."""
    cols: list[tuple[str, list[StepRecord], bool]] = []
    run: list[StepRecord] = []

    def flush():
        if not run:
            return
        if len(run) > fold:
            cols.append((run[0].agent, list(run), True))
        else:
            cols.extend((s.agent, [s], False) for s in run)
        run.clear()

    for s in sorted(steps, key=lambda s: s.seq):
        special = s.seq in marks or s.blocked or s.status != "ok"
        if special or (run and run[0].agent != s.agent):
            flush()
        if special:
            cols.append((s.agent, [s], False))
        else:
            run.append(s)
    flush()
    return cols


def draw(witness, path: str | Path, *, title: str | None = None) -> Path:
    """Write the picture (``.png`` or ``.svg`` by the path's suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    steps = [s for s in witness.steps if s.seq is not None and s.seq >= 0]
    marks = marked_steps(steps)
    cols = _columns(steps, marks)
    agents = sorted({s.agent for s in steps})
    lane = {a: i for i, a in enumerate(agents)}
    col_of: dict[int, int] = {}
    for ci, (_, ss, _) in enumerate(cols):
        for s in ss:
            col_of[s.seq] = ci
    width = min(40.0, max(9.0, 0.42 * len(cols) + 3))
    fig, ax = plt.subplots(figsize=(width, 1.9 * len(agents) + 2.2))
    labelled = 0
    for ci, (agent, ss, folded) in enumerate(cols):
        y = len(agents) - 1 - lane[agent]
        s = ss[0]
        fam = "group" if folded else family(s.kind)
        edge = "#d62728" if (not folded and s.seq in marks) else "#333333"
        lw = 2.4 if edge == "#d62728" else 0.6
        ax.add_patch(Rectangle((ci + 0.06, y - 0.3), 0.88, 0.6, facecolor=_FAMILY[fam], edgecolor=edge,
                               linewidth=lw, hatch="xx" if s.status == "busy" or s.status == "error" else None))
        if folded:
            ax.text(ci + 0.5, y, f"{len(ss)}\ncalls", ha="center", va="center", fontsize=6.5, color="#555555")
        if not folded and s.waited_from is not None and s.waited_from in col_of:
            start = col_of[s.waited_from]
            if start < ci:
                ax.add_patch(Rectangle((start + 0.06, y - 0.12), ci - start, 0.24, facecolor="none",
                                       edgecolor="#7f7f7f", hatch="////", linewidth=0.4))
                ax.text((start + ci) / 2 + 0.5, y - 0.42, "blocked", ha="center", va="top", fontsize=7,
                        color="#7f7f7f")
        if not folded and (s.seq in marks or s.status != "ok"):
            up = labelled % 2 == 0
            labelled += 1
            text = s.detail if len(s.detail) <= 58 else s.detail[:57] + "…"
            ax.annotate(f"#{s.seq} {text}", xy=(ci + 0.5, y + (0.3 if up else -0.3)),
                        xytext=(ci + 0.5, y + (0.62 if up else -0.62)), ha="center", va="bottom" if up else "top",
                        fontsize=7, rotation=0, color="#d62728" if s.seq in marks else "#333333",
                        arrowprops=dict(arrowstyle="-", color="#999999", linewidth=0.5))
    ax.set_xlim(0, max(1, len(cols)))
    ax.set_ylim(-1, len(agents))
    ax.set_yticks([len(agents) - 1 - lane[a] for a in agents], [f"agent {a}" for a in agents])
    ax.set_xticks([])
    ax.set_xlabel("storage calls in the order they were granted (runs of ordinary calls folded)")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    version = witness.version if len(witness.version) <= 24 else witness.version[:23] + "…"
    name = f"{witness.engine} {version} ({witness.executed})"
    head = title or f"{name}, scenario {witness.scenario}: {len(witness.grants)} grants, " \
                    f"{witness.context_switches} context switches"
    first = witness.anomalies[0] if witness.anomalies else "no anomaly"
    lines = textwrap.wrap(first, width=int(width * 11))[:2]
    ax.set_title("\n".join([head] + lines), fontsize=9, loc="left")
    ax.legend(handles=[Patch(facecolor=_FAMILY[f], edgecolor="#333333", label=f) for f in
                       ("read", "write", "commit", "lock", "start", "group")]
              + [Patch(facecolor="white", edgecolor="#d62728", linewidth=2, label="the anomaly's reads and writes")],
              loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=7, fontsize=7, frameon=False)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
