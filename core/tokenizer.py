"""A hand-written byte-level BPE tokenizer (GPT-2 style), small enough to read.

What happens to a sentence, in order:

1. Surrogate rule. A Python ``str`` may hold surrogate code points
   (U+D800..U+DFFF), which UTF-8 cannot encode. Every such code point -- a lone
   one, and also each half of a "pair" spelled as two code points -- is replaced
   with U+FFFD before anything else. ``Tokenization.text`` holds this cleaned
   text, so ``decode(encode(s)) == s`` for every ``s`` without surrogates and
   ``== clean_text(s)`` otherwise.
2. Special tokens (e.g. ``<|endoftext|>``) are cut out of the text first and
   become one token each, exactly as Hugging Face ``tokenizers`` does.
3. Pre-tokenization with GPT-2's regex (``PRETOKENIZE_PATTERN``): words, numbers,
   punctuation runs and whitespace, each optionally led by one space. Chinese
   characters are ``\\p{L}``, so a run of Chinese is one pre-token, while ``，。``
   and spaces split it. Merges never cross pre-token boundaries.
4. Each pre-token becomes its UTF-8 bytes, one base token per byte. A byte is
   written as one printable character of GPT-2's ``bytes_to_unicode`` alphabet
   (space -> "Ġ", newline -> "Ċ", ...), so every vocab entry is a plain string.
5. BPE: repeatedly merge the adjacent pair with the lowest merge rank.

Ids: bytes 0..255 have ids 0..255 in byte order, then one id per new merged
piece in merge order, then the special tokens. ``save``/``load`` use the Hugging
Face ``tokenizer.json`` format, so ``tokenizers.Tokenizer.from_file`` gives the
same ids.
"""

from __future__ import annotations

import functools
import heapq
import json
import os
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import regex

from core.atomic import atomic_write_bytes

__all__ = [
    "BPETokenizer",
    "MergeStep",
    "PRETOKENIZE_PATTERN",
    "Token",
    "Tokenization",
    "BYTE_DECODER",
    "BYTE_ENCODER",
    "bytes_to_piece",
    "bytes_to_unicode",
    "clean_text",
    "display_bytes",
    "display_piece",
    "piece_to_bytes",
    "pretokenize",
]

EOS_TOKEN = "<|endoftext|>"

# GPT-2's pre-tokenizer regex (the one HF's ByteLevel pre-tokenizer uses with use_regex=true).
PRETOKENIZE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
)
_PRETOKENIZE_RE = regex.compile(PRETOKENIZE_PATTERN)
_SURROGATE_RE = regex.compile("[\ud800-\udfff]")

_WORD_CACHE_SIZE = 1 << 16


# ----------------------------------------------------------------------------- bytes <-> pieces


