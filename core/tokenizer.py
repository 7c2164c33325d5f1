"""A hand-written BPE tokenizer, small enough to read, that reads Hugging Face tokenizer.json files.

What happens to a sentence, in order:

1. Surrogate rule. A Python ``str`` may hold surrogate code points
   (U+D800..U+DFFF), which UTF-8 cannot encode. Every such code point -- a lone
   one, and also each half of a "pair" spelled as two code points -- is replaced
   with U+FFFD before anything else. ``Tokenization.text`` holds this cleaned
   text, so ``decode(encode(s)) == s`` for every ``s`` without surrogates and
   ``== clean_text(s)`` otherwise (shipped tokenizer; other flavours may normalize).
2. Added and special tokens (e.g. ``<|endoftext|>``) are cut out of the text first and
   become one token each, exactly as Hugging Face ``tokenizers`` does.
3. The normalizer and pre-tokenizer of the flavour (core/tokenizer_pipeline.py). The shipped
   tokenizer uses GPT-2's regex (``PRETOKENIZE_PATTERN``): words, numbers, punctuation runs and
   whitespace, each optionally led by one space. Chinese characters are ``\\p{L}``, so a run of
   Chinese is one pre-token, while ``，。`` and spaces split it. Merges never cross pre-token
   boundaries.
4. Each pre-token becomes base symbols. Byte-level (GPT-2, Llama 3, Qwen2, SmolLM): one per UTF-8
   byte, written as one printable character of GPT-2's ``bytes_to_unicode`` alphabet (space -> "Ġ",
   newline -> "Ċ", ...). SentencePiece style (Llama 2, Mistral): one per character, spaces written
   "▁", and a character missing from the vocab becomes its bytes as "<0xNN>" tokens (byte_fallback)
   or the unknown token.
5. BPE: repeatedly merge the adjacent pair with the lowest merge rank (core/bpe_merge.py).
6. The post-processor's template adds e.g. BOS in front (``add_special``).

Shipped ids: bytes 0..255 have ids 0..255 in byte order, then one id per new merged
piece in merge order, then the special tokens. ``save``/``load`` use the Hugging
Face ``tokenizer.json`` format, so ``tokenizers.Tokenizer.from_file`` gives the
same ids.
"""

from __future__ import annotations

import heapq
import json
import os
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import regex

from core.atomic import atomic_write_bytes
from core.bpe_merge import MergeLog, Replay, merge_traced, merge_word
from core.byte_level import (
    BYTE_DECODER,
    BYTE_ENCODER,
    PRETOKENIZE_PATTERN,
    PRETOKENIZE_RE,
    bytes_to_piece,
    bytes_to_unicode,
    piece_to_bytes,
)
from core import tokenizer_pipeline as tp
from core.tokenizer_pipeline import AddedToken, AddedTokenMatcher, Aligned, Pipeline

__all__ = [
    "AddedToken",
    "BPETokenizer",
    "MergeStep",
    "PRETOKENIZE_PATTERN",
    "PieceAlphabet",
    "Pipeline",
    "Token",
    "Tokenization",
    "BYTE_DECODER",
    "BYTE_ENCODER",
    "bytes_to_piece",
    "bytes_to_unicode",
    "clean_text",
    "display_bytes",
    "display_piece",
    "load_tokenizer",
    "piece_to_bytes",
    "pretokenize",
]

EOS_TOKEN = "<|endoftext|>"
# End-of-text names the families use, for a tokenizer read without its tokenizer_config.json.
_EOS_NAMES = (EOS_TOKEN, "</s>", "<|end_of_text|>")
_SURROGATE_RE = regex.compile("[\ud800-\udfff]")
_BYTE_TOKEN = regex.compile(r"<0x([0-9A-F]{2})>")
_WORD_CACHE_SIZE = 1 << 16
MAX_TOKENIZER_BYTES = 100 * 1024 * 1024  # real tokenizer.json files are under 20 MB
# transformers rebuilds the BOS/EOS template of these tokenizer classes from add_bos_token / add_eos_token.
_CONFIG_TEMPLATE_CLASSES = {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
                            "GemmaTokenizer", "GemmaTokenizerFast"}


def clean_text(text: str) -> str:
    """The surrogate rule: each surrogate code point becomes U+FFFD."""
    return _SURROGATE_RE.sub("\ufffd", text)


