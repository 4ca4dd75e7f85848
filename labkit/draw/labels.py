"""Where a chart's point labels go: a text position per point that keeps each label off the other
labels, the markers, the lines and the plot's edge."""

from __future__ import annotations

import math

#: plotly's text positions, each with the side its label box lies on (x, y: -1, 0 or 1; y up)
TEXT_POSITIONS = (
    ("top center", 0, 1),
    ("bottom center", 0, -1),
    ("middle right", 1, 0),
    ("middle left", -1, 0),
    ("top right", 1, 1),
    ("top left", -1, 1),
    ("bottom right", 1, -1),
    ("bottom left", -1, -1),
)


def place_labels(points, labels, *, size, lines=(), font_px: float = 10, marker_px: float = 10) -> list:
    """A plotly ``textposition`` per labelled point, so that where any position allows, no label
    lies over another label, a marker or a line, or past the plot's edge.

    Args:
        points: (x, y) per point in plot pixels (x right, y up); None for a point not drawn.
        labels: each point's label; ``<br>`` starts a new line.
        size: (width, height) of the plot area (pixels).
        lines: polylines to keep clear, each a list of (x, y) in plot pixels.
        font_px: the labels' font size (pixels).
        marker_px: the markers' diameter (pixels).

    Returns:
        One of plotly's text positions per point (``"top center"``, ...).
    """
    char_w, line_h, gap = 0.6 * font_px, 1.3 * font_px, marker_px / 2 + 2
    drawn = [p for p in points if p is not None]
    marks = [(x - marker_px / 2, y - marker_px / 2, x + marker_px / 2, y + marker_px / 2) for x, y in drawn]
    boxes: list = []

    def box(p, w, h, sx, sy):
        cx, cy = p[0] + sx * (w / 2 + gap), p[1] + sy * (h / 2 + gap)
        return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)

    def overlap(a, b) -> float:
        return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))

    def crossings(b, line) -> int:
        hits = 0
        for (x0, y0), (x1, y1) in zip(line, line[1:]):
            steps = max(2, int(abs(x1 - x0) + abs(y1 - y0)) // 3)
            hits += any(
                b[0] <= x0 + t / steps * (x1 - x0) <= b[2] and b[1] <= y0 + t / steps * (y1 - y0) <= b[3]
                for t in range(steps + 1)
            )
        return hits

    def apart(b, q) -> float:  # a point's distance from a label box (pixels)
        return math.hypot(max(b[0] - q[0], 0.0, q[0] - b[2]), max(b[1] - q[1], 0.0, q[1] - b[3]))

    def ambiguous(b, own) -> bool:  # another point about as near the label as its own: which is it?
        return any(q is not own and apart(b, q) < apart(b, own) + 5 for q in drawn)

    def cost(b, own) -> float:
        out = (
            sum(overlap(b, o) for o in boxes) + sum(overlap(b, m) for m in marks) + 300.0 * ambiguous(b, own)
        )
        out += 500.0 * sum(crossings(b, line) for line in lines if None not in line)
        w, hh = size
        return out + 50.0 * (max(0.0, -b[0]) + max(0.0, b[2] - w) + max(0.0, -b[1]) + max(0.0, b[3] - hh))

    def crowd(i) -> int:  # the most crowded points choose first
        x, y = points[i]
        return -sum(1 for q in drawn if abs(q[0] - x) < 90 and abs(q[1] - y) < 30)

    chosen = ["top center"] * len(points)
    for i in sorted((i for i, p in enumerate(points) if p is not None), key=crowd):
        rows = str(labels[i]).split("<br>")
        w, h = char_w * max(len(t) for t in rows), line_h * len(rows)
        costs = [
            (cost(box(points[i], w, h, sx, sy), points[i]), k) for k, (_, sx, sy) in enumerate(TEXT_POSITIONS)
        ]
        _, k = min(costs)
        chosen[i] = TEXT_POSITIONS[k][0]
        boxes.append(box(points[i], w, h, TEXT_POSITIONS[k][1], TEXT_POSITIONS[k][2]))
    return chosen