def bytes_to_unicode() -> dict[int, str]:
    """Map every byte to one printable character.

    Bytes that are already printable and not space (``!``..``~``, ``¡``..``¬``,
    ``®``..``ÿ``) map to themselves; the other 68 (controls, space, soft hyphen...)
    are shifted to U+0100 and up, in byte order. This keeps vocab strings free of
    whitespace and control characters, which keeps files and merges readable.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table: dict[int, str] = {}
    shifted = 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


BYTE_ENCODER: dict[int, str] = bytes_to_unicode()
BYTE_DECODER: dict[str, int] = {c: b for b, c in BYTE_ENCODER.items()}


def bytes_to_piece(raw: bytes) -> str:
    return "".join(BYTE_ENCODER[b] for b in raw)


def piece_to_bytes(piece: str) -> bytes:
    """Bytes of a vocab piece written in the byte alphabet (not for special tokens)."""
    try:
        return bytes(BYTE_DECODER[c] for c in piece)
    except KeyError as exc:
        raise ValueError(f"piece {piece!r} has a character outside the byte alphabet") from exc


def clean_text(text: str) -> str:
    """The surrogate rule: each surrogate code point becomes U+FFFD."""
    return _SURROGATE_RE.sub("\ufffd", text)


def pretokenize(text: str) -> list[str]:
    """Split text into GPT-2 pre-tokens; ``"".join(result) == text``."""
    return _PRETOKENIZE_RE.findall(text)


# ----------------------------------------------------------------------------- display


_NAMED_CHARS = {" ": "␣", "\n": "↵", "\t": "⇥"}


def _show_char(ch: str, first: bool) -> str:
    """One character, made visible. ``first``: it starts a displayed run."""
    if ch in _NAMED_CHARS:
        return _NAMED_CHARS[ch]
    cat = unicodedata.category(ch)
    cp = ord(ch)
    if cat == "Cc":  # C0, DEL, C1 controls
        return f"\\x{cp:02x}"
    if cat in ("Cf", "Zl", "Zp", "Zs", "Co", "Cn", "Cs"):
        # Invisible or blank characters (ZWJ, RTL marks, NBSP, U+3000...): show the code point.
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    if first and cat in ("Mn", "Mc", "Me"):
        return "◌" + ch  # a combining mark with nothing to sit on
    return ch


def _char_len(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte starts (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _whole_char_at(raw: bytes, i: int) -> str | None:
    """The character whose complete UTF-8 encoding starts at raw[i], else None."""
    n = _char_len(raw[i])
    if n == 0 or i + n > len(raw):
        return None
    try:
        return raw[i : i + n].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _render(
    raw: bytes,
    text: str | None,
    owners: Sequence[int] | None,
    byte_start: int,
) -> str:
    """Readable form of ``raw``; ``owners[byte_start + i]`` is the char index of raw[i] in text."""
    out: list[str] = []
    frag: list[int] = []  # bytes of the current fragment
    frag_owner: int | None = None
    first = True

    def flush() -> None:
        nonlocal frag, frag_owner
        if frag:
            out.append("‹" + " ".join(f"{b:02x}" for b in frag) + "›")
            if text is not None and frag_owner is not None:
                out.append(_show_char(text[frag_owner], True))
        frag, frag_owner = [], None

    i = 0
    while i < len(raw):
        ch = _whole_char_at(raw, i)
        if ch is not None:
            flush()
            out.append(_show_char(ch, first))
            first = False
            i += len(ch.encode("utf-8"))
            continue
        # A byte that is part of a character cut by the token boundary.
        owner = owners[byte_start + i] if owners is not None else None
        if frag and owner != frag_owner:
            flush()
        frag.append(raw[i])
        frag_owner = owner
        first = True
        i += 1
    flush()
    return "".join(out)


def _byte_owners(text: str) -> list[int]:
    """For each byte of text.encode('utf-8'), the index of the character it belongs to."""
    owners: list[int] = []
    for idx, ch in enumerate(text):
        owners.extend([idx] * len(ch.encode("utf-8")))
    return owners


def display_bytes(raw: bytes, text: str | None = None, byte_start: int = 0) -> str:
    """Human-readable form of a token's bytes; never shows U+FFFD for a fragment.

    Whole characters show as themselves, except: space "␣", newline "↵", tab "⇥",
    other control characters "\\x07", invisible/blank characters "\\u200d", and a
    leading combining mark gets a "◌" to sit on. Bytes that are only part of a
    multi-byte character show as hex, "‹e8 ae›"; if ``text`` (the sentence) and
    ``byte_start`` (where raw starts in ``text.encode('utf-8')``) are given, the
    character the fragment belongs to follows it: "‹e8 ae›订".
    """
    owners = _byte_owners(text) if text is not None else None
    return _render(raw, text, owners, byte_start)


def display_piece(piece: str) -> str:
    """Readable form of a vocab piece out of context (fragments as "‹e8 ae›")."""
    try:
        raw = piece_to_bytes(piece)
    except ValueError:
        return piece  # a special token: its text is already readable
    return display_bytes(raw)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Token:
    id: int
    piece: str  # vocab string in the byte alphabet, e.g. "Ġthe"
    raw: bytes  # the UTF-8 bytes this token stands for
    byte_start: int  # [byte_start, byte_end) in text.encode("utf-8")
    byte_end: int
    char_start: int  # chars of the cleaned text this token touches
    char_end: int
    display: str  # human-readable, see display_bytes


@dataclass(frozen=True)
class MergeStep:
    rank: int  # merge rank (0 = first learned merge)
    left: str
    right: str
    merged: str  # left + right
    count: int  # occurrences merged in this step
    pieces: tuple[str, ...]  # all pieces of the sentence after this step


@dataclass(frozen=True)
class Tokenization:
    text: str  # input after the surrogate rule
    tokens: tuple[Token, ...]
    initial_pieces: tuple[str, ...]  # one per byte (a special token is one piece)
    word_starts: tuple[int, ...]  # index into initial_pieces where each pre-token starts
    steps: tuple[MergeStep, ...]
    special_pieces: frozenset[str] = field(default=frozenset(), repr=False)

    @property
    def ids(self) -> list[int]:
        return [t.id for t in self.tokens]

    @property
    def pieces(self) -> tuple[str, ...]:
        return tuple(t.piece for t in self.tokens)

    @cached_property
    def _owners(self) -> list[int]:
        return _byte_owners(self.text)

    def _piece_raw(self, piece: str) -> bytes:
        if piece in self.special_pieces:
            return piece.encode("utf-8")
        return piece_to_bytes(piece)

    def display_pieces(self, pieces: Sequence[str]) -> tuple[str, ...]:
        """Display a full piece sequence of this sentence (e.g. ``step.pieces``) in context.

        The pieces must cover the sentence in order (as every MergeStep's do), so
        fragments show their owning character: "‹e8 ae›订".
        """
        out: list[str] = []
        pos = 0
        for piece in pieces:
            raw = self._piece_raw(piece)
            if piece in self.special_pieces:
                out.append(piece)
            else:
                out.append(_render(raw, self.text, self._owners, pos))
            pos += len(raw)
        return tuple(out)


# ----------------------------------------------------------------------------- BPE core


def _merge_pair(word: list[int], a: int, b: int, c: int) -> tuple[list[int], int]:
    """Replace non-overlapping (a, b) left to right with c; return (new word, count)."""
    out: list[int] = []
    count = 0
    i, n = 0, len(word)
    while i < n:
        if i + 1 < n and word[i] == a and word[i + 1] == b:
            out.append(c)
            count += 1
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out, count


class BPETokenizer:
    """Byte-level BPE. Treat ``vocab`` and ``merges`` as read-only."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        merges: Sequence[tuple[str, str]],
        special_tokens: Mapping[str, int] | None = None,
    ) -> None:
        """Raises ValueError if the pieces do not form a usable byte-level BPE."""
        self.vocab: dict[str, int] = dict(vocab)
        self.merges: list[tuple[str, str]] = [(a, b) for a, b in merges]
        self.special_tokens: dict[str, int] = dict(special_tokens or {})
        for content, sid in self.special_tokens.items():
            if content in self.vocab and self.vocab[content] != sid:
                raise ValueError(
                    f"special token {content!r} has id {sid} but the vocab says {self.vocab[content]}"
                )
            self.vocab[content] = sid

        ids = sorted(self.vocab.values())
        if ids != list(range(len(ids))):
            raise ValueError(f"ids are not contiguous 0..{len(ids) - 1} (or repeat)")
        self._pieces: list[str] = [""] * len(ids)
        for piece, i in self.vocab.items():
            self._pieces[i] = piece

        missing = [b for b in range(256) if BYTE_ENCODER[b] not in self.vocab]
        if missing:
            raise ValueError(
                f"vocab lacks byte piece {BYTE_ENCODER[missing[0]]!r} (byte 0x{missing[0]:02x}) "
                f"and {len(missing) - 1} more; every byte must have a token"
            )
        self._byte_ids: list[int] = [self.vocab[BYTE_ENCODER[b]] for b in range(256)]

        # (left id, right id) -> (rank, merged id); the first occurrence of a pair wins.
        self._ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (a, b) in enumerate(self.merges):
            for p in (a, b, a + b):
                if p not in self.vocab:
                    raise ValueError(f"merge #{rank} ({a!r}, {b!r}) uses unknown piece {p!r}")
            key = (self.vocab[a], self.vocab[b])
            self._ranks.setdefault(key, (rank, self.vocab[a + b]))
        self._rank_pairs: dict[int, tuple[int, int, int]] = {
            rank: (a, b, c) for (a, b), (rank, c) in self._ranks.items()
        }

        self._special_re = None
        if self.special_tokens:
            # Longest first, so the leftmost-longest special token wins (as in HF).
            alts = sorted(self.special_tokens, key=len, reverse=True)
            self._special_re = regex.compile("|".join(regex.escape(s) for s in alts))
        self._bpe_cached = functools.lru_cache(maxsize=_WORD_CACHE_SIZE)(self._bpe_word)

    # ------------------------------------------------------------------ small lookups

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    @property
    def eos_id(self) -> int | None:
        return self.vocab.get(EOS_TOKEN)

    def id_to_piece(self, id: int) -> str:
        if not 0 <= id < len(self._pieces):
            raise ValueError(f"token id {id} is outside 0..{len(self._pieces) - 1}")
        return self._pieces[id]

    def piece_to_id(self, piece: str) -> int:
        return self.vocab[piece]

    def piece_bytes(self, piece: str) -> bytes:
        if piece in self.special_tokens:
            return piece.encode("utf-8")
        return piece_to_bytes(piece)

    def display(self, raw: bytes, text: str | None = None, byte_start: int = 0) -> str:
        """See ``display_bytes``."""
        return display_bytes(raw, text, byte_start)

    def display_piece(self, piece: str) -> str:
        """A piece out of context; special tokens show as their text."""
        if piece in self.special_tokens:
            return piece
        return display_piece(piece)

    # ------------------------------------------------------------------ encoding

    def _segments(self, text: str) -> list[tuple[str, bool]]:
        """Cut special tokens out of text: [(segment, is_special), ...]."""
        if self._special_re is None:
            return [(text, False)] if text else []
        out: list[tuple[str, bool]] = []
        pos = 0
        for m in self._special_re.finditer(text):
            if m.start() > pos:
                out.append((text[pos : m.start()], False))
            out.append((m.group(), True))
            pos = m.end()
        if pos < len(text):
            out.append((text[pos:], False))
        return out

    def _lowest_pair(self, word: Sequence[int]) -> tuple[int, int] | None:
        """(rank, position) of the lowest-rank pair in word, leftmost on ties; None if none."""
        best: tuple[int, int] | None = None
        ranks = self._ranks
        for i in range(len(word) - 1):
            r = ranks.get((word[i], word[i + 1]))
            if r is not None and (best is None or r[0] < best[0]):
                best = (r[0], i)
        return best

    def _bpe_word(self, word: str) -> tuple[int, ...]:
        """BPE one pre-token: merge the lowest-rank pair (all its occurrences, left to right)
        until no pair has a rank.

        Same result as repeating ``_lowest_pair`` + ``_merge_pair`` (which
        ``encode_traced`` does), but a heap of (rank, position) and a linked list
        make a long word O(n log n) instead of O(n^2).
        """
        syms = [self._byte_ids[b] for b in word.encode("utf-8")]
        n = len(syms)
        if n < 2:
            return tuple(syms)
        ranks, pairs = self._ranks, self._rank_pairs
        nxt = list(range(1, n + 1))  # n means "no next symbol"
        prv = list(range(-1, n - 1))
        heap = [(r[0], i) for i, p in enumerate(zip(syms, syms[1:])) if (r := ranks.get(p)) is not None]
        heapq.heapify(heap)
        while heap:
            rank = heap[0][0]
            a, b, c = pairs[rank]
            merged_at: list[int] = []
            while heap and heap[0][0] == rank:  # pops in position order: left to right
                i = heapq.heappop(heap)[1]
                j = nxt[i]
                if syms[i] != a or j >= n or syms[j] != b:
                    continue  # stale entry, or overlapped by the merge just left of it
                syms[i], syms[j] = c, -1
                nxt[i] = nxt[j]
                if nxt[i] < n:
                    prv[nxt[i]] = i
                merged_at.append(i)
            # New pairs enter the heap only after the whole step, as in a global step.
            for i in merged_at:
                if prv[i] >= 0 and (r := ranks.get((syms[prv[i]], c))) is not None:
                    heapq.heappush(heap, (r[0], prv[i]))
                if nxt[i] < n and (r := ranks.get((c, syms[nxt[i]]))) is not None:
                    heapq.heappush(heap, (r[0], i))
        return tuple(s for s in syms if s >= 0)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for seg, special in self._segments(clean_text(text)):
            if special:
                ids.append(self.special_tokens[seg])
                continue
            for word in pretokenize(seg):
                ids.extend(self._bpe_cached(word))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Ids back to text; only byte sequences that are not whole UTF-8 get U+FFFD."""
        raw = b"".join(self.piece_bytes(self.id_to_piece(int(i))) for i in ids)
        return raw.decode("utf-8", errors="replace")

    def encode_traced(self, text: str) -> Tokenization:
        """Encode and record the merges as global steps over the whole sentence.

        Each step takes the lowest-rank pair present in any word and merges all its
        non-overlapping occurrences (left to right, never across word boundaries).
        Per word this is the same sequence of merges ``encode`` does, so the final
        pieces are equal.
        """
        text = clean_text(text)
        words: list[list[int]] = []  # symbol ids per pre-token (special: one id)
        for seg, special in self._segments(text):
            if special:
                words.append([self.special_tokens[seg]])
            else:
                words.extend([self._byte_ids[b] for b in w.encode("utf-8")] for w in pretokenize(seg))
        word_starts: list[int] = []
        n = 0
        for w in words:
            word_starts.append(n)
            n += len(w)
        initial = tuple(self._pieces[i] for w in words for i in w)

        steps: list[MergeStep] = []
        while True:
            best: tuple[int, int, int] | None = None  # (rank, a, b)
            for w in words:
                found = self._lowest_pair(w)
                if found is not None and (best is None or found[0] < best[0]):
                    best = (found[0], w[found[1]], w[found[1] + 1])
            if best is None:
                break
            rank, a, b = best
            c = self._ranks[(a, b)][1]
            total = 0
            for k, w in enumerate(words):
                words[k], cnt = _merge_pair(w, a, b, c)
                total += cnt
            steps.append(
                MergeStep(
                    rank=rank,
                    left=self._pieces[a],
                    right=self._pieces[b],
                    merged=self._pieces[c],
                    count=total,
                    pieces=tuple(self._pieces[i] for w in words for i in w),
                )
            )

        owners = _byte_owners(text)
        tokens: list[Token] = []
        pos = 0
        for w in words:
            for tid in w:
                piece = self._pieces[tid]
                raw = self.piece_bytes(piece)
                end = pos + len(raw)
                shown = piece if piece in self.special_tokens else _render(raw, text, owners, pos)
                tokens.append(
                    Token(
                        id=tid,
                        piece=piece,
                        raw=raw,
                        byte_start=pos,
                        byte_end=end,
                        char_start=owners[pos],
                        char_end=owners[end - 1] + 1,
                        display=shown,
                    )
                )
                pos = end
        return Tokenization(
            text=text,
            tokens=tuple(tokens),
            initial_pieces=initial,
            word_starts=tuple(word_starts),
            steps=tuple(steps),
            special_pieces=frozenset(self.special_tokens),
        )

    # ------------------------------------------------------------------ training

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        *,
        min_frequency: int = 2,
        special_tokens: Sequence[str] = (EOS_TOKEN,),
    ) -> "BPETokenizer":
        """Learn merges: repeatedly merge the most frequent adjacent pair.

        Ties go to the pair whose (left bytes, right bytes) is smallest, so the
        result depends only on the input. Stops at ``vocab_size`` (256 bytes +
        merged pieces + special tokens) or when the best pair occurs fewer than
        ``min_frequency`` times.
        """
        specials = list(dict.fromkeys(special_tokens))
        if vocab_size < 256 + len(specials):
            raise ValueError(f"vocab_size {vocab_size} < 256 bytes + {len(specials)} special tokens")
        splitter = cls({BYTE_ENCODER[b]: b for b in range(256)}, [], {s: 256 + i for i, s in enumerate(specials)})

        # 1. Count pre-tokens (special tokens are cut out, never learned from).
        word_counts: Counter[str] = Counter()
        for text in texts:
            for seg, special in splitter._segments(clean_text(text)):
                if not special:
                    word_counts.update(pretokenize(seg))

        pieces = [BYTE_ENCODER[b] for b in range(256)]
        piece_raw = [bytes([b]) for b in range(256)]
        merges = _learn_merges(word_counts, pieces, piece_raw, vocab_size - len(specials), min_frequency)
        vocab = {p: i for i, p in enumerate(pieces)}
        return cls(vocab, merges, {s: len(pieces) + i for i, s in enumerate(specials)})

    # ------------------------------------------------------------------ files

    def to_json(self) -> dict[str, Any]:
        """The Hugging Face ``tokenizer.json`` structure."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {
                    "id": sid,
                    "content": content,
                    "single_word": False,
                    "lstrip": False,
                    "rstrip": False,
                    "normalized": False,
                    "special": True,
                }
                for content, sid in sorted(self.special_tokens.items(), key=lambda kv: kv[1])
            ],
            "normalizer": None,
            "pre_tokenizer": dict(byte_level),
            "post_processor": {**byte_level, "trim_offsets": False},
            "decoder": dict(byte_level),
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": {p: i for i, p in enumerate(self._pieces)},
                "merges": [[a, b] for a, b in self.merges],
            },
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write tokenizer.json atomically (temp file in the same folder, then replace)."""
        data = json.dumps(self.to_json(), ensure_ascii=False, indent=2) + "\n"
        atomic_write_bytes(Path(path), data.encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BPETokenizer":
        """Read a tokenizer.json (ours or HF's). Raises ValueError("<file name>: <what is wrong>")."""
        name = Path(path).name
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return cls.from_json(data)
        except OSError as exc:
            raise ValueError(f"{name}: cannot read ({exc.strerror or exc})") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}: not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from exc

    @classmethod
    def from_json(cls, data: Any) -> "BPETokenizer":
        """Build from a parsed tokenizer.json; ValueError says what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("top level is not a JSON object")
        model = data.get("model")
        if not isinstance(model, dict):
            raise ValueError('no "model" object')
        if model.get("type", "BPE") != "BPE":
            raise ValueError(f'model type is {model.get("type")!r}, expected "BPE"')
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(key):
                raise ValueError(f"model.{key} is not supported by a byte-level BPE")
        if model.get("dropout"):
            raise ValueError("model.dropout is not supported (encoding must be deterministic)")
        if model.get("ignore_merges"):
            raise ValueError("model.ignore_merges=true is not supported")
        if data.get("normalizer") is not None:
            raise ValueError("a normalizer is not supported (expected null)")
        pre = data.get("pre_tokenizer")
        if not (
            isinstance(pre, dict)
            and pre.get("type") == "ByteLevel"
            and pre.get("use_regex", True)
            and not pre.get("add_prefix_space", False)
        ):
            raise ValueError("pre_tokenizer must be ByteLevel with use_regex=true, add_prefix_space=false")

        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in vocab.items()
        ):
            raise ValueError('model.vocab must be an object of "piece": id')

        raw_merges = model.get("merges", [])
        if not isinstance(raw_merges, list):
            raise ValueError("model.merges must be a list")
        merges: list[tuple[str, str]] = []
        for k, m in enumerate(raw_merges):
            if isinstance(m, str) and len(m.split(" ")) == 2:
                a, b = m.split(" ")
            elif isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
                a, b = m
            else:
                raise ValueError(f'merge #{k} is {m!r}, expected "a b" or ["a", "b"]')
            merges.append((a, b))

        added = data.get("added_tokens") or []
        if not isinstance(added, list):
            raise ValueError("added_tokens must be a list")
        specials: dict[str, int] = {}
        for t in added:
            if not (isinstance(t, dict) and isinstance(t.get("content"), str) and isinstance(t.get("id"), int)):
                raise ValueError(f"bad added token {t!r}")
            specials[t["content"]] = t["id"]
        return cls(vocab, merges, specials)


def _learn_merges(
    word_counts: Mapping[str, int],
    pieces: list[str],
    piece_raw: list[bytes],
    target_size: int,
    min_frequency: int,
) -> list[tuple[str, str]]:
    """The training loop. Appends new pieces to ``pieces``/``piece_raw``; returns the merges.

    Speed comes from never recounting: ``counts`` holds every adjacent pair's
    frequency, ``where`` which words may hold it, and a merge only updates the
    pairs next to the places it changed. A heap with lazy deletion finds the
    most frequent pair.
    """
    words = [list(w.encode("utf-8")) for w in word_counts]
    freqs = list(word_counts.values())
    counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for k, (w, f) in enumerate(zip(words, freqs)):
        for pair in zip(w, w[1:]):
            counts[pair] += f
            where[pair].add(k)

    def entry(pair: tuple[int, int], c: int) -> tuple[int, bytes, bytes, int, int]:
        return (-c, piece_raw[pair[0]], piece_raw[pair[1]], pair[0], pair[1])

    heap = [entry(p, c) for p, c in counts.items()]
    heapq.heapify(heap)
    index = {p: i for i, p in enumerate(pieces)}
    merges: list[tuple[str, str]] = []

    while len(pieces) < target_size and heap:
        neg, _, _, a, b = heapq.heappop(heap)
        if counts.get((a, b), 0) != -neg:
            continue  # stale heap entry
        if -neg < min_frequency:
            break
        merged = pieces[a] + pieces[b]
        c = index.get(merged)
        if c is None:  # the same string can come from two different merges
            c = len(pieces)
            pieces.append(merged)
            piece_raw.append(piece_raw[a] + piece_raw[b])
            index[merged] = c
        merges.append((pieces[a], pieces[b]))

        delta: dict[tuple[int, int], int] = defaultdict(int)
        for k in where.pop((a, b), ()):
            w, f = words[k], freqs[k]
            out: list[int] = []
            i, n = 0, len(w)
            while True:
                try:
                    j = w.index(a, i)  # jump to the next candidate at C speed
                except ValueError:
                    break
                if j + 1 >= n or w[j + 1] != b:
                    out.extend(w[i : j + 1])
                    i = j + 1
                    continue
                out.extend(w[i:j])
                # Only the neighbours of this occurrence change pair: (x,a)->(x,c), (b,y)->(c,y).
                if out:
                    delta[(out[-1], a)] -= f
                    delta[(out[-1], c)] += f
                    where[(out[-1], c)].add(k)
                if j + 2 < n:
                    delta[(b, w[j + 2])] -= f
                    delta[(c, w[j + 2])] += f
                    where[(c, w[j + 2])].add(k)
                out.append(c)
                i = j + 2
            out.extend(w[i:])
            words[k] = out
        counts.pop((a, b), None)
        for pair, d in delta.items():
            if d == 0 or pair == (a, b):
                continue
            new = counts.get(pair, 0) + d
            if new > 0:
                counts[pair] = new
                heapq.heappush(heap, entry(pair, new))
            else:
                counts.pop(pair, None)
    return merges
