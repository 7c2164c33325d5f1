"""Applying BPE merges to the symbols of a word, exactly as Hugging Face ``tokenizers`` does.

``ranks`` maps a pair of adjacent symbol ids to (rank, merged id). A word's symbols sit in a linked
list; a heap holds (rank, position) of every pair that has a merge. The lowest rank wins, the
leftmost position on ties; after each merge the two new neighbour pairs enter the heap at once, and
an entry whose pair changed meanwhile is skipped. ``merge_word`` does this for one word (encode);
``merge_traced`` does it for all words of a sentence in one heap ordered (rank, word, position),
which per word is the same order, and logs every merge so the replay can show the sentence after
each step.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Mapping, Sequence

Ranks = Mapping[tuple[int, int], tuple[int, int]]


def merge_word(syms: list[int], ranks: Ranks) -> list[int]:  # [n] -> [m <= n]
    """The word's symbols after every merge; ``syms`` is consumed."""
    n = len(syms)
    if n < 2:
        return syms
    nxt = list(range(1, n + 1))  # n: no next symbol
    prv = list(range(-1, n - 1))
    heap = [(m[0], i, m[1]) for i, p in enumerate(zip(syms, syms[1:])) if (m := ranks.get(p)) is not None]
    heapq.heapify(heap)
    while heap:
        _, i, c = heapq.heappop(heap)
        j = nxt[i]
        if syms[i] < 0 or j >= n:
            continue  # merged into its left neighbour, or now the last symbol
        m = ranks.get((syms[i], syms[j]))
        if m is None or m[1] != c:
            continue  # the pair at i changed since this entry was pushed
        syms[i], syms[j] = c, -1
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
        if prv[i] >= 0 and (m := ranks.get((syms[prv[i]], c))) is not None:
            heapq.heappush(heap, (m[0], prv[i], m[1]))
        if nxt[i] < n and (m := ranks.get((c, syms[nxt[i]]))) is not None:
            heapq.heappush(heap, (m[0], i, m[1]))
    return [s for s in syms if s >= 0]


@dataclass(frozen=True)
class StepSummary:
    rank: int
    left: int  # symbol ids
    right: int
    merged: int
    count: int  # occurrences merged in this step
    log_end: int  # the merge log up to here is applied after this step


@dataclass
class MergeLog:
    """Every merge of a sentence in order, as (word, position, merged id), and the steps they form."""

    initial: list[list[int]]  # symbols of each word before merging
    merges: list[tuple[int, int, int]]
    steps: list[StepSummary]
    final: list[list[int]]  # symbols of each word after merging
    final_positions: list[list[int]]  # position (initial index) of each final symbol


def merge_traced(words: Sequence[Sequence[int]], ranks: Ranks) -> MergeLog:
    """Merge all words; consecutive merges of one pair at one rank form a step."""
    syms = [list(w) for w in words]
    nxt = [list(range(1, len(w) + 1)) for w in syms]
    prv = [list(range(-1, len(w) - 1)) for w in syms]
    heap = [(m[0], k, i, m[1]) for k, w in enumerate(syms) for i, p in enumerate(zip(w, w[1:]))
            if (m := ranks.get(p)) is not None]
    heapq.heapify(heap)
    merges: list[tuple[int, int, int]] = []
    steps: list[StepSummary] = []
    current: tuple[int, int, int, int] | None = None  # rank, left, right, merged of the open step
    count = 0
    while heap:
        rank, k, i, c = heapq.heappop(heap)
        w, nx, pv = syms[k], nxt[k], prv[k]
        n = len(w)
        j = nx[i]
        if w[i] < 0 or j >= n:
            continue
        m = ranks.get((w[i], w[j]))
        if m is None or m[1] != c:
            continue
        key = (rank, w[i], w[j], c)
        if key != current:
            if current is not None:
                steps.append(StepSummary(*current, count, len(merges)))
            current, count = key, 0
        count += 1
        merges.append((k, i, c))
        w[i], w[j] = c, -1
        nx[i] = nx[j]
        if nx[i] < n:
            pv[nx[i]] = i
        if pv[i] >= 0 and (m := ranks.get((w[pv[i]], c))) is not None:
            heapq.heappush(heap, (m[0], k, pv[i], m[1]))
        if nx[i] < n and (m := ranks.get((c, w[nx[i]]))) is not None:
            heapq.heappush(heap, (m[0], k, i, m[1]))
    if current is not None:
        steps.append(StepSummary(*current, count, len(merges)))
    positions = [[i for i, s in enumerate(w) if s >= 0] for w in syms]
    return MergeLog([list(w) for w in words], merges, steps, [[s for s in w if s >= 0] for w in syms], positions)


class Replay:
    """The symbols of every word after any prefix of the merge log, computed when asked.

    Keeping each step's full piece list would cost steps × symbols memory on a long text; replaying
    from the last state asked for makes walking the steps in order linear."""

    def __init__(self, log: MergeLog) -> None:
        self._log = log
        self._reset()

    def _reset(self) -> None:
        self._at = 0
        self._syms = [list(w) for w in self._log.initial]
        self._nxt = [list(range(1, len(w) + 1)) for w in self._log.initial]

    def symbols_after(self, log_end: int) -> list[list[int]]:
        """Symbols of each word after the first ``log_end`` merges."""
        if log_end < self._at:
            self._reset()
        for k, i, c in self._log.merges[self._at : log_end]:
            w, nx = self._syms[k], self._nxt[k]
            j = nx[i]
            w[i], w[j] = c, -1
            nx[i] = nx[j]
        self._at = log_end
        return [[s for s in w if s >= 0] for w in self._syms]