def pretokenize(text: str) -> list[str]:
    """Split text into GPT-2 pre-tokens; ``"".join(result) == text``."""
    return PRETOKENIZE_RE.findall(text)


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


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _render(
    raw: bytes,
    text: str | None,
    owners: Sequence[int] | None,
    byte_start: int,
) -> str:
    """Readable form of ``raw``; ``owners[byte_start + i]`` is the char index of raw[i] in text.

    Decoding with surrogateescape turns each byte that is not part of a whole character into
    U+DC80..U+DCFF (valid UTF-8 never holds those), so one C call finds the fragments."""
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
    for ch in raw.decode("utf-8", errors="surrogateescape"):
        cp = ord(ch)
        if not 0xDC80 <= cp <= 0xDCFF:
            flush()
            out.append(_show_char(ch, first))
            first = False
            i += _utf8_len(cp)
            continue
        # A byte that is part of a character cut by the token boundary.
        owner = owners[byte_start + i] if owners is not None else None
        if frag and owner != frag_owner:
            flush()
        frag.append(cp - 0xDC00)
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

# ----------------------------------------------------------------------------- pieces of a flavour


class PieceAlphabet:
    """How a flavour's vocab pieces stand for bytes.

    Byte-level: pieces are written in GPT-2's byte alphabet. SentencePiece style: pieces are text
    with ``space`` ("▁") for a space, and "<0xNN>" is one byte when the model has byte_fallback.
    ``specials`` (added tokens, the unknown token) stand for their own text."""

    def __init__(self, byte_level: bool, space: str | None, byte_tokens: bool, specials: Iterable[str]) -> None:
        self.byte_level = byte_level
        self.space = space
        self.byte_tokens = byte_tokens
        self.specials = frozenset(specials)
        self._shown: dict[str, str] = {}
        self._lengths: dict[str, int] = {}

    def piece_bytes(self, piece: str) -> bytes:
        if piece in self.specials:
            return piece.encode("utf-8")
        if self.byte_level:
            try:
                return piece_to_bytes(piece)
            except ValueError:  # not written in the byte alphabet: its text
                return piece.encode("utf-8")
        if self.byte_tokens and (m := _BYTE_TOKEN.fullmatch(piece)):
            return bytes([int(m.group(1), 16)])
        return (piece.replace(self.space, " ") if self.space else piece).encode("utf-8")

    def byte_length(self, piece: str) -> int:
        """len(piece_bytes(piece)), remembered: the merge replay asks it for every piece of every step shown."""
        length = self._lengths.get(piece)
        if length is None:
            length = len(self.piece_bytes(piece))
            if len(self._lengths) < _WORD_CACHE_SIZE:
                self._lengths[piece] = length
        return length

    def display_piece(self, piece: str) -> str:
        """A piece out of context: fragments of a character as "‹e8 ae›", specials as their text."""
        shown = self._shown.get(piece)
        if shown is None:
            shown = piece if piece in self.specials else _display_whole(self.piece_bytes(piece))
            if len(self._shown) < _WORD_CACHE_SIZE:
                self._shown[piece] = shown
        return shown


BYTE_LEVEL_ALPHABET = PieceAlphabet(True, None, False, ())
# What display_bytes shows without looking at single characters: runs of bytes that are not whole
# characters (decoded with surrogateescape to U+DC80..U+DCFF) become "‹e8 ae›"; the characters
# between show as themselves, but for " ", "\n", "\t" (␣ ↵ ⇥), when there is no other control,
# format, space or separator character and no combining mark starts a run. The panels label a
# whole vocab (150k pieces) at once: this is the fast path.
_PLAIN = r"(?:[^\p{C}\p{Z}]|[ \n\t])"
_SHOWN_SIMPLY = regex.compile(r"(?:[\udc80-\udcff]+|(?!\p{M})" + _PLAIN + "+)*")
_ESCAPED_RUN = regex.compile(r"[\udc80-\udcff]+")
_NAMED_TABLE = str.maketrans(_NAMED_CHARS)
# The regex module's Unicode tables may be newer than unicodedata's, which the slow path reads: a
# character assigned in one and not the other must take the slow path too.
_NOT_CHECKED = str.maketrans(dict.fromkeys([" ", "\n", "\t"] + [chr(c) for c in range(0xDC80, 0xDD00)]))


def _hex_run(m: "regex.Match[str]") -> str:
    return "‹" + " ".join(f"{ord(c) - 0xDC00:02x}" for c in m.group()) + "›"


def _render_in_context(raw: bytes, text: str, owners: Sequence[int], byte_start: int) -> str:
    """``_render`` for a token of a sentence; whole plain characters take the fast path."""
    try:
        whole = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _render(raw, text, owners, byte_start)
    if _SHOWN_SIMPLY.fullmatch(whole) and whole.translate(_NOT_CHECKED).isprintable():   # see _NOT_CHECKED
        return whole.translate(_NAMED_TABLE)
    return _render(raw, text, owners, byte_start)


