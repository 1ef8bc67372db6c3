"""Swimlane pictures of a witness: agents as lanes, each storage call a box, in grant order.

Runs of ordinary calls by one agent are folded into one box ("12 calls"). The calls that make the
anomaly are drawn one by one, tagged with their grant number, and listed under the lanes with
what they did (the statement with its bound values, or the file operation), so two writes to
one table can be told apart. Which calls those are is decided from the data (:func:`highlight`).
Every label is measured once laid out and shortened until it fits inside the picture. Time spent
waiting for a lock, or answered SQLITE_BUSY, is a hatched span.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from toki.harness.controller import StepRecord

_FAMILY = {"read": "#4c78a8", "write": "#f58518", "commit": "#54a24b", "txn": "#54a24b", "lock": "#b279a2",
           "start": "#bab0ac", "resume": "#bab0ac", "group": "#e5e5e5"}
_MARK = "#d62728"
_VALUES = " ← "  # what the SQL interception appends before a statement's bound values


def family(kind: str) -> str:
    if kind.endswith("commit") or kind == "file-fsync":
        return "commit"
    if kind == "handoff":  # an agent handing its call to the library's worker thread
        return "lock"
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
    return {m.lower() for m in _OBJ.findall(step.detail.split(_VALUES, 1)[0])}


@dataclass
class Highlight:
    seqs: set[int]
    how: str  # "conflict": the reads and writes of a conflict on ``objects``; "switches": none found
    objects: list[str]

    @property
    def label(self) -> str:
        if self.how == "conflict":
            names = self.objects[:3] + (["…"] if len(self.objects) > 3 else [])
            return "the anomaly's reads and writes (" + ", ".join(names) + ")"
        return "the calls at each context switch (no conflicting reads and writes found)"


def _conflicts(rw: list[tuple[StepRecord, str]]) -> tuple[int, set[int]]:
    """How strongly the agents' accesses to one table or file interleave, and the calls that show it.

    3: an agent wrote on a read another agent's write made stale (read, other's write, write), or
    acted on a read of another agent's half-done work (write, other's read, write, and the reader
    writes after it); 2: such a half-done read that the reader did not act on (a torn read);
    1: writes of two agents interleaved; 0: the agents' accesses do not interleave.
    """
    marks: dict[int, set[int]] = {1: set(), 2: set(), 3: set()}

    def last(agent, fam, before, other=False):
        return next((s for s, f in reversed(rw) if s.seq < before and f == fam
                     and ((s.agent != agent) if other else (s.agent == agent))), None)

    def first(agent, fam, after):
        return next((s for s, f in rw if s.seq > after and f == fam and s.agent == agent), None)

    for s, f in rw:
        if f == "write":
            r = last(s.agent, "read", s.seq)
            for w, g in rw if r is not None else ():  # another agent's write between this one's read and write
                if g == "write" and w.agent != s.agent and r.seq < w.seq < s.seq:
                    mine = last(w.agent, "read", w.seq)
                    marks[3] |= {r.seq, w.seq, s.seq} | ({mine.seq} if mine else set())
            before = last(s.agent, "write", s.seq, other=True)
            if before is not None and first(before.agent, "write", s.seq) is not None:
                marks[1] |= {before.seq, s.seq, first(before.agent, "write", s.seq).seq}
        else:
            w1 = last(s.agent, "write", s.seq, other=True)
            w2 = first(w1.agent, "write", s.seq) if w1 is not None else None
            if w2 is None:
                continue
            acted = first(s.agent, "write", s.seq)
            if acted is not None:
                marks[3] |= {w1.seq, s.seq, w2.seq, acted.seq}
            else:
                marks[2] |= {w1.seq, s.seq, w2.seq}
    strength = max((k for k, v in marks.items() if v), default=0)
    return strength, marks.get(strength, set())


def _mentioned(findings: list[str], failed: list[str], by_obj: dict, steps: list[StepRecord]) -> dict[str, tuple]:
    """(named, values) per table or file: named when a finding names it or a failed agent's last call
    touched it; values, how many words of the findings its calls' bound values contain."""
    text = " ".join(findings)
    words = {w.lower() for w in re.findall(r"[\w.-]{3,}", text)}
    failed = set(failed) | set(re.findall(r"\bagent (\S+) failed", text))
    last_obj: set[str] = set()
    for a in failed:
        mine = [s for s in steps if s.agent == a and objects(s)]
        if mine:
            last_obj |= objects(max(mine, key=lambda s: s.seq))
    out = {}
    for obj, rw in by_obj.items():
        named = obj in last_obj or re.search(rf"(?<![\w.]){re.escape(obj)}(?![\w])", text, re.I) is not None
        values = " ".join(s.detail.split(_VALUES, 1)[1] for s, _ in rw if _VALUES in s.detail).lower()
        hits = sum(1 for w in words if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", values))
        out[obj] = (named, hits)
    return out


def highlight(steps: list[StepRecord], findings: list[str] | tuple = (), failed: list[str] | tuple = ()) -> Highlight:
    """The calls that make the anomaly, from the data.

    Every table or file two agents touch is scored by how its reads and writes interleave
    (:func:`_conflicts`); a table or file the findings name (or the last call of an agent that
    failed) comes first, then the strongest interleaving, then the one whose bound values hold
    most words of the findings. Its conflicting reads and writes are the anomaly's. When no
    accesses interleave, the calls at each context switch are shown instead, and said so.
    """
    by_seq = sorted((s for s in steps if s.status != "busy" or s.completed is not None), key=lambda s: s.seq)
    by_obj: dict[str, list[tuple[StepRecord, str]]] = {}
    for s in by_seq:
        f = family(s.kind)
        if f in ("read", "write"):
            for o in objects(s):
                by_obj.setdefault(o, []).append((s, f))
    by_obj = {o: rw for o, rw in by_obj.items() if len({s.agent for s, _ in rw}) > 1}
    mention = _mentioned(list(findings), list(failed), by_obj, by_seq)
    scored = []
    for obj, rw in by_obj.items():
        strength, marks = _conflicts(rw)
        if strength:
            named, hits = mention[obj]
            scored.append(((named, strength, hits), obj, marks))
    if scored:
        best = max(k for k, _, _ in scored)
        chosen = [(obj, marks) for k, obj, marks in scored if k == best]
        return Highlight(set().union(*(m for _, m in chosen)), "conflict", sorted(o for o, _ in chosen))
    calls = [s for s in by_seq if s.kind != "start"]
    seqs = set()
    for a, b in zip(calls, calls[1:]):
        if a.agent != b.agent:
            seqs |= {a.seq, b.seq}
    return Highlight(seqs, "switches", [])


def marked_steps(steps: list[StepRecord]) -> set[int]:
    """Seq numbers of the calls :func:`highlight` picks from the steps alone."""
    return highlight(steps).seqs


def shorten(detail: str, limit: int, head_min: int = 28) -> str:
    """A step's detail in at most ``limit`` characters, keeping its bound values: a statement's
    ``VALUES (?, ...)`` placeholders go first, then the statement is cut (down to ``head_min``
    characters, which name the operation and its table), the values last."""
    head, sep, values = " ".join(detail.split()).partition(_VALUES)
    if sep:
        head = re.sub(r"\s*VALUES\s*\((?:\s*\?\s*,?)+\)", "", head, flags=re.I)
    text = head + sep + values
    if len(text) <= limit:
        return text
    if not sep or limit - len(sep) < head_min + 8:  # no values, or no room for both
        return text[: limit - 1] + "…"
    keep = min(len(values), limit - len(sep) - min(len(head), head_min))
    room = limit - len(sep) - keep
    cut = head if len(head) <= room else head[: room - 1].rstrip() + "…"
    vals = values if len(values) <= keep else values[: keep - 1] + "…"
    return cut + sep + vals


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


def _fit(fig) -> None:
    """Shorten (or move) every text of ``fig`` that reaches past the figure's edge; a legend too
    wide for the figure gets a smaller font."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width
    for legend in fig.legends:
        size = legend.get_texts()[0].get_fontsize() if legend.get_texts() else 0
        while size > 4 and legend.get_window_extent(renderer).width > width - 4:
            size -= 0.5
            for t in legend.get_texts():
                t.set_fontsize(size)
            fig.canvas.draw()
    for t in list(fig.texts) + [t for ax in fig.axes for t in ax.texts]:
        box = t.get_window_extent(renderer)
        if box.x0 >= 0 and box.x1 <= width:
            continue
        s = t.get_text()
        while len(s) > 2:
            box = t.get_window_extent(renderer)
            if box.x1 - box.x0 <= width - 4:
                break
            s = s[: max(1, int(len(s) * (width - 4) / (box.x1 - box.x0)) - 2)] + "…"
            t.set_text(s)
        box = t.get_window_extent(renderer)
        if box.x0 < 0 or box.x1 > width:  # it fits now; slide it inside
            dx = (2 - box.x0) if box.x0 < 0 else (width - 2 - box.x1)
            x, y = t.get_position()
            inv = t.get_transform().inverted()
            (nx, _), (ox, _) = inv.transform([(box.x0 + dx, box.y0), (box.x0, box.y0)])
            t.set_position((x + nx - ox, y))


def figure(witness, *, title: str | None = None):
    """The swimlane picture of ``witness`` as a matplotlib figure (every text inside it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    steps = [s for s in witness.steps if s.seq is not None and s.seq >= 0]
    hl = highlight(steps, witness.anomalies, list(getattr(witness, "failed", None) or ()))
    marks = hl.seqs
    cols = _columns(steps, marks)
    agents = sorted({s.agent for s in steps})
    lane = {a: i for i, a in enumerate(agents)}
    col_of = {s.seq: ci for ci, (_, ss, _) in enumerate(cols) for s in ss}
    keyed = [ss[0] for _, ss, folded in cols if not folded and (ss[0].seq in marks or ss[0].status != "ok")]

    width = min(40.0, max(9.0, 0.42 * len(cols) + 3))
    chars = int((width - 0.3) / 0.06)  # 7-point monospace characters across the picture
    version = witness.version if len(witness.version) <= 24 else witness.version[:23] + "…"
    head = title or (f"{witness.engine} {version} ({witness.executed}), scenario {witness.scenario}: "
                     f"{len(witness.grants)} grants, {witness.context_switches} context switches")
    first = witness.anomalies[0] if witness.anomalies else "no anomaly"
    heading = [head] + textwrap.wrap(first, width=int(width * 11))[:2]
    lane_in, top_in, key_line_in = 1.15, 0.25 + 0.19 * len(heading), 0.17
    bottom_in = 0.75 + (key_line_in * len(keyed) + 0.15 if keyed else 0)
    height = top_in + lane_in * len(agents) + 0.3 + bottom_in
    fig = plt.figure(figsize=(width, height))
    left_in = 0.95
    ax = fig.add_axes((left_in / width, bottom_in / height, 1 - (left_in + 0.2) / width,
                       (lane_in * len(agents) + 0.3) / height))
    for ci, (agent, ss, folded) in enumerate(cols):
        y = len(agents) - 1 - lane[agent]
        s = ss[0]
        fam = "group" if folded else family(s.kind)
        marked = not folded and s.seq in marks
        ax.add_patch(Rectangle((ci + 0.06, y - 0.28), 0.88, 0.56, facecolor=_FAMILY[fam],
                               edgecolor=_MARK if marked else "#333333", linewidth=2.4 if marked else 0.6,
                               hatch="xx" if s.status in ("busy", "error") else None))
        if folded:
            ax.text(ci + 0.5, y, f"{len(ss)}\ncalls", ha="center", va="center", fontsize=6.5, color="#555555")
        elif s.waited_from is not None and col_of.get(s.waited_from, ci) < ci:
            start = col_of[s.waited_from]
            ax.add_patch(Rectangle((start + 0.06, y - 0.12), ci - start, 0.24, facecolor="none",
                                   edgecolor="#7f7f7f", hatch="////", linewidth=0.4))
            ax.text((start + ci) / 2 + 0.5, y - 0.4, "blocked", ha="center", va="top", fontsize=7, color="#7f7f7f")
        if s in keyed:
            up = keyed.index(s) % 2 == 0  # neighbours alternate above and below their boxes
            ax.text(ci + 0.5, y + (0.32 if up else -0.32), f"#{s.seq}", ha="center", va="bottom" if up else "top",
                    fontsize=7, color=_MARK if marked else "#333333")
    for a, why in sorted((getattr(witness, "failed", None) or {}).items()):
        if a in lane:  # an agent that failed outside a storage call (a parse of what it read)
            end = max(ci for ci, (agent, _, _) in enumerate(cols) if agent == a) + 1
            ax.text(end + 0.1, len(agents) - 1 - lane[a], f"✗ failed: {why}", ha="left", va="center", fontsize=7,
                    color=_MARK)
    ax.set_xlim(0, max(1, len(cols)))
    ax.set_ylim(-0.6, len(agents) - 0.4)
    ax.set_yticks([])
    ax.set_xticks([])
    for a in agents:
        name = a if len(a) <= 10 else a[:9] + "…"
        fig.text((left_in - 0.1) / width, (bottom_in + lane_in * (len(agents) - 1 - lane[a] + 0.5) + 0.15) / height,
                 f"agent {name}", ha="right", va="center", fontsize=9)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    for i, line in enumerate(heading):  # one text per line: a line cut to fit never takes the next with it
        fig.text(0.1 / width, 1 - (0.15 + 0.19 * i) / height, line, ha="left", va="top", fontsize=9)
    fig.text(0.5, (bottom_in - 0.1) / height, "storage calls in the order they were granted (runs of ordinary "
             "calls folded)", ha="center", va="top", fontsize=8)
    fig.legend(handles=[Patch(facecolor=_FAMILY[f], edgecolor="#333333", label=f) for f in
                        ("read", "write", "commit", "lock", "start", "group")]
               + [Patch(facecolor="white", edgecolor=_MARK, linewidth=2, label=hl.label)],
               loc="upper center", bbox_to_anchor=(0.5, (bottom_in - 0.3) / height), ncol=7, fontsize=7,
               frameon=False)
    for i, s in enumerate(keyed):
        what = shorten(s.detail, chars - 24)
        if s.status != "ok":
            what += f"  [{s.status}{': ' + s.error if s.error else ''}]"
        fig.text(0.1 / width, (bottom_in - 0.62 - key_line_in * i) / height,
                 f"#{s.seq}  {s.agent}  {family(s.kind)}: {what}", ha="left", va="top", fontsize=7,
                 family="monospace", color=_MARK if s.seq in marks else "#333333")
    _fit(fig)
    return fig


def draw(witness, path: str | Path, *, title: str | None = None) -> Path:
    """Write the picture (``.png`` or ``.svg`` by the path's suffix)."""
    import matplotlib
    import matplotlib.pyplot as plt

    # Calls are drawn as their text: a Cypher query's $parameters are not mathtext
    with matplotlib.rc_context({"text.parse_math": False}):
        fig = figure(witness, title=title)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=130)
    plt.close(fig)
    return out
