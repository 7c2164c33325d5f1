"""The numbers behind the Tokens panel, Qt-free: the token chips and the replay of the BPE merges.

The replay starts from the sentence as bytes (step 0); step k shows the pieces after the model's
k-th merge (lowest rank first, applied everywhere it occurs), as a hand-worked BPE example does for
订单. Merges never cross a pre-token boundary (a word, a number, a run of spaces), so the pieces
that start one are marked: the panel leaves a wider gap before them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from core.raw_export import csv_text
from core.tokenizer import Tokenization
from core.trace import Trace

FRAGMENT_MARK = "‹"   # display_piece writes bytes that are part of a character as ‹e8 ae›


@dataclass(frozen=True)
class TokenChip:
    """One token as a chip: its readable piece, id and half-open byte span [start, end)."""
    piece: str
    id: int
    byte_span: tuple[int, int] | None   # None: the token was appended by id, not typed
    fragment: bool                      # holds only part of a character's bytes
    gap_before: bool                    # starts a new pre-token (word)

    @property
    def lines(self) -> tuple[str, str, str]:
        span = "bytes —" if self.byte_span is None else f"bytes {self.byte_span[0]}–{self.byte_span[1]}"
        return self.piece, f"id {self.id}", span


def token_chips(trace: Trace, replay: MergeReplay | None = None) -> tuple[TokenChip, ...]:
    """replay: the trace's MergeReplay where the caller has one (its word starts are not counted again)."""
    tok = trace.tokenization
    if tok is None:   # tokens appended by id: no byte spans
        return tuple(TokenChip(label, int(i), None, FRAGMENT_MARK in label, False)
                     for label, i in zip(trace.labels(), trace.input_ids))
    words = (replay if replay is not None else MergeReplay(tok)).word_start_bytes
    return tuple(TokenChip(t.display, t.id, (t.byte_start, t.byte_end), FRAGMENT_MARK in t.display,
                           t.byte_start in words) for t in tok.tokens)


def tokens_csv(trace: Trace | None) -> str:
    """One row per token: position, id, readable piece, byte and character spans, UTF-8 bytes in hex."""
    rows: list[list] = [["position", "id", "piece", "byte_start", "byte_end", "char_start", "char_end",
                         "utf8_hex"]]
    if trace is not None and trace.tokenization is not None:
        rows += [[i, t.id, t.display, t.byte_start, t.byte_end, t.char_start, t.char_end, t.raw.hex(" ")]
                 for i, t in enumerate(trace.tokenization.tokens)]
    elif trace is not None:
        rows += [[i, int(token_id), trace.label(i), "", "", "", "", ""] for i, token_id in enumerate(trace.input_ids)]
    return csv_text(rows)


@dataclass(frozen=True)
class ReplayPiece:
    text: str          # readable
    fresh: bool        # made by this step's merge
    gap_before: bool   # starts a pre-token


@dataclass(frozen=True)
class ReplayStep:
    index: int                       # 0: bytes; k: after the k-th merge
    caption: str
    pieces: tuple[ReplayPiece, ...]