def _display_whole(raw: bytes) -> str:
    """``display_bytes(raw)`` for a piece out of context, faster."""
    text = raw.decode("utf-8", errors="surrogateescape")
    if not (_SHOWN_SIMPLY.fullmatch(text) and text.translate(_NOT_CHECKED).isprintable()):
        return display_bytes(raw)
    return _ESCAPED_RUN.sub(_hex_run, text.translate(_NAMED_TABLE))


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Token:
    id: int
    piece: str  # vocab string, e.g. "Ġthe" (byte-level) or "▁the" (SentencePiece)
    raw: bytes  # the UTF-8 bytes this token stands for (a special token: its text)
    byte_start: int  # [byte_start, byte_end) in Tokenization.model_bytes (the text's UTF-8 for the shipped tokenizer)
    byte_end: int
    char_start: int  # chars of the cleaned text this token touches
    char_end: int
    display: str  # human-readable, see display_bytes


@dataclass(frozen=True)
class MergeStep:
    rank: int  # merge rank (0 = first learned merge)
    left: str
    right: str
    merged: str  # the merged piece (left + right)
    count: int  # occurrences merged in this step
    _pieces: Any = field(repr=False, compare=False)  # callable -> tuple of all pieces after this step

    @property
    def pieces(self) -> tuple[str, ...]:
        """All pieces of the sentence after this step (replayed when asked)."""
        return self._pieces()


