"""Splitting a long sequence of rows into pages of about equal height, in order, none left out.

A figure of many rows (the BPE merge replay: one row per merge) is written as several numbered pages
rather than one page too tall for a slide, and rather than dropping rows.
"""
from __future__ import annotations

import math
from typing import Sequence


def balanced_pages(heights: Sequence[float], budget: float) -> tuple[range, ...]:
    """Consecutive ranges of row indices covering every row once, each page's heights summing to at most
    `budget` (a single row taller than that gets a page of its own), as few pages as that allows with
    this rule, and the pages about equally full (no last page of one row)."""
    n = len(heights)
    if n == 0:
        return (range(0),)
    total = float(sum(heights))
    for pages in range(max(1, math.ceil(total / budget)), n + 1):
        split = _split_evenly(heights, pages)
        if all(sum(heights[i] for i in page) <= budget or len(page) == 1 for page in split):
            return split
    return tuple(range(i, i + 1) for i in range(n))


def _split_evenly(heights: Sequence[float], pages: int) -> tuple[range, ...]:
    """Each row goes to the page its middle falls on when the rows are laid end to end over `pages`
    equal pages: contiguous, in order, about equal."""
    total = float(sum(heights)) or 1.0
    owners, above = [], 0.0
    for height in heights:
        owners.append(min(pages - 1, int((above + height / 2) * pages / total)))
        above += height
    starts = [i for i in range(len(owners)) if i == 0 or owners[i] != owners[i - 1]]
    ends = starts[1:] + [len(owners)]
    return tuple(range(start, end) for start, end in zip(starts, ends))