@dataclass(frozen=True)
class MergeReplay:
    tokenization: Tokenization

    @property
    def n_steps(self) -> int:
        return len(self.tokenization.steps)

    def pieces_at(self, step: int) -> tuple[str, ...]:
        """Step 0: one piece per byte; step k: the pieces after the k-th merge."""
        tok = self.tokenization
        return tok.initial_pieces if step == 0 else tok.steps[step - 1].pieces

    def starts(self, pieces) -> list[int]:
        """Byte offset where each piece starts in the sentence's UTF-8."""
        length = self.tokenization.byte_length   # the flavour knows its alphabet (bytes or characters)
        starts, offset = [], 0
        for piece in pieces:
            starts.append(offset)
            offset += length(piece)
        return starts

    @cached_property
    def word_start_bytes(self) -> frozenset[int]:
        """Byte offsets where a pre-token begins; merges never cross them."""
        starts = self.starts(self.tokenization.initial_pieces)
        return frozenset(starts[i] for i in self.tokenization.word_starts if i < len(starts))

    def fresh(self, step: int) -> list[bool]:
        """For each piece after `step`, whether that step's merge created it."""
        previous = self.pieces_at(step - 1) if step else ()   # asked first: the replay walks forward only
        pieces = self.pieces_at(step)
        return self._fresh(step, previous, pieces, self.starts(pieces))

    def _fresh(self, step: int, previous: tuple[str, ...], pieces: tuple[str, ...], starts: list[int]) -> list[bool]:
        if step == 0:
            return [False] * len(pieces)
        before = dict(zip(self.starts(previous), previous))
        merged = self.tokenization.steps[step - 1].merged
        return [piece == merged and before.get(start) != piece for start, piece in zip(starts, pieces)]

    def caption(self, step: int) -> str:
        return self._caption(step, len(self.pieces_at(step)))

    def _caption(self, step: int, n_pieces: int) -> str:
        if step == 0:
            unit = "bytes" if self.tokenization.alphabet.byte_level else "characters"  # SentencePiece: characters
            return f"Step 0 of {self.n_steps}: the sentence as {n_pieces} {unit}, before any merge"
        s, shown = self.tokenization.steps[step - 1], self.tokenization.display_piece
        return (f"Step {step} of {self.n_steps}: merge rank {s.rank}: ‘{shown(s.left)}’ + "
                f"‘{shown(s.right)}’ → ‘{shown(s.merged)}’ ({s.count}×), {n_pieces} pieces")

    def _shown(self, pieces: tuple[str, ...]) -> tuple[str, ...]:
        """The pieces in context; the last step's are the tokens, whose readable form the trace already has."""
        tok = self.tokenization
        if pieces == tok.pieces:
            return tuple(t.display for t in tok.tokens)
        return tok.display_pieces(pieces)

    def step(self, step: int) -> ReplayStep:
        previous = self.pieces_at(step - 1) if step else ()   # asked first: the replay walks forward only
        pieces = self.pieces_at(step)
        starts = self.starts(pieces)
        words = self.word_start_bytes
        return ReplayStep(step, self._caption(step, len(pieces)), tuple(
            ReplayPiece(text, new, start in words)
            for text, new, start in zip(self._shown(pieces), self._fresh(step, previous, pieces, starts), starts)))

    def changed_words(self, step: int) -> tuple[ReplayPiece, ...]:
        """The pieces after `step` of only the words (pre-tokens) its merge changed, in sentence order: a merge
        never crosses a word, so the rest of the sentence is as the step before left it."""
        words: list[list[ReplayPiece]] = []
        for piece in self.step(step).pieces:
            if piece.gap_before or not words:
                words.append([])
            words[-1].append(piece)
        return tuple(piece for word in words if any(p.fresh for p in word) for piece in word)

    def row_label(self, step: int) -> str:
        """A short name for one row of the replay figure: "bytes", or "3. ‘t’ + ‘h’"."""
        if step == 0:
            return "bytes" if self.tokenization.alphabet.byte_level else "characters"
        s, shown = self.tokenization.steps[step - 1], self.tokenization.display_piece
        return f"{step}. ‘{shown(s.left)}’ + ‘{shown(s.right)}’"

    def entries(self) -> list[str]:
        """One line per step for the step list: number, rank, the two pieces merged, how often."""
        shown = self.tokenization.display_piece
        unit = "bytes" if self.tokenization.alphabet.byte_level else "characters"
        return [f"0  {unit}"] + [f"{k}  #{s.rank}  {shown(s.left)} + {shown(s.right)}  ×{s.count}"
                                 for k, s in enumerate(self.tokenization.steps, start=1)]

    def csv(self) -> str:
        """One row per step: the merge applied and every piece after it (readable form, | between pieces)."""
        tok = self.tokenization
        rows: list[list] = [["step", "rank", "left", "right", "merged", "count", "n_pieces", "pieces"]]
        initial = tok.display_pieces(tok.initial_pieces)
        rows.append([0, "", "", "", "", "", len(initial), " | ".join(initial)])
        for k, s in enumerate(tok.steps, start=1):
            shown = tok.display_pieces(s.pieces)
            piece = tok.display_piece
            rows.append([k, s.rank, piece(s.left), piece(s.right), piece(s.merged), s.count, len(shown),
                         " | ".join(shown)])
        return csv_text(rows)


EMPTY_REPLAY_CSV = csv_text([["step", "rank", "left", "right", "merged", "count", "n_pieces", "pieces"]])
