"""GPT-2's byte alphabet: every byte written as one printable character, so byte-level vocab pieces
are plain strings ("Ġthe" is b" the"). Shared by the BPE model and the tokenizer.json pipeline."""

from __future__ import annotations

import regex

# GPT-2's pre-tokenizer regex (the one HF's ByteLevel pre-tokenizer uses with use_regex=true).
PRETOKENIZE_PATTERN = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
)
PRETOKENIZE_RE = regex.compile(PRETOKENIZE_PATTERN)


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


# Piece character -> its byte (as a code point); characters 0..323 outside the alphabet -> U+FFFF,
# so that after translate, a piece is in the alphabet exactly when it encodes as latin-1.
_TO_LATIN1 = {cp: 0xFFFF for cp in range(324)} | {ord(c): b for b, c in BYTE_ENCODER.items()}


def in_byte_alphabet(piece: str) -> bool:
    try:
        piece.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def piece_to_bytes(piece: str) -> bytes:
    """Bytes of a vocab piece written in the byte alphabet (not for special tokens)."""
    try:
        return piece.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        bad = next(c for c in piece if c not in BYTE_DECODER)
        raise ValueError(f"piece {piece!r} has a character outside the byte alphabet ({bad!r})") from None
