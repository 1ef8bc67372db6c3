"""The conformance table as a figure, in Hermitage's layout: levels down, cases across."""

from __future__ import annotations

from pathlib import Path

_FILL = {"✓": "#c9e7c9", "—": "#f2b3b3", "R/O": "#f7d8a0", "?": "#d0d0d0"}
_SHORT = {"blocking": "block", "abort": "abort", "snapshot": "snap"}


def draw(doc: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cases, levels = doc["cases"], doc["levels"]
    cell = {(c["level"], c["case"]): c for c in doc["cells"]}
    fig, ax = plt.subplots(figsize=(1.05 * len(cases) + 2.2, 0.62 * len(levels) + 1.3))
    differs = False
    for i, lv in enumerate(levels):
        for j, case in enumerate(cases):
            c = cell.get((lv, case))
            if c is None:
                continue
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=_FILL[c["label"]], edgecolor="white", lw=2))
            text = c["label"]
            if c["outcome"] == "prevented":
                text += "\n" + "+".join(_SHORT.get(h, h) for h in c["how"].split("+"))
            if c.get("differs_from_hermitage"):
                text += " *"
                differs = True
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=7.5)
    ax.set_xlim(0, len(cases))
    ax.set_ylim(len(levels), 0)
    ax.set_xticks([j + 0.5 for j in range(len(cases))], cases, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(levels))], levels, fontsize=8)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    note = "✓ prevented (how)  — anomaly observed  R/O prevented for read-only transactions only  ? run did not finish"
    if differs:
        note += "\n* differs from Hermitage's published column"
    ax.set_title(doc["database"]["config"], fontsize=10, pad=22)
    fig.text(0.5, 0.01, note, ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.06 if differs else 0.04, 1, 1))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
