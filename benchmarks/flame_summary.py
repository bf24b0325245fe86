"""The heaviest frames of a py-spy flame graph, as text.

Run: ``python benchmarks/flame_summary.py X.svg [--min 3] [--top 15]``

A flame graph is read by eye; ``docs/benchmarks.md`` also states in words what each
one shows. This lists every frame whose inclusive share of the samples is at least
``--min`` percent (each function once, at its largest share), and for the leaves — the
frames that were running — their exclusive share, so the two can be quoted.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import re
from collections import defaultdict
from pathlib import Path

_BOX = re.compile(
    r'<g><title>(.*?) \([\d,]+ samples?, [\d.]+%\)</title><rect [^>]*?y="(\d+)"[^>]*?'
    r'fg:x="(\d+)" fg:w="(\d+)"'
)


def boxes(svg: str) -> list[tuple[str, int, int, int]]:
    """(name, depth position y, first sample, samples) of every box in the graph."""
    return [
        (html.unescape(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)))
        for m in _BOX.finditer(svg)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("svg", type=Path)
    parser.add_argument("--min", type=float, default=3.0, help="percent of all samples")
    parser.add_argument("--top", type=int, default=15, help="running frames listed")
    args = parser.parse_args()
    found = boxes(args.svg.read_text())
    total = max(x + w for _n, _y, x, w in found)
    inclusive: dict[str, int] = defaultdict(int)
    for name, _y, _x, width in found:
        inclusive[name] = max(inclusive[name], width)
    # A box's own samples: its width less its children's, the boxes one row further
    # from the root (py-spy draws rows 16 px apart) inside its span.
    by_row: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for _name, y, x, width in found:
        by_row[y].append((x, width))
    rows = sorted(by_row)
    step = rows[1] - rows[0] if len(rows) > 1 else 16
    root_at_top = min(rows) == min(y for n, y, _x, _w in found if n == "all")
    exclusive: dict[str, int] = defaultdict(int)
    for name, y, x, width in found:
        child_row = y + step if root_at_top else y - step
        children = sum(w for cx, w in by_row.get(child_row, ()) if x <= cx < x + width)
        exclusive[name] += width - children
    print(f"{args.svg.name}: {total} samples; frames with ≥ {args.min}% of them (inclusive)")
    for name, share in sorted(inclusive.items(), key=lambda kv: -kv[1]):
        if share * 100 >= args.min * total:
            print(f"  {share * 100 / total:5.1f} %  {name}")
    print("running (exclusive share)")
    for name, share in sorted(exclusive.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {share * 100 / total:5.1f} %  {name}")


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):  # piped into head
        main()
