"""Forward time with a full trace, NumPy reference vs ONNX Runtime, at several sentence lengths.

    python benchmarks/bench_forward.py [--model BUNDLE] [--repeats 20]

Without --model it builds a random bundle of the shipped model's shape (2 layers, d=128,
4 heads, 4 experts top-2, vocab 2048, context 256) in a temporary folder. Prints medians.
For single-threaded BLAS run it with OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 and --ort-threads 1.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.bundle import load_bundle  # noqa: E402
from core.config import ModelConfig  # noqa: E402
from core.random_bundle import make_random_bundle  # noqa: E402
from core.runners import NumpyRunner, OnnxRunner, max_difference  # noqa: E402

SHIPPED_SHAPE = ModelConfig(vocab_size=2048, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=4, num_local_experts=4,
                            num_experts_per_tok=2, max_position_embeddings=256)


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-call allocations and ORT's lazy initialisation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--ort-threads", type=int, default=0, help="0: the runner's default")
    parser.add_argument("--lengths", default="16,64,256")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            bundle = load_bundle(args.model)
        else:
            from core.tokenizer import BPETokenizer
            from core.sample_text import sample_sentences
            tokenizer = BPETokenizer.train(sample_sentences(400) * 3, vocab_size=600, min_frequency=1)
            from dataclasses import replace
            make_random_bundle(tmp, replace(SHIPPED_SHAPE, vocab_size=tokenizer.vocab_size), tokenizer=tokenizer)
            bundle = load_bundle(tmp)
        numpy_runner = NumpyRunner(bundle)
        onnx_runner = OnnxRunner(bundle, threads=args.ort_threads or None)
        rng = np.random.default_rng(0)
        print(f"model: L={bundle.config.num_hidden_layers} D={bundle.config.hidden_size} "
              f"V={bundle.config.vocab_size} repeats={args.repeats}")
        print(f"{'T':>5} {'numpy ms':>10} {'onnx ms':>10} {'numpy/onnx':>11} {'max |diff|':>11}")
        for t in (int(x) for x in args.lengths.split(",")):
            t = min(t, bundle.config.max_position_embeddings)
            ids = rng.integers(0, bundle.config.vocab_size, t)
            a = median_seconds(lambda: numpy_runner.run(ids), args.repeats)
            b = median_seconds(lambda: onnx_runner.run(ids), args.repeats)
            diff = max_difference(numpy_runner.run(ids), onnx_runner.run(ids))
            print(f"{t:>5} {a * 1e3:>10.2f} {b * 1e3:>10.2f} {a / b:>11.2f} {diff:>11.2e}")


if __name__ == "__main__":
    main()
