"""The Qt-free half of `main.py bench`: forward-pass timing and the matplotlib baseline.

Every number is a median over repeated runs, in milliseconds. The GUI half (update, startup,
export, memory) is benchmarks/bench_gui.py, which calls these and merges the results.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import numpy as np

from core.bundle import Bundle
from core.trace import Trace


def median_ms(fn: Callable[[], object], repeats: int, warm_up: int = 1) -> float:
    """Median wall time of fn() in ms; the warm-up calls (first allocations, lazy set-up) are not counted."""
    for _ in range(warm_up):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def lengths(bundle: Bundle) -> dict[str, int]:
    """The sentence lengths every timing is taken at: 16, 64 and the model's context ("MAX")."""
    context = bundle.config.max_position_embeddings
    return {"16": min(16, context), "64": min(64, context), "MAX": context}


def text_of_tokens(tokenizer, n: int, shift: int = 0) -> str:
    """A mixed English/Chinese text of exactly n tokens or a little fewer; `shift` varies it."""
    from core.sample_text import sample_sentences

    ids = tokenizer.encode(" ".join(sample_sentences(400, seed=shift)))
    text = tokenizer.decode(ids[:n])
    while len(tokenizer.encode(text)) > n:   # decoding a prefix can re-merge: trim to fit
        text = text[:-1]
    return text


def forward_ms(bundle: Bundle, repeats: int) -> dict[str, dict[str, float]]:
    """{"forward_onnx_ms": {"16": ..}, "forward_numpy_ms": {..}}: one full-trace run of each length."""
    from core.runners import NumpyRunner, OnnxRunner

    runners = {"forward_onnx_ms": OnnxRunner(bundle), "forward_numpy_ms": NumpyRunner(bundle)}
    rng = np.random.default_rng(0)
    result: dict[str, dict[str, float]] = {name: {} for name in runners}
    for key, n in lengths(bundle).items():
        ids = rng.integers(0, bundle.config.vocab_size, n)
        for name, runner in runners.items():
            result[name][key] = median_ms(lambda: runner.run(ids), repeats)
    return result


def matplotlib_grid(trace: Trace, size_px: tuple[int, int], font_file: str | None = None) -> None:
    """The layer × head grid as a notebook user draws it: subplots, imshow, every token labelled.

    Rendered to an Agg canvas of size_px, as a figure on screen would be. matplotlib is a
    bench-only dependency, imported here and nowhere else.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    if font_file:   # the bundled CJK font, so Chinese labels are glyphs here too
        font_manager.fontManager.addfont(font_file)
        family = font_manager.FontProperties(fname=font_file).get_name()
        plt.rcParams["font.family"] = [family, "DejaVu Sans"]   # per-glyph fallback for arrows, ␣
    labels = trace.labels()
    mask = np.triu(np.ones((trace.n_tokens, trace.n_tokens), dtype=bool), k=1)
    dpi = 100
    fig, axes = plt.subplots(trace.num_layers, trace.num_heads, squeeze=False,
                             figsize=(size_px[0] / dpi, size_px[1] / dpi), dpi=dpi)
    for layer, row in enumerate(axes):
        for head, ax in enumerate(row):
            ax.imshow(np.ma.masked_array(trace.layers[layer].attn[head], mask), cmap="viridis",
                      vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_title(f"L{layer} H{head}", fontsize=8)
            ax.set_xticks(range(trace.n_tokens), labels, rotation=90, fontsize=5)
            ax.set_yticks(range(trace.n_tokens), labels, fontsize=5)
    fig.canvas.draw()
    plt.close(fig)


def matplotlib_grid_ms(traces: dict[str, Trace], size_px: tuple[int, int], repeats: int,
                       font_file: str | None = None) -> dict[str, float]:
    return {key: median_ms(lambda: matplotlib_grid(trace, size_px, font_file), repeats)
            for key, trace in traces.items()}


def resident_mb() -> float:
    """This process's resident memory now (Linux /proc; the peak from getrusage elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def format_report(result: dict) -> str:
    """The bench result as aligned lines, one per measured quantity."""
    lines = []
    for name, value in result.items():
        if isinstance(value, dict):
            shown = "  ".join(f"{key}: {number:8.1f}" for key, number in value.items())
            lines.append(f"{name:<22} {shown}")
        elif isinstance(value, (int, float)):
            lines.append(f"{name:<22} {value:8.1f}")
        else:
            lines.append(f"{name:<22} {value}")
    return "\n".join(lines)
