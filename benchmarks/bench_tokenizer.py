"""Tokenizer speed: the shipped tokenizer and big-vocab flavours of real models' sizes.

    python benchmarks/bench_tokenizer.py [--chars 10000] [--repeats 5] [--json]

The big flavours are synthesised, never downloaded: a byte-level BPE trained with `tokenizers` on
the project's own sentences, then grown with made-up merges (a piece + one more letter) to
SmolLM2's vocab (49,152, Digits + ByteLevel) and Qwen2's (151,643 + added tokens, NFC + Split
regex + ByteLevel); and a SentencePiece-style one of Llama 2's 32,000. Prints medians (ms) of load,
encode, encode_traced (what the app runs) and the vocab labels the panels show, next to the
`tokenizers` library's encode for scale.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tokenizers import Tokenizer  # noqa: E402

from core.session import vocab_labels  # noqa: E402
from core.tokenizer import load_tokenizer  # noqa: E402
from tests.tokenizer_flavours import llama2, mixed_texts, qwen2, smollm  # noqa: E402

SHIPPED = Path(__file__).resolve().parent.parent / "resources" / "model" / "tokenizer.json"


def grow(tok: Tokenizer, model_size: int, seed: int = 0) -> str:
    """tokenizer.json text with the model vocab grown to model_size by merges (piece, one letter)."""
    data = json.loads(tok.to_str())
    model = data["model"]
    vocab, merges = model["vocab"], model["merges"]
    tail = [t for t in data["added_tokens"] if t["id"] >= len(vocab) - len(data["added_tokens"])]
    for t in tail:  # added tokens after the model vocab move to its new end (Llama 2's stay at 0..2)
        vocab.pop(t["content"], None)
    pieces = sorted(vocab, key=vocab.get)
    vocab = {p: i for i, p in enumerate(pieces)}
    singles = [p for p in pieces if p in "abcdefghijklmnopqrstuvwxyzĠ▁"]  # new pieces read like words
    rng = random.Random(seed)
    while len(vocab) < model_size:
        left, right = rng.choice(pieces[-4000:] if rng.random() < 0.7 else pieces), rng.choice(singles)
        if left + right not in vocab and not left.startswith("<") and len(left) < 12:  # real pieces are short
            vocab[left + right] = len(vocab)
            pieces.append(left + right)
            merges.append([left, right])
    model["vocab"] = vocab
    for k, t in enumerate(tail):
        t["id"] = len(vocab) + k
    return json.dumps(data, ensure_ascii=False)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 1)


def measure(name: str, path: Path, text: str, repeats: int) -> dict:
    t0 = time.perf_counter()
    ours = load_tokenizer(path)
    load_ms = (time.perf_counter() - t0) * 1000
    labels_ms = median_ms(lambda: vocab_labels(ours), 1)  # first call: computed, then cached per tokenizer
    hf = Tokenizer.from_file(str(path))
    assert ours.encode(text) == hf.encode(text).ids, f"{name}: ids differ from tokenizers"
    return {
        "tokenizer": name,
        "vocab": ours.vocab_size,
        "load_ms": round(load_ms, 1),
        "tokens": len(ours.encode(text)),
        "encode_ms": median_ms(lambda: ours._word_ids.cache_clear() or ours.encode(text), repeats),
        "encode_warm_ms": median_ms(lambda: ours.encode(text), repeats),
        "encode_traced_ms": median_ms(lambda: ours.encode_traced(text), repeats),
        "vocab_labels_ms": labels_ms,
        "hf_encode_ms": median_ms(lambda: hf.encode(text), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    text = ""
    for s in mixed_texts(10_000, seed=5):
        text += s
        if len(text) >= args.chars:
            break
    text = text[: args.chars]
    rows = [measure("shipped", SHIPPED, text, args.repeats)]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, size in (("smollm2_49k", smollm, 49_152), ("qwen2_151k", qwen2, 151_643),
                                 ("llama2_32k", llama2, 32_000 - 3)):
            path = Path(tmp) / f"{name}.json"
            path.write_text(grow(make(), size), encoding="utf-8")
            rows.append(measure(name, path, text, args.repeats))
    if args.json:
        print(json.dumps({"chars": len(text), "results": rows}, indent=2))
    else:
        for row in rows:
            print(" ".join(f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
