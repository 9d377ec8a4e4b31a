"""The timeline PNG of `bench_autoscale.py`: worker nodes, reader actors and encoder replicas per second,
drawn with Pillow (already installed with the project; no plotting library needed)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

SERIES = (("nodes", (31, 119, 180)), ("actors", (255, 127, 14)), ("replicas", (44, 160, 44)))
LABELS = {"nodes": "worker nodes", "actors": "reader actors", "replicas": "encoder replicas"}


def plot_timeline(samples: list[dict[str, Any]], path: Path, title: str) -> None:
    from PIL import Image, ImageDraw

    width, height, left, right, top, bottom = 1100, 420, 60, 20, 50, 60
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    t_max = max(s["t"] for s in samples) or 1.0
    y_max = max(max(s[k] for k, _ in SERIES) for s in samples) + 1

    def xy(t: float, v: float) -> tuple[float, float]:
        return (
            left + (width - left - right) * t / t_max,
            height - bottom - (height - top - bottom) * v / y_max,
        )

    # phases as shaded bands, labelled at their start
    start = 0
    for i in range(1, len(samples) + 1):
        if i == len(samples) or samples[i]["phase"] != samples[start]["phase"]:
            x0, _ = xy(samples[start]["t"], 0)
            x1, _ = xy(samples[i - 1]["t"], 0)
            shade = (245, 245, 245) if samples[start]["phase"].startswith("pipeline") else (235, 242, 250)
            draw.rectangle([x0, top, max(x1, x0 + 1), height - bottom], fill=shade)
            draw.text((x0 + 2, top + 2), samples[start]["phase"], fill=(90, 90, 90))
            start = i
    for v in range(int(y_max) + 1):  # grid
        _, y = xy(0, v)
        draw.line([left, y, width - right, y], fill=(220, 220, 220))
        draw.text((left - 20, y - 6), str(v), fill="black")
    for t in range(0, int(t_max) + 1, 10):
        x, _ = xy(t, 0)
        draw.text((x - 6, height - bottom + 6), f"{t}s", fill="black")
    for offset, (key, color) in enumerate(SERIES):
        points = []
        for a, b in itertools.pairwise(samples):  # steps: a value holds until the next sample
            points += [xy(a["t"], a[key] + 0.04 * offset), xy(b["t"], a[key] + 0.04 * offset)]
        if points:
            draw.line(points, fill=color, width=3)
        lx = left + 10 + offset * 170
        draw.line([lx, height - 22, lx + 24, height - 22], fill=color, width=3)
        draw.text((lx + 30, height - 28), LABELS[key], fill="black")
    draw.text((left, 15), title, fill="black")
    img.save(path)
