"""The matrix heatmap in the layout of the paper's Fig. 4a: predicates down, levels across."""

from __future__ import annotations

from pathlib import Path


def heatmap(doc: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    levels = doc["levels"]
    rows = doc["predicates"] + sorted({c["predicate"] for c in doc.get("variants", [])})
    rate = {(c["predicate"], c["level"]): c for c in doc["cells"] + doc.get("variants", [])}
    grid = np.full((len(rows), len(levels)), np.nan)
    for i, p in enumerate(rows):
        for j, lv in enumerate(levels):
            if (p, lv) in rate:
                grid[i, j] = rate[(p, lv)]["rate"]
    fig, ax = plt.subplots(figsize=(1.2 * len(levels) + 2, 0.5 * len(rows) + 1.5))
    im = ax.imshow(grid, cmap="Reds", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(levels)), levels)
    ax.set_yticks(range(len(rows)), rows)
    for i, p in enumerate(rows):
        for j, lv in enumerate(levels):
            c = rate.get((p, lv))
            if c is None:
                continue
            text = f"{c['rate']:.2f}" + ("*" if c["rate"] != c["expected"] else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=8,
                    color="white" if c["rate"] > 0.5 else "black")
    n_main = len(doc["predicates"])
    if len(rows) > n_main:
        ax.axhline(n_main - 0.5, color="black", lw=1.5)
    ax.set_title(f"Anomaly admit rate ({doc['mode']} mode, {doc['trials']} schedules/cell, seed {doc['seed']};"
                 f" * differs from the guard map)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
