"""Short labels that fit: one eliding rule for every panel, counting a wide (CJK) character as two columns.

A Chinese character is about twice as wide as a Latin letter in any font we draw with, so a limit
in characters would let a Chinese label run twice as long as an English one. Columns follow
Unicode's East Asian Width: W and F count 2, everything else 1.
"""
from __future__ import annotations

import unicodedata
from functools import lru_cache

LABEL_COLUMNS = 12   # token labels on axes and beside rows: about a short word


@lru_cache(maxsize=65536)
def columns(text: str) -> int:
    """Display width in columns: 2 for each wide character, 1 for the rest."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


@lru_cache(maxsize=65536)
def elide(text: str, limit: int = LABEL_COLUMNS) -> str:
    """text if it fits in `limit` columns, else its longest prefix that fits with "…" (1 column) after it."""
    if columns(text) <= limit:
        return text
    kept, used = [], 0
    for ch in text:
        width = columns(ch)
        if used + width > limit - 1:
            break
        kept.append(ch)
        used += width
    return "".join(kept) + "…"