@dataclass(frozen=True)
class Tokenization:
    text: str  # input after the surrogate rule
    tokens: tuple[Token, ...]
    initial_pieces: tuple[str, ...]  # base symbols: bytes / characters / "<0xNN>"; an added token is one piece
    word_starts: tuple[int, ...]  # index into initial_pieces where each pre-token starts
    steps: tuple[MergeStep, ...]
    special_pieces: frozenset[str] = field(default=frozenset(), repr=False)  # pieces that stand for their text
    alphabet: PieceAlphabet = field(default=BYTE_LEVEL_ALPHABET, repr=False, compare=False)
    # For each byte of the pieces' bytes, the index of the text character it came from (None: the text's UTF-8).
    byte_owners: tuple[int, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def ids(self) -> list[int]:
        return [t.id for t in self.tokens]

    @property
    def pieces(self) -> tuple[str, ...]:
        return tuple(t.piece for t in self.tokens)

    @property
    def model_bytes(self) -> bytes:
        """The bytes the tokens stand for, in order (the text's UTF-8 unless the flavour normalizes)."""
        return b"".join(t.raw for t in self.tokens)

    @cached_property
    def _owners(self) -> Sequence[int]:
        return self.byte_owners if self.byte_owners is not None else _byte_owners(self.text)

    def piece_bytes(self, piece: str) -> bytes:
        """The bytes a piece of this sentence stands for (flavour-aware)."""
        if piece in self.special_pieces:
            return piece.encode("utf-8")
        return self.alphabet.piece_bytes(piece)

    def byte_length(self, piece: str) -> int:
        """len(piece_bytes(piece)), without building the bytes of a piece seen before."""
        if piece in self.special_pieces:
            return len(piece.encode("utf-8"))
        return self.alphabet.byte_length(piece)

    def display_piece(self, piece: str) -> str:
        """A piece out of context, as this sentence's tokenizer shows it."""
        if piece in self.special_pieces:
            return piece
        return self.alphabet.display_piece(piece)

    def display_pieces(self, pieces: Sequence[str]) -> tuple[str, ...]:
        """Display a full piece sequence of this sentence (e.g. ``step.pieces``) in context.

        The pieces must cover the sentence in order (as every MergeStep's do), so
        fragments show their owning character: "‹e8 ae›订".
        """
        out: list[str] = []
        pos = 0
        for piece in pieces:
            raw = self.piece_bytes(piece)
            if piece in self.special_pieces:
                out.append(piece)
            else:
                out.append(_render_in_context(raw, self.text, self._owners, pos))
            pos += len(raw)
        return tuple(out)


# ----------------------------------------------------------------------------- the tokenizer


@dataclass(frozen=True)
class BPEOptions:
    """The BPE model's switches in tokenizer.json (``model.*``)."""

    unk_token: str | None = None  # what a character without a token becomes (None: it is dropped)
    byte_fallback: bool = False  # ... unless its bytes all have "<0xNN>" tokens
    fuse_unk: bool = False  # consecutive unknown characters become one unknown token
    ignore_merges: bool = False  # a pre-token that is itself in the vocab is one token, never merged


@dataclass(frozen=True)
class _Fixed:
    """A token the BPE never sees: an added token cut out of the text, or one the template adds."""

    id: int
    chars: tuple[int, int]  # characters of the text it covers


class BPETokenizer:
    """BPE over a Hugging Face tokenizer.json pipeline. Treat ``vocab`` and ``merges`` as read-only.

    The constructor's defaults are the shipped flavour: GPT-2's byte-level pipeline with
    ``special_tokens`` as added tokens."""

    def __init__(
        self,
        vocab: Mapping[str, int],
        merges: Sequence[tuple[str, str]],
        special_tokens: Mapping[str, int] | None = None,
        *,
        added_tokens: Sequence[AddedToken] | None = None,
        pipeline: Pipeline | None = None,
        options: BPEOptions = BPEOptions(),
        bos_token: str | None = None,
        eos_token: str | None = None,
    ) -> None:
        """Raises ValueError if the pieces do not form a usable BPE."""
        self.pipeline = pipeline or Pipeline()
        self.options = options
        self._model_vocab: dict[str, int] = dict(vocab)
        self.vocab: dict[str, int] = dict(vocab)
        self.merges: list[tuple[str, str]] = [(a, b) for a, b in merges]
        if added_tokens is None:
            added_tokens = [AddedToken(sid, content) for content, sid in (special_tokens or {}).items()]
        self.added_tokens: tuple[AddedToken, ...] = tuple(added_tokens)
        self.special_tokens: dict[str, int] = {t.content: t.id for t in self.added_tokens}
        # A normalized added token's piece is its normalized content ("▁hello" for "hello"), as in HF.
        added_pieces = [self.pipeline.normalize(Aligned.of(t.content)).text if t.normalized else t.content
                        for t in self.added_tokens]
        by_id = {i: piece for piece, i in self._model_vocab.items()}
        if len(by_id) != len(self._model_vocab):
            raise ValueError("ids are not contiguous (two vocab pieces share an id)")
        # The BPE's own name of an id an added token renamed (the replay shows what the merges built).
        self._model_names: dict[int, str] = {}
        for t, piece in zip(self.added_tokens, added_pieces):
            if by_id.get(t.id, piece) != piece:
                self._model_names[t.id] = by_id[t.id]
            by_id[t.id] = piece  # an added token names its id, as in HF's id_to_token
            self.vocab.setdefault(piece, t.id)
        self._special_ids = frozenset(t.id for t in self.added_tokens if t.special)
        self._pieces = _pieces_by_id(by_id)
        self._check_template()
        self._char_ids = self._byte_level_ids() if self.pipeline.byte_level else None
        self._unk_id = self._unk_token_id()
        self._byte_token_ids = [self._model_vocab.get(f"<0x{b:02X}>") for b in range(256)]
        self._ranks = self._merge_ranks()
        raw = [(t, p) for t, p in zip(self.added_tokens, added_pieces) if not t.normalized]
        normalized = [(t, p) for t, p in zip(self.added_tokens, added_pieces) if t.normalized]
        self._raw_matcher = AddedTokenMatcher([t for t, _ in raw], [p for _, p in raw])
        self._norm_matcher = AddedTokenMatcher([t for t, _ in normalized], [p for _, p in normalized])
        # Pieces that stand for their own text: added tokens outside the model's vocab (a piece that is
        # both, like Llama 2's "<s>", spells the same bytes either way, and may be a merge's result).
        specials = [p for p in added_pieces if p not in self._model_vocab]
        self.alphabet = PieceAlphabet(self.pipeline.byte_level, self.pipeline.space, options.byte_fallback, specials)
        self.bos_id = self._named_id(bos_token) if bos_token else (self.pipeline.prefix_ids or (None,))[0]
        self.eos_id = self._named_id(eos_token) if eos_token else next(
            (self.vocab[n] for n in _EOS_NAMES if n in self.vocab), None)
        self._source_json: str | None = None  # the tokenizer.json text this was read from
        self._template_overridden = False
        self._word_ids = lru_cache(maxsize=_WORD_CACHE_SIZE)(self._word_ids_uncached)

    # ------------------------------------------------------------------ checks made once

    def _check_template(self) -> None:
        for i in self.pipeline.prefix_ids + self.pipeline.suffix_ids:
            if not 0 <= i < len(self._pieces):
                raise ValueError(f"post_processor adds token id {i}, outside the vocab 0..{len(self._pieces) - 1}")

    def _byte_level_ids(self) -> dict[str, int]:
        missing = [b for b in range(256) if BYTE_ENCODER[b] not in self._model_vocab]
        if missing:
            raise ValueError(
                f"vocab lacks byte piece {BYTE_ENCODER[missing[0]]!r} (byte 0x{missing[0]:02x}) "
                f"and {len(missing) - 1} more; every byte must have a token"
            )
        return {BYTE_ENCODER[b]: self._model_vocab[BYTE_ENCODER[b]] for b in range(256)}

    def _unk_token_id(self) -> int | None:
        unk = self.options.unk_token
        if unk is None:
            return None
        if unk not in self._model_vocab:
            raise ValueError(f"model.unk_token {unk!r} is not in the vocab")
        return self._model_vocab[unk]

    def _merge_ranks(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(left id, right id) -> (rank, merged id); a pair listed twice keeps its last rank, as in HF."""
        ranks: dict[tuple[int, int], tuple[int, int]] = {}
        vocab = self._model_vocab
        for rank, (a, b) in enumerate(self.merges):
            ia, ib, ic = vocab.get(a), vocab.get(b), vocab.get(a + b)
            if ia is None or ib is None or ic is None:
                unknown = next(p for p, i in ((a, ia), (b, ib), (a + b, ic)) if i is None)
                raise ValueError(f"merge #{rank} ({a!r}, {b!r}) uses unknown piece {unknown!r}")
            ranks[(ia, ib)] = (rank, ic)
        return ranks

    def _named_id(self, name: str) -> int | None:
        return self.vocab.get(name)

    # ------------------------------------------------------------------ small lookups

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    def id_to_piece(self, id: int) -> str:
        if not 0 <= id < len(self._pieces):
            raise ValueError(f"token id {id} is outside 0..{len(self._pieces) - 1}")
        return self._pieces[id]

    def piece_to_id(self, piece: str) -> int:
        return self.vocab[piece]

    def piece_bytes(self, piece: str) -> bytes:
        return self.alphabet.piece_bytes(piece)

    def display(self, raw: bytes, text: str | None = None, byte_start: int = 0) -> str:
        """See ``display_bytes``."""
        return display_bytes(raw, text, byte_start)

    def display_piece(self, piece: str) -> str:
        """A piece out of context; special tokens show as their text, "<0xe8>" as "‹e8›"."""
        return self.alphabet.display_piece(piece)

    # ------------------------------------------------------------------ encoding

    def _units(self, text: str, track: bool = True) -> list[tuple[AddedToken | None, Aligned]]:
        """The sentence as added tokens and pre-tokens (in the model's alphabet), in order;
        ``track``: keep where each character came from."""
        out: list[tuple[AddedToken | None, Aligned]] = []
        if not text:
            return out
        for a, b, token in self._raw_matcher.find(text):
            if token is not None:
                out.append((token, Aligned.of(text[a:b], a, track)))
                continue
            piece = self.pipeline.normalize(Aligned.of(text[a:b], a, track))
            for c, d, token in self._norm_matcher.find(piece.text):
                part = piece.slice(c, d)
                if token is not None:
                    out.append((token, part))
                else:
                    out.extend((None, word) for word in self.pipeline.pre_tokenize(part))
        return out

    def _initial(self, word: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Base symbols of a pre-token and the [start, end) of its characters each stands for.

        As ``tokenizers`` does it: a character in the vocab is its token; else its bytes as
        "<0xNN>" tokens (byte_fallback); else the unknown token (consecutive ones fused with
        fuse_unk); else it is dropped. An unknown token waits until the next character that is
        in the vocab, as in ``tokenizers``."""
        if self._char_ids is not None:
            return [self._char_ids[c] for c in word], [(i, i + 1) for i in range(len(word))]
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        unk: list[int] | None = None  # [start, end] of the pending unknown token
        for i, c in enumerate(word):
            tid = self._model_vocab.get(c)
            if tid is not None:
                if unk is not None:
                    ids.append(self._unk_id)  # type: ignore[arg-type]
                    spans.append((unk[0], unk[1]))
                    unk = None
                ids.append(tid)
                spans.append((i, i + 1))
                continue
            if self.options.byte_fallback:
                fallback = [self._byte_token_ids[b] for b in c.encode("utf-8")]
                if all(f is not None for f in fallback):
                    ids.extend(fallback)  # type: ignore[arg-type]
                    spans.extend([(i, i + 1)] * len(fallback))
                    continue
            if self._unk_id is None:
                continue
            if unk is not None and self.options.fuse_unk:
                unk[1] = i + 1
            else:
                if unk is not None:
                    ids.append(self._unk_id)
                    spans.append((unk[0], unk[1]))
                unk = [i, i + 1]
        if unk is not None:
            ids.append(self._unk_id)  # type: ignore[arg-type]
            spans.append((unk[0], unk[1]))
        return ids, spans

    def _whole_word_id(self, word: str) -> int | None:
        return self._model_vocab.get(word) if self.options.ignore_merges else None

    def _word_ids_uncached(self, word: str) -> tuple[int, ...]:
        whole = self._whole_word_id(word)
        if whole is not None:
            return (whole,)
        return tuple(merge_word(self._initial(word)[0], self._ranks))

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of text; ``add_special``: with the tokens the post-processor adds (e.g. BOS)."""
        ids: list[int] = list(self.pipeline.prefix_ids) if add_special else []
        for token, part in self._units(clean_text(text), track=False):
            if token is not None:
                ids.append(token.id)
            else:
                ids.extend(self._word_ids(part.text))
        if add_special:
            ids.extend(self.pipeline.suffix_ids)
        return ids

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """Ids back to text through the flavour's decoder; only bytes that are not whole UTF-8 get U+FFFD."""
        pieces = [self.id_to_piece(int(i)) for i in ids if not (skip_special and int(i) in self._special_ids)]
        return self.pipeline.decode(pieces)

    def encode_traced(self, text: str, add_special: bool = True) -> Tokenization:
        """Encode and record the merges as steps over the whole sentence.

        Each step merges one pair at one rank wherever it is the next merge of its word (never
        across pre-token boundaries). Per word this is exactly the sequence of merges ``encode``
        does, so the final pieces are equal."""
        text = clean_text(text)
        parts: list[_Fixed | Aligned] = []
        if add_special:
            parts.extend(_Fixed(i, (0, 0)) for i in self.pipeline.prefix_ids)
        for token, part in self._units(text):
            parts.append(_Fixed(token.id, _char_span(part.origin, part.start)) if token is not None else part)
        if add_special:
            parts.extend(_Fixed(i, (len(text), len(text))) for i in self.pipeline.suffix_ids)

        words = [p for p in parts if isinstance(p, Aligned)]
        starts = [self._initial_traced(w.text) for w in words]
        log = merge_traced([ids for ids, _ in starts], self._ranks)
        replay = Replay(log)

        initial = self._assemble(parts, log.initial)
        word_starts: list[int] = []
        n = 0
        w = 0
        for p in parts:
            word_starts.append(n)
            if isinstance(p, Aligned):
                n += len(log.initial[w])
                w += 1
            else:
                n += 1
        steps = tuple(
            MergeStep(s.rank, self._symbol_piece(s.left), self._symbol_piece(s.right), self._symbol_piece(s.merged), s.count,
                      _replayer(self, parts, replay, s.log_end))
            for s in log.steps
        )
        tokens, owners = self._tokens(text, parts, words, starts, log)
        return Tokenization(text=text, tokens=tuple(tokens), initial_pieces=initial, word_starts=tuple(word_starts),
                            steps=steps, special_pieces=self.alphabet.specials, alphabet=self.alphabet,
                            byte_owners=tuple(owners))

    def _initial_traced(self, word: str) -> tuple[list[int], list[tuple[int, int]]]:
        whole = self._whole_word_id(word)
        if whole is not None:
            return [whole], [(0, len(word))]
        return self._initial(word)

    def _assemble(self, parts: Sequence[_Fixed | Aligned], word_symbols: Sequence[Sequence[int]]) -> tuple[str, ...]:
        """All pieces of the sentence, given the symbols of each word."""
        out: list[str] = []
        words = iter(word_symbols)
        for p in parts:
            if isinstance(p, _Fixed):
                out.append(self._pieces[p.id])
            else:
                out.extend(self._symbol_piece(i) for i in next(words))
        return tuple(out)

    def _symbol_piece(self, i: int) -> str:
        return self._model_names.get(i) or self._pieces[i]

    def _char_bytes(self, c: str) -> int:
        """How many bytes a character of a SentencePiece-style pre-token stands for."""
        return len((" " if c == self.pipeline.space else c).encode("utf-8"))

    def _tokens(self, text: str, parts: Sequence[_Fixed | Aligned], words: Sequence[Aligned],
                starts: Sequence[tuple[list[int], list[tuple[int, int]]]], log: MergeLog
                ) -> tuple[list[Token], list[int]]:
        """The final tokens, and for each byte they stand for, the text character it came from."""
        owners: list[int] = []
        tokens: list[Token] = []
        w = 0

        def add(tid: int, piece: str, chars: tuple[int, int], own: list[int] | None) -> None:
            raw = self.alphabet.piece_bytes(piece)
            if own is None or len(own) != len(raw):  # a special, or an unknown token standing for more
                own = [min(chars[0], max(len(text) - 1, 0))] * len(raw)
            pos = len(owners)
            owners.extend(own)
            special = piece in self.alphabet.specials
            shown = piece if special else _render_in_context(raw, text, owners, pos)
            tokens.append(Token(tid, piece, raw, pos, pos + len(raw), chars[0], chars[1], shown))

        for p in parts:
            if isinstance(p, _Fixed):
                add(p.id, self._pieces[p.id], p.chars, None)
                continue
            word, spans = words[w], starts[w][1]
            positions = log.final_positions[w] + [len(spans)]
            for tid, a, b in zip(log.final[w], positions, positions[1:]):
                lo, hi = spans[a][0], spans[b - 1][1]
                origin = word.origin[lo:hi]
                if self._char_ids is not None:  # byte-level: each character of a pre-token is one byte
                    own = list(origin)
                else:
                    own = [o for c, o in zip(word.text[lo:hi], origin) for _ in range(self._char_bytes(c))]
                add(tid, self._symbol_piece(tid), (min(origin), max(origin) + 1), own)
            w += 1
        return tokens, owners

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
            text = clean_text(text)
            for a, b, special in splitter._raw_matcher.find(text):
                if special is None:
                    word_counts.update(pretokenize(text[a:b]))

        pieces = [BYTE_ENCODER[b] for b in range(256)]
        piece_raw = [bytes([b]) for b in range(256)]
        merges = _learn_merges(word_counts, pieces, piece_raw, vocab_size - len(specials), min_frequency)
        vocab = {p: i for i, p in enumerate(pieces)}
        return cls(vocab, merges, {s: len(pieces) + i for i, s in enumerate(specials)})

    # ------------------------------------------------------------------ files

    def to_json(self) -> dict[str, Any]:
        """The Hugging Face ``tokenizer.json`` structure: the file it was read from (with the BOS/EOS
        template tokenizer_config.json asked for), or the shipped flavour's for a trained one."""
        if self._source_json is not None:
            data = json.loads(self._source_json)
            if self._template_overridden:
                data["post_processor"] = _template_json(self.pipeline.prefix_ids, self.pipeline.suffix_ids, self._pieces)
            return data
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
        atomic_write_bytes(Path(path), self.json_bytes())

    def json_bytes(self) -> bytes:
        """The contents of tokenizer.json (what save writes)."""
        return (json.dumps(self.to_json(), ensure_ascii=False, indent=2) + "\n").encode("utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str], tokenizer_config: Mapping[str, Any] | None = None) -> "BPETokenizer":
        """Read a tokenizer.json (ours or HF's). Raises ValueError("<file name>: <what is wrong>")."""
        name = Path(path).name
        try:
            if os.path.getsize(path) > MAX_TOKENIZER_BYTES:
                raise ValueError(f"larger than {MAX_TOKENIZER_BYTES >> 20} MB; this is not a tokenizer")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            return cls.from_json(json.loads(text), tokenizer_config, source=text)
        except OSError as exc:
            raise ValueError(f"{name}: cannot read ({exc.strerror or exc})") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}: not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
        except RecursionError as exc:
            raise ValueError(f"{name}: JSON nested too deeply") from exc
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from exc

    @classmethod
    def from_json(cls, data: Any, tokenizer_config: Mapping[str, Any] | None = None,
                  source: str | None = None) -> "BPETokenizer":
        """Build from a parsed tokenizer.json; ValueError says what is wrong.

        ``tokenizer_config``: the parsed tokenizer_config.json beside it, if any; it names the BOS and
        EOS tokens, and for Llama-style tokenizer classes decides whether BOS/EOS are added."""
        if not isinstance(data, dict):
            raise ValueError("top level is not a JSON object")
        model = data.get("model")
        if not isinstance(model, dict):
            raise ValueError('no "model" object')
        vocab, merges, options = _read_bpe_model(model)
        pre_tokenizer = tp.read_pre_tokenizer(data.get("pre_tokenizer"))
        normalizer = tp.read_normalizer(data.get("normalizer"))
        byte_level = tp.has_byte_level(pre_tokenizer)
        decoder = tp.read_decoder(data.get("decoder"))
        added = tp.read_added_tokens(data.get("added_tokens"))
        prefix, suffix = tp.read_template(data.get("post_processor"))
        config = dict(tokenizer_config or {})
        all_ids = {**vocab, **{t.content: t.id for t in added}}
        overridden = False
        if config.get("tokenizer_class") in _CONFIG_TEMPLATE_CLASSES:
            prefix, suffix, overridden = _config_template(config, all_ids, prefix, suffix)
        pipeline = Pipeline(normalizer, pre_tokenizer, decoder, prefix, suffix, byte_level,
                            None if byte_level else tp.space_character(normalizer, pre_tokenizer))
        tok = cls(vocab, merges, added_tokens=added, pipeline=pipeline, options=options,
                  bos_token=_token_name(config.get("bos_token")), eos_token=_token_name(config.get("eos_token")))
        tok._source_json = source if source is not None else json.dumps(data, ensure_ascii=False)
        tok._template_overridden = overridden
        return tok


def load_tokenizer(path: str | os.PathLike[str],
                   tokenizer_config: str | os.PathLike[str] | Mapping[str, Any] | None = None) -> BPETokenizer:
    """Read a Hugging Face tokenizer: ``path`` is a tokenizer.json or a folder holding one.

    ``tokenizer_config``: a parsed tokenizer_config.json, or its path; for a folder, the one inside
    is read when this is None. Raises ValueError("<file name>: <what is wrong>")."""
    path = Path(path)
    if path.is_dir():
        if tokenizer_config is None and (path / "tokenizer_config.json").is_file():
            tokenizer_config = path / "tokenizer_config.json"
        path = path / "tokenizer.json"
    if tokenizer_config is not None and not isinstance(tokenizer_config, Mapping):
        tokenizer_config = _read_config(Path(tokenizer_config))
    return BPETokenizer.load(path, tokenizer_config)


def _read_config(path: Path) -> Mapping[str, Any]:
    try:
        if path.stat().st_size > MAX_TOKENIZER_BYTES:
            raise ValueError(f"larger than {MAX_TOKENIZER_BYTES >> 20} MB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path.name}: cannot read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{path.name}: not valid JSON") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path.name}: top level is not a JSON object")
    return data


def _read_bpe_model(model: dict[str, Any]) -> tuple[dict[str, int], list[tuple[str, str]], BPEOptions]:
    kind = model.get("type", "BPE")
    if kind != "BPE":
        raise ValueError(f"model type is {kind!r}; Glassbox reads BPE models only (byte-level as in Llama 3, "
                         "Qwen2/3 and SmolLM, or SentencePiece-style as in Llama 2, Mistral and Mixtral)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"model.{key} is not supported (no family Glassbox imports uses it)")
    if model.get("dropout"):
        raise ValueError("model.dropout is not supported (encoding must be deterministic)")
    vocab = model.get("vocab")
    # (type checks rather than isinstance: JSON gives exact types, and 150k entries are checked)
    if not isinstance(vocab, dict) or not all(type(v) is int for v in vocab.values()):
        raise ValueError('model.vocab must be an object of "piece": id')
    raw_merges = model.get("merges", [])
    if not isinstance(raw_merges, list):
        raise ValueError("model.merges must be a list")
    merges: list[tuple[str, str]] = []
    for k, m in enumerate(raw_merges):
        if type(m) is list and len(m) == 2 and type(m[0]) is str and type(m[1]) is str:
            a, b = m
        elif type(m) is str and m.count(" ") == 1:
            a, b = m.split(" ")
        else:
            raise ValueError(f'merge #{k} is {tp._short(m)}, expected "a b" or ["a", "b"]')
        merges.append((a, b))
    unk = model.get("unk_token")
    if unk is not None and not isinstance(unk, str):
        raise ValueError(f"model.unk_token must be a string or null, found {tp._short(unk)}")
    options = BPEOptions(unk, bool(model.get("byte_fallback", False)), bool(model.get("fuse_unk", False)),
                         bool(model.get("ignore_merges", False)))
    return vocab, merges, options


def _token_name(value: Any) -> str | None:
    """A tokenizer_config token entry: "<s>" or {"content": "<s>", ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _config_template(config: Mapping[str, Any], ids: Mapping[str, int], prefix: tuple[int, ...],
                     suffix: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """BOS/EOS as transformers' Llama-style tokenizer classes add them: add_bos_token (default true),
    add_eos_token (default false)."""
    bos, eos = _token_name(config.get("bos_token")), _token_name(config.get("eos_token"))
    new_prefix = (ids[bos],) if config.get("add_bos_token", True) and bos in ids else ()
    new_suffix = (ids[eos],) if config.get("add_eos_token", False) and eos in ids else ()
    return new_prefix, new_suffix, (new_prefix, new_suffix) != (prefix, suffix)


def _template_json(prefix: Sequence[int], suffix: Sequence[int], pieces: Sequence[str]) -> dict[str, Any]:
    def special(i: int) -> dict[str, Any]:
        return {"SpecialToken": {"id": pieces[i], "type_id": 0}}

    single = [special(i) for i in prefix] + [{"Sequence": {"id": "A", "type_id": 0}}] + [special(i) for i in suffix]
    pair = single + [special(i) for i in prefix] + [{"Sequence": {"id": "B", "type_id": 1}}] + [
        special(i) for i in suffix]
    names = {pieces[i]: {"id": pieces[i], "ids": [i], "tokens": [pieces[i]]} for i in (*prefix, *suffix)}
    return {"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": names}


def _pieces_by_id(by_id: Mapping[int, str]) -> list[str]:
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError(f"ids are not contiguous 0..{len(by_id) - 1} (or repeat)")
    return [by_id[i] for i in range(len(by_id))]


def _char_span(origin: Sequence[int], start: int) -> tuple[int, int]:
    return (min(origin), max(origin) + 1) if origin else (start, start)


def _replayer(tok: BPETokenizer, parts: Sequence[Any], replay: Replay, log_end: int):
    return lambda: tok._assemble(parts, replay.symbols_after(log_end))


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
