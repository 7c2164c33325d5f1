"""The stages of a Hugging Face ``tokenizer.json`` around its BPE model, hand-written.

``tokenizers`` runs a sentence through: added tokens cut out -> normalizer -> pre-tokenizer ->
model (BPE, in core/tokenizer.py) -> post-processor (BOS/EOS template); ids go back through the
decoder. This module holds the stages that the families Glassbox imports ship, each doing what
the ``tokenizers`` library does, and reads them from tokenizer.json. Anything else is refused with
one message that names what was found and what is supported.

- byte-level BPE (Llama 3, Qwen2/3, SmolLM): NFC normalizer (Qwen2), Split(regex) / Digits /
  ByteLevel pre-tokenizers in a Sequence;
- SentencePiece-style BPE (Llama 2, TinyLlama, Mistral, Mixtral): Prepend("▁") + Replace(" ", "▁")
  normalizers (older files) or a Metaspace pre-tokenizer (newer files); Replace / ByteFallback /
  Fuse / Strip / Metaspace decoders.

Text travels as ``Aligned``: a string plus, for each character, the index of the character of the
user's text it came from, so every token can say which characters it covers.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import regex

from core.byte_level import BYTE_ENCODER, PRETOKENIZE_RE, in_byte_alphabet, piece_to_bytes

_WHITESPACE = regex.compile(r"\p{White_Space}")  # Rust's char::is_whitespace
_WORD_AT_START = regex.compile(r"^\w")
_WORD_AT_END = regex.compile(r"\w$")
_BYTE_TOKEN = regex.compile(r"<0x([0-9A-Fa-f]{2})>")


# ----------------------------------------------------------------------------- aligned text


class Aligned(NamedTuple):
    """Text on its way to the model. ``origin[k]``: index in the user's text of the character
    ``text[k]`` was made from (a prepended "▁" borrows the first character's)."""

    text: str
    # A range while nothing moved characters around (slicing it is free); None when not tracked
    # (plain encode), then every stage only transforms the text.
    origin: Sequence[int] | None
    start: int  # where it begins in the user's text, also when it is empty

    @staticmethod
    def of(text: str, start: int = 0, track: bool = True) -> "Aligned":
        return Aligned(text, range(start, start + len(text)) if track else None, start)

    def slice(self, a: int, b: int) -> "Aligned":
        if self.origin is None:
            return Aligned(self.text[a:b], None, self.start + a)
        start = self.origin[a] if a < len(self.origin) else self.start + a
        return Aligned(self.text[a:b], self.origin[a:b], start)


def _replace_text(text: str, spans: Sequence[tuple[int, int]], content: str) -> str:
    out: list[str] = []
    pos = 0
    for a, b in spans:
        out.append(text[pos:a])
        out.append(content)
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _replace_spans(piece: Aligned, spans: Sequence[tuple[int, int]], content: str) -> Aligned:
    """Replace each [a, b) of piece.text with content; the new characters take text[a]'s origin."""
    if piece.origin is None:
        return Aligned(_replace_text(piece.text, spans, content), None, piece.start)
    text: list[str] = []
    origin: list[int] = []
    pos = 0
    for a, b in spans:
        text.append(piece.text[pos:a])
        origin.extend(piece.origin[pos:a])
        text.append(content)
        origin.extend([piece.origin[a]] * len(content))
        pos = b
    text.append(piece.text[pos:])
    origin.extend(piece.origin[pos:])
    return Aligned("".join(text), tuple(origin), piece.start)


# ----------------------------------------------------------------------------- normalizers


@dataclass(frozen=True)
class NFC:
    def normalize(self, piece: Aligned) -> Aligned:
        if unicodedata.is_normalized("NFC", piece.text):
            return piece
        if piece.origin is None:
            return Aligned(unicodedata.normalize("NFC", piece.text), None, piece.start)
        text, origin = _nfc_with_origin(piece.text, piece.origin)
        return Aligned(text, origin, piece.start)


def _nfc_with_origin(text: str, origin: Sequence[int]) -> tuple[str, tuple[int, ...]]:
    """NFC one cluster (a starter and the marks after it) at a time, so each composed character
    keeps its starter's origin; if clusters do not compose alike, spread the whole text evenly."""
    whole = unicodedata.normalize("NFC", text)
    starts = [i for i, c in enumerate(text) if i == 0 or unicodedata.combining(c) == 0]
    out: list[str] = []
    out_origin: list[int] = []
    for a, b in zip(starts, starts[1:] + [len(text)]):
        part = unicodedata.normalize("NFC", text[a:b])
        out.append(part)
        out_origin.extend(origin[a + min(k, b - a - 1)] for k in range(len(part)))
    if "".join(out) == whole:
        return whole, tuple(out_origin)
    return whole, tuple(origin[k * len(text) // len(whole)] for k in range(len(whole)))


@dataclass(frozen=True)
class Prepend:
    prefix: str

    def normalize(self, piece: Aligned) -> Aligned:
        if not piece.text:
            return piece
        if piece.origin is None:
            return Aligned(self.prefix + piece.text, None, piece.start)
        origin = (piece.origin[0],) * len(self.prefix) + tuple(piece.origin)
        return Aligned(self.prefix + piece.text, origin, piece.start)


@dataclass(frozen=True)
class Replace:
    pattern: str  # a literal string, or a regex when is_regex
    content: str
    is_regex: bool = False

    def spans(self, text: str) -> list[tuple[int, int]]:
        if self.is_regex:
            return [m.span() for m in regex.finditer(self.pattern, text) if m.end() > m.start()]
        out, pos = [], text.find(self.pattern)
        while pos >= 0 and self.pattern:
            out.append((pos, pos + len(self.pattern)))
            pos = text.find(self.pattern, pos + len(self.pattern))
        return out

    def normalize(self, piece: Aligned) -> Aligned:
        spans = self.spans(piece.text)
        return _replace_spans(piece, spans, self.content) if spans else piece

    def decode_chain(self, tokens: list[str]) -> list[str]:
        return [_replace_text(t, self.spans(t), self.content) for t in tokens]


@dataclass(frozen=True)
class NormalizerSequence:
    steps: tuple[Any, ...]

    def normalize(self, piece: Aligned) -> Aligned:
        for step in self.steps:
            piece = step.normalize(piece)
        return piece


# ----------------------------------------------------------------------------- pre-tokenizers

# Each pre-tokenizer maps one piece to its pieces; a Sequence runs them in order on every piece,
# and empty pieces are dropped after each step, as in ``tokenizers``.

BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def _regex_matches(pattern: "regex.Pattern[str]", text: str) -> list[tuple[int, int, bool]]:
    """Cover text with (start, end, is_match), as ``tokenizers``' find_matches does."""
    if not text:
        return [(0, 0, False)]
    out: list[tuple[int, int, bool]] = []
    prev = 0
    for m in pattern.finditer(text):
        a, b = m.span()
        if a == b:
            continue
        if a != prev:
            out.append((prev, a, False))
        out.append((a, b, True))
        prev = b
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def _char_matches(is_match: Callable[[str], bool], text: str) -> list[tuple[int, int, bool]]:
    """Each matching character is its own match (``tokenizers``' Fn(char) pattern)."""
    if not text:
        return [(0, 0, False)]
    out: list[tuple[int, int, bool]] = []
    prev = 0
    for i, c in enumerate(text):
        if is_match(c):
            if prev < i:
                out.append((prev, i, False))
            out.append((i, i + 1, True))
            prev = i + 1
    if prev < len(text):
        out.append((prev, len(text), False))
    return out


def _split(piece: Aligned, matches: list[tuple[int, int, bool]], behavior: str) -> list[Aligned]:
    spans: list[list[int]] = []  # [start, end, keep]
    previous = False
    if behavior == "MergedWithNext":
        for a, b, m in reversed(matches):
            if m and not previous and spans:
                spans[-1][0] = a
            else:
                spans.append([a, b, 1])
            previous = m
        spans.reverse()
    else:
        for a, b, m in matches:
            merge = (behavior == "Contiguous" and m == previous) or (behavior == "MergedWithPrevious" and m and not previous)
            if merge and spans:
                spans[-1][1] = b
            else:
                spans.append([a, b, 0 if behavior == "Removed" and m else 1])
            previous = m
    return [piece.slice(a, b) for a, b, keep in spans if keep]


@dataclass(frozen=True)
class Split:
    pattern: "regex.Pattern[str]"
    behavior: str
    invert: bool = False

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        matches = _regex_matches(self.pattern, piece.text)
        if self.invert:
            matches = [(a, b, not m) for a, b, m in matches]
        return _split(piece, matches, self.behavior)


def _is_numeric(c: str) -> bool:
    return unicodedata.category(c) in ("Nd", "Nl", "No")  # Rust's char::is_numeric


@dataclass(frozen=True)
class Digits:
    individual: bool

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        return _split(piece, _char_matches(_is_numeric, piece.text), "Isolated" if self.individual else "Contiguous")


@dataclass(frozen=True)
class ByteLevel:
    """Optionally split with GPT-2's regex, then write each character's UTF-8 bytes in the byte alphabet."""

    use_regex: bool = True

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        parts = _split(piece, _regex_matches(PRETOKENIZE_RE, piece.text), "Isolated") if self.use_regex else [piece]
        return [_to_byte_alphabet(p) for p in parts]


_LATIN1_TO_BYTE_ALPHABET = {b: BYTE_ENCODER[b] for b in range(256)}


def _to_byte_alphabet(piece: Aligned) -> Aligned:
    text = piece.text.encode("utf-8").decode("latin-1").translate(_LATIN1_TO_BYTE_ALPHABET)
    if piece.origin is None or len(text) == len(piece.text):  # untracked, or ASCII: one byte per character
        return Aligned(text, piece.origin, piece.start)
    origin = tuple(o for c, o in zip(piece.text, piece.origin) for _ in range(len(c.encode("utf-8"))))
    return Aligned(text, origin, piece.start)


@dataclass(frozen=True)
class Metaspace:
    """Spaces become the replacement ("▁"); one is put in front (always, or only at the start of the
    text: "first"); with split, every "▁" starts a new piece."""

    replacement: str = "▁"
    prepend_scheme: str = "always"  # "always" | "first" | "never"
    split_pieces: bool = True

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        piece = Aligned(piece.text.replace(" ", self.replacement), piece.origin, piece.start)
        prepend = self.prepend_scheme == "always" or (self.prepend_scheme == "first" and piece.start == 0)
        if prepend and not piece.text.startswith(self.replacement):
            if piece.origin is None:
                piece = Aligned(self.replacement + piece.text, None, piece.start)
            else:
                origin = tuple(piece.origin[:1]) if piece.origin else (piece.start,)
                piece = Aligned(self.replacement + piece.text, origin + tuple(piece.origin), piece.start)
        if not self.split_pieces:
            return [piece]
        return _split(piece, _char_matches(lambda c: c == self.replacement, piece.text), "MergedWithNext")

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            text = token.replace(self.replacement, " ")
            if i == 0 and self.prepend_scheme != "never" and text.startswith(" "):
                text = text[1:]
            out.append(text)
        return out


@dataclass(frozen=True)
class PreTokenizerSequence:
    steps: tuple[Any, ...]

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        pieces = [piece]
        for step in self.steps:
            pieces = [p for q in pieces for p in step.pre_tokenize(q) if p.text]
        return pieces


# ----------------------------------------------------------------------------- added tokens


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool = True
    single_word: bool = False
    lstrip: bool = False  # also takes the whitespace on its left
    rstrip: bool = False  # ... and on its right
    normalized: bool = False  # matched in the normalized text instead of the typed one


class AddedTokenMatcher:
    """Finds added tokens, leftmost-longest, with their single_word / lstrip / rstrip rules."""

    def __init__(self, tokens: Sequence[AddedToken], contents: Sequence[str]) -> None:
        """``contents[k]``: the text ``tokens[k]`` is matched as (normalized content when it is normalized)."""
        self._by_text: dict[str, AddedToken] = {}
        for token, text in zip(tokens, contents):
            self._by_text.setdefault(text, token)
        alts = sorted((t for t in self._by_text if t), key=len, reverse=True)
        self._re = regex.compile("|".join(regex.escape(t) for t in alts)) if alts else None

    def find(self, text: str) -> list[tuple[int, int, AddedToken | None]]:
        """Cover text with (start, end, token or None for text in between)."""
        if self._re is None:
            return [(0, len(text), None)] if text else []
        out: list[tuple[int, int, AddedToken | None]] = []
        done = 0
        for m in self._re.finditer(text):
            token = self._by_text[m.group()]
            start, stop = m.span()
            if token.single_word and (
                (start > 0 and _WORD_AT_END.search(text[:start])) or (stop < len(text) and _WORD_AT_START.match(text[stop:]))
            ):
                continue
            if token.lstrip:
                while start > done and _WHITESPACE.match(text[start - 1]):
                    start -= 1
            if token.rstrip:
                while stop < len(text) and _WHITESPACE.match(text[stop]):
                    stop += 1
            if done < start:
                out.append((done, start, None))
            out.append((start, stop, token))
            done = stop
        if done < len(text):
            out.append((done, len(text), None))
        return out


# ----------------------------------------------------------------------------- decoders


@dataclass(frozen=True)
class ByteLevelDecoder:
    def decode_chain(self, tokens: list[str]) -> list[str]:
        raw = b"".join(piece_to_bytes(t) if in_byte_alphabet(t) else t.encode("utf-8") for t in tokens)
        return [raw.decode("utf-8", errors="replace")]


@dataclass(frozen=True)
class ByteFallbackDecoder:
    """Runs of "<0xNN>" tokens become their text; a run that is not UTF-8 becomes one U+FFFD per byte."""

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out: list[str] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                try:
                    out.append(bytes(run).decode("utf-8"))
                except UnicodeDecodeError:
                    out.extend("\ufffd" for _ in run)
                run.clear()

        for t in tokens:
            m = _BYTE_TOKEN.fullmatch(t)
            if m:
                run.append(int(m.group(1), 16))
            else:
                flush()
                out.append(t)
        flush()
        return out


@dataclass(frozen=True)
class FuseDecoder:
    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


@dataclass(frozen=True)
class StripDecoder:
    content: str
    start: int
    stop: int

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        for t in tokens:
            a, b = 0, len(t)
            while a < min(self.start, b) and t[a] == self.content:
                a += 1
            while b > a and len(t) - b < self.stop and t[b - 1] == self.content:
                b -= 1
            out.append(t[a:b])
        return out


@dataclass(frozen=True)
class DecoderSequence:
    steps: tuple[Any, ...]

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for step in self.steps:
            tokens = step.decode_chain(tokens)
        return tokens


# ----------------------------------------------------------------------------- the whole pipeline


@dataclass(frozen=True)
class Pipeline:
    """Everything around the BPE model. The default is GPT-2's (the shipped tokenizer's)."""

    normalizer: Any = None
    pre_tokenizer: Any = ByteLevel(use_regex=True)
    decoder: Any = ByteLevelDecoder()
    prefix_ids: tuple[int, ...] = ()  # added before the text by the post-processor (e.g. BOS)
    suffix_ids: tuple[int, ...] = ()
    byte_level: bool = True  # vocab pieces are written in the byte alphabet
    space: str | None = None  # SentencePiece style: the character pieces write a space as ("▁")

    def normalize(self, piece: Aligned) -> Aligned:
        return self.normalizer.normalize(piece) if self.normalizer is not None else piece

    def pre_tokenize(self, piece: Aligned) -> list[Aligned]:
        if self.pre_tokenizer is None:
            return [piece] if piece.text else []
        return [p for p in self.pre_tokenizer.pre_tokenize(piece) if p.text]

    def decode(self, pieces: list[str]) -> str:
        if self.decoder is None:
            return " ".join(pieces)
        return "".join(self.decoder.decode_chain(pieces))


# ----------------------------------------------------------------------------- reading tokenizer.json

SUPPORTED_NORMALIZERS = ("NFC", "Prepend", "Replace", "Sequence")
SUPPORTED_PRE_TOKENIZERS = ("ByteLevel", "Split", "Digits", "Metaspace", "Sequence")
SUPPORTED_DECODERS = ("ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip", "Sequence")
SUPPORTED_POST_PROCESSORS = ("ByteLevel", "TemplateProcessing", "Sequence")


def _obj(node: Any, where: str) -> dict[str, Any]:
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise ValueError(f"{where} must be an object with a \"type\", found {_short(node)}")
    return node


def _short(node: Any) -> str:
    text = repr(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _unsupported(where: str, found: str, supported: Sequence[str]) -> ValueError:
    return ValueError(f"{where} {found!r} is not supported (Glassbox reads: {', '.join(supported)})")


def _string_field(node: dict[str, Any], key: str, where: str) -> str:
    value = node.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{where}.{key} must be a string, found {_short(value)}")
    return value


def _pattern(node: dict[str, Any], where: str) -> tuple[str, bool]:
    """(pattern, is_regex) from {"String": s} or {"Regex": r}."""
    pat = node.get("pattern")
    if isinstance(pat, dict) and len(pat) == 1:
        kind, value = next(iter(pat.items()))
        if kind in ("String", "Regex") and isinstance(value, str):
            return value, kind == "Regex"
    raise ValueError(f'{where}.pattern must be {{"String": ...}} or {{"Regex": ...}}, found {_short(pat)}')


def _compile(pattern: str, where: str) -> "regex.Pattern[str]":
    try:
        return regex.compile(pattern)
    except (regex.error, RecursionError) as exc:
        raise ValueError(f"{where} regex does not compile ({exc})") from exc


def read_normalizer(node: Any, where: str = "normalizer") -> Any:
    if node is None:
        return None
    kind = _obj(node, where)["type"]
    if kind == "NFC":
        return NFC()
    if kind == "Prepend":
        return Prepend(_string_field(node, "prepend", where))
    if kind == "Replace":
        pattern, is_regex = _pattern(node, where)
        if is_regex:
            _compile(pattern, where)
        return Replace(pattern, _string_field(node, "content", where), is_regex)
    if kind == "Sequence":
        steps = node.get("normalizers")
        if not isinstance(steps, list):
            raise ValueError(f"{where}.normalizers must be a list")
        return NormalizerSequence(tuple(read_normalizer(s, f"{where}[{i}]") for i, s in enumerate(steps)))
    raise _unsupported("normalizer", kind, SUPPORTED_NORMALIZERS)


def read_pre_tokenizer(node: Any, where: str = "pre_tokenizer") -> Any:
    if node is None:
        return None
    kind = _obj(node, where)["type"]
    if kind == "ByteLevel":
        if node.get("add_prefix_space", False):
            raise ValueError(f"{where}: ByteLevel with add_prefix_space=true is not supported")
        return ByteLevel(bool(node.get("use_regex", True)))
    if kind == "Split":
        pattern, is_regex = _pattern(node, where)
        behavior = node.get("behavior")
        if behavior not in BEHAVIORS:
            raise _unsupported(f"{where}.behavior", str(behavior), BEHAVIORS)
        compiled = _compile(pattern if is_regex else regex.escape(pattern), where)
        return Split(compiled, behavior, bool(node.get("invert", False)))
    if kind == "Digits":
        return Digits(bool(node.get("individual_digits", False)))
    if kind == "Metaspace":
        return _read_metaspace(node, where)
    if kind == "Sequence":
        steps = node.get("pretokenizers")
        if not isinstance(steps, list):
            raise ValueError(f"{where}.pretokenizers must be a list")
        return PreTokenizerSequence(tuple(read_pre_tokenizer(s, f"{where}[{i}]") for i, s in enumerate(steps)))
    raise _unsupported("pre_tokenizer", kind, SUPPORTED_PRE_TOKENIZERS)


def _read_metaspace(node: dict[str, Any], where: str) -> Metaspace:
    replacement = node.get("replacement", "▁")
    if not (isinstance(replacement, str) and len(replacement) == 1):
        raise ValueError(f"{where}.replacement must be one character, found {_short(replacement)}")
    scheme = node.get("prepend_scheme")
    if scheme is None:  # files from before prepend_scheme: add_prefix_space
        scheme = "always" if node.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first", "never"):
        raise _unsupported(f"{where}.prepend_scheme", str(scheme), ("always", "first", "never"))
    return Metaspace(replacement, scheme, bool(node.get("split", True)))


def read_decoder(node: Any, where: str = "decoder") -> Any:
    if node is None:
        return None
    kind = _obj(node, where)["type"]
    simple = {"ByteLevel": ByteLevelDecoder, "ByteFallback": ByteFallbackDecoder, "Fuse": FuseDecoder}
    if kind in simple:
        return simple[kind]()
    if kind == "Metaspace":
        return _read_metaspace(node, where)
    if kind == "Replace":
        pattern, is_regex = _pattern(node, where)
        return Replace(pattern, _string_field(node, "content", where), is_regex)
    if kind == "Strip":
        content = node.get("content", " ")
        start, stop = node.get("start", 0), node.get("stop", 0)
        if not (isinstance(content, str) and len(content) == 1 and _small_count(start) and _small_count(stop)):
            raise ValueError(f"{where}: Strip needs one character and two small counts, found {_short(node)}")
        return StripDecoder(content, start, stop)
    if kind == "Sequence":
        steps = node.get("decoders")
        if not isinstance(steps, list):
            raise ValueError(f"{where}.decoders must be a list")
        return DecoderSequence(tuple(read_decoder(s, f"{where}[{i}]") for i, s in enumerate(steps)))
    raise _unsupported("decoder", kind, SUPPORTED_DECODERS)


def _small_count(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 1000


def read_template(node: Any, where: str = "post_processor") -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ids before the text, ids after it) that the post-processor adds to a single sentence."""
    if node is None:
        return (), ()
    kind = _obj(node, where)["type"]
    if kind == "ByteLevel":
        return (), ()
    if kind == "Sequence":
        steps = node.get("processors")
        if not isinstance(steps, list):
            raise ValueError(f"{where}.processors must be a list")
        prefix: tuple[int, ...] = ()
        suffix: tuple[int, ...] = ()
        for i, step in enumerate(steps):
            p, s = read_template(step, f"{where}[{i}]")
            prefix, suffix = p + prefix, suffix + s
        return prefix, suffix
    if kind == "TemplateProcessing":
        return _read_template_processing(node, where)
    raise _unsupported("post_processor", kind, SUPPORTED_POST_PROCESSORS)


def _read_template_processing(node: dict[str, Any], where: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    single, specials = node.get("single"), node.get("special_tokens", {})
    if not isinstance(single, list) or not isinstance(specials, dict):
        raise ValueError(f"{where}: TemplateProcessing needs a \"single\" list and a \"special_tokens\" object")
    before: list[int] = []
    after: list[int] = []
    seen_text = False
    for item in single:
        if isinstance(item, dict) and "Sequence" in item:
            if seen_text or not isinstance(item["Sequence"], dict) or item["Sequence"].get("id") != "A":
                raise ValueError(f"{where}: the single-sentence template must hold $A once, found {_short(single)}")
            seen_text = True
        elif isinstance(item, dict) and isinstance(item.get("SpecialToken"), dict):
            name = item["SpecialToken"].get("id")
            ids = specials.get(name, {}).get("ids") if isinstance(specials.get(name), dict) else None
            if not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
                raise ValueError(f"{where}: template token {name!r} has no ids in special_tokens")
            (after if seen_text else before).extend(ids)
        else:
            raise ValueError(f"{where}: template item {_short(item)} is neither a SpecialToken nor a Sequence")
    if not seen_text:
        raise ValueError(f"{where}: the single-sentence template has no $A")
    return tuple(before), tuple(after)


def read_added_tokens(node: Any) -> list[AddedToken]:
    if node is None:
        return []
    if not isinstance(node, list):
        raise ValueError("added_tokens must be a list")
    out: list[AddedToken] = []
    for k, t in enumerate(node):
        if not (isinstance(t, dict) and isinstance(t.get("content"), str) and isinstance(t.get("id"), int)
                and not isinstance(t.get("id"), bool)):
            raise ValueError(f"added token #{k} must have a string \"content\" and an integer \"id\", found {_short(t)}")
        if not t["content"]:
            raise ValueError(f"added token #{k} (id {t['id']}) has empty content")
        flags = {key: bool(t.get(key, default)) for key, default in
                 (("special", True), ("single_word", False), ("lstrip", False), ("rstrip", False),
                  ("normalized", not t.get("special", True)))}
        out.append(AddedToken(t["id"], t["content"], **flags))
    return out


def space_character(normalizer: Any, pre_tokenizer: Any) -> str | None:
    """The character SentencePiece-style pieces write a space as: Metaspace's replacement, or what a
    Replace(" ", c) normalizer puts in; None if spaces stay spaces."""
    for step in _flatten(pre_tokenizer, "steps"):
        if isinstance(step, Metaspace):
            return step.replacement
    for step in _flatten(normalizer, "steps"):
        if isinstance(step, Replace) and not step.is_regex and step.pattern == " " and len(step.content) == 1:
            return step.content
    return None


def has_byte_level(pre_tokenizer: Any) -> bool:
    return any(isinstance(step, ByteLevel) for step in _flatten(pre_tokenizer, "steps"))


def _flatten(node: Any, attr: str) -> list[Any]:
    if node is None:
        return []
    if hasattr(node, attr):
        return [s for step in getattr(node, attr) for s in _flatten(step, attr)]
    return [node]
