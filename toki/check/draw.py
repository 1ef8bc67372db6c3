"""Pictures of the cycles a check found (``toki check --plot DIR``), as SVG files, like Elle's plots.

One picture per cycle case of any workload (every case carrying ``names`` and ``steps``: the
cycles of list-append, rw-register, predicate and memory histories, and the memory's N2 cases):
the transactions on a circle, each edge of the cycle an arrow coloured by its relationship (ww,
wr, rw, process, real time) and labelled with its key or slot, and under the circle one line per
edge with its explanation and one per transaction with its op. Standard library only.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from xml.sax.saxutils import escape

COLOURS = {"ww": "#f58518", "wr": "#4c78a8", "rw": "#d62728", "process": "#7f7f7f", "realtime": "#7f7f7f"}
_W, _H = 128, 44          # a transaction's box
_LINE = 16                # legend line height
_WRAP = 118               # legend characters per line
_OP_LINES = 4             # legend lines per transaction's op at most


def cycle_cases(result: dict):
    """(anomaly type, index, case) for every case of ``result`` that is a cycle."""
    for typ, cases in result.get("anomalies", {}).items():
        if not isinstance(cases, list):
            continue
        for i, c in enumerate(cases):
            if isinstance(c, dict) and c.get("steps") and c.get("names"):
                yield typ, i, c


def draw_cycles(result: dict, folder: str | Path, prefix: str = "") -> list[Path]:
    """Write one SVG per cycle case into ``folder`` (created), named ``{prefix}{type}-{n}.svg``;
    each case gets its picture's path under ``"plot"``."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for typ, i, c in cycle_cases(result):
        path = out / f"{prefix}{typ}-{i + 1}.svg"
        path.write_text(cycle_svg(c, title=f"{typ} #{i + 1}"))
        c["plot"] = str(path)
        paths.append(path)
    return paths


def _key_of(step: dict) -> str:
    for k in ("slot", "key"):
        if step.get(k) is not None:
            return str(step[k])
    return ""


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def cycle_svg(case: dict, title: str = "") -> str:
    """The SVG text of one cycle case."""
    names = case["names"][:-1]
    steps = case["steps"]
    ops = case.get("cycle") or []
    n = len(names)
    r = max(120.0, 46.0 * n)
    width = max(2 * r + 2 * _W + 80, 900)
    cx, cy = width / 2, r + _H + 50
    pts = [(cx + r * math.cos(-math.pi / 2 + 2 * math.pi * i / n), cy + r * math.sin(-math.pi / 2 + 2 * math.pi * i / n))
           for i in range(n)]
    body: list[str] = []
    defs = "".join(
        f'<marker id="a-{k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{col}"/></marker>'
        for k, col in COLOURS.items())
    for i, st in enumerate(steps[:n]):
        (x1, y1), (x2, y2) = pts[i], pts[(i + 1) % n]
        dx, dy = x2 - x1, y2 - y1
        d = math.hypot(dx, dy) or 1.0
        nx, ny = dy / d, -dx / d                   # outward for clockwise travel round the circle
        bow = 0.22 * d + 24
        qx, qy = (x1 + x2) / 2 + nx * bow, (y1 + y2) / 2 + ny * bow
        sx, sy = _toward(x1, y1, qx, qy)
        ex, ey = _toward(x2, y2, qx, qy)
        typ = st.get("type", "")
        col = COLOURS.get(typ, "#333333")
        body.append(f'<path d="M {sx:.1f} {sy:.1f} Q {qx:.1f} {qy:.1f} {ex:.1f} {ey:.1f}" fill="none" '
                    f'stroke="{col}" stroke-width="2" marker-end="url(#a-{typ if typ in COLOURS else "ww"})"/>')
        # the label on the outer side of the arc's middle, anchored away from it
        lx, ly = (sx + 2 * qx + ex) / 4 + nx * 6, (sy + 2 * qy + ey) / 4 + ny * 6 + (8 if ny > 0.3 else 0)
        anchor = "start" if nx > 0.3 else "end" if nx < -0.3 else "middle"
        label = typ + (f" {_short(_key_of(st), 22)}" if _key_of(st) else "")
        for halo in (True, False):  # a white halo under the label, then the label (no paint-order needed)
            paint = 'fill="white" stroke="white" stroke-width="4"' if halo else f'fill="{col}"'
            body.append(f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" font-size="12" font-weight="bold" '
                        f'{paint}>{escape(label)}</text>')
    for i, (x, y) in enumerate(pts):
        op = ops[i] if i < len(ops) else {}
        sub = f"op {op.get('index', '?')} · p{op.get('process', '?')} · {op.get('type', '?')}" if op else ""
        body.append(f'<rect x="{x - _W / 2:.1f}" y="{y - _H / 2:.1f}" width="{_W}" height="{_H}" rx="8" '
                    f'fill="#f4f4f4" stroke="#555"/>')
        body.append(f'<text x="{x:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="14" '
                    f'font-weight="bold">{escape(names[i])}</text>')
        body.append(f'<text x="{x:.1f}" y="{y + 13:.1f}" text-anchor="middle" font-size="11" '
                    f'fill="#444">{escape(sub)}</text>')
    lines: list[tuple[str, str]] = []
    for i, st in enumerate(steps[:n]):
        head = f"{names[i]} → {names[(i + 1) % n]} ({st.get('type', '')}): "
        text = head + str(st.get("explanation", ""))
        for j, part in enumerate(textwrap.wrap(text, _WRAP, subsequent_indent="    ")):
            lines.append((part, COLOURS.get(st.get("type", ""), "#333") if j == 0 else "#333"))
    lines.append(("", "#333"))
    for i, name in enumerate(names):
        if i < len(ops):
            value = json.dumps(ops[i].get("value"), ensure_ascii=False)
            text = f"{name} = op {ops[i].get('index')} ({ops[i].get('type')}, process {ops[i].get('process')}): {value}"
            parts = textwrap.wrap(text, _WRAP, subsequent_indent="    ")
            if len(parts) > _OP_LINES:
                parts = parts[:_OP_LINES - 1] + [_short(parts[_OP_LINES - 1] + " " + " ".join(parts[_OP_LINES:]), _WRAP)]
            lines += [(part, "#333") for part in parts]
    y0 = cy + r + _H + 40
    for k, (text, col) in enumerate(lines):
        body.append(f'<text x="20" y="{y0 + k * _LINE:.1f}" font-size="12" font-family="monospace" '
                    f'fill="{col}">{escape(text)}</text>')
    height = y0 + len(lines) * _LINE + 20
    head = (f'<text x="20" y="28" font-size="18" font-weight="bold">{escape(title or case.get("type", "cycle"))}</text>'
            if title or case.get("type") else "")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif">'
            f'<defs>{defs}</defs><rect width="100%" height="100%" fill="white"/>{head}{"".join(body)}</svg>\n')


def _toward(x: float, y: float, tx: float, ty: float) -> tuple[float, float]:
    """The point where the line from a box's centre (x, y) toward (tx, ty) leaves the box."""
    dx, dy = tx - x, ty - y
    if dx == 0 and dy == 0:
        return x, y
    s = min((_W / 2 + 4) / abs(dx) if dx else math.inf, (_H / 2 + 4) / abs(dy) if dy else math.inf)
    return x + dx * s, y + dy * s


__all__ = ["cycle_svg", "draw_cycles"]
