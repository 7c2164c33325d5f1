"""The RoPE angles figure draws each pair's wrapped angle exactly (straight pieces between its wraps), so
its SVG stays small however many positions it spans, and still goes through m·θᵢ at every position."""
from __future__ import annotations

import numpy as np

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.headless import ExportRequest
from gui.rope_angle_plot import RopeAnglePlot

WORD = "cat "


def angles_figure(host, trace):
    return next(f for f in host.figures(trace, ExportRequest(figures=("positions_rope_angles",))))


def sentence_of(runner, tokens: int) -> str:
    """A sentence of about `tokens` tokens (its words repeated)."""
    words = 1
    while len(runner.bundle.tokenizer.encode(WORD * (words + 1))) <= tokens:
        words += 1
    return WORD * words


def test_the_drawn_curves_go_through_each_pairs_angle_at_every_integer_position(host, bundle):
    trace = analyse(NumpyRunner(bundle), sentence_of(NumpyRunner(bundle), 30))
    angles_figure(host, trace)
    (page,) = [p for p in host.panel("positions").pages if isinstance(p, RopeAnglePlot)]
    view = page.view
    for i, curve in enumerate(page.curves):
        x, y = curve.getData()
        connect = curve.opts["connect"]
        for m in range(int(x[-1]) + 1):
            pieces = [k for k in range(len(x) - 1) if connect[k] and x[k] <= m <= x[k + 1]]
            assert pieces, f"pair {i}: no line at position {m}"
            for k in pieces:
                t = 0.0 if x[k + 1] == x[k] else (m - x[k]) / (x[k + 1] - x[k])
                drawn = y[k] + t * (y[k + 1] - y[k])
                gap = abs(np.angle(np.exp(1j * (drawn - view.wrapped[m, i]))))
                assert gap < 1e-6, f"pair {i} at m = {m}: drawn {drawn}, m·θ wrapped {view.wrapped[m, i]}"


def test_the_svg_grows_with_the_positions_it_shows_by_its_corners_not_by_samples(host, bundle):
    runner = NumpyRunner(bundle)
    sizes = {}
    for tokens in (8, bundle.config.max_position_embeddings - 8):
        trace = analyse(runner, sentence_of(runner, tokens))
        files = export.figure_files(angles_figure(host, trace), ["svg"])
        sizes[trace.n_tokens] = len(files["positions_rope_angles.svg"])
    (short, small), (long, large) = sorted(sizes.items())
    # Each pair adds two corners a turn: the fastest turns once in 2π positions, so the whole figure gains
    # a few kB per position (dense sampling gained ~36 kB per position at 12 samples a position).
    per_position = (large - small) / (long - short)
    assert per_position < 4_000, f"{per_position:.0f} bytes per position ({sizes})"
    assert large < 600_000, f"{large} bytes at {long} tokens"
