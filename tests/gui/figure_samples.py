"""Figures drawn for tests of their pages and their vector files: a FigureHost's figures for a sentence, and
the patching panel's after a sweep it ran itself (the CLI has no sentence B, so it never runs one)."""
from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from gui import export

PATCHING = ("patching_resid", "patching_heads", "patching_heads_pos", "patching_experts")


def run_sweeps_now(host, runner, trace, corrupt: str):
    """The patching panel of `host` with its sweeps of trace (A) against `corrupt` (B) run on this thread,
    as the controller's worker would run them; returns the panel."""
    panel = host.panel("patching")
    panel.set_trace(trace)   # sentence A (its figures wait for the sweep)
    done = []
    panel.sigRunExperiment.connect(lambda job: done.append(job.on_done(job.fn(runner))))
    try:
        panel.corrupt_edit.setText(corrupt)
        panel.answer_edit.setText("#5")   # fixed tokens: a random model's own top tokens may be the same
        panel.wrong_edit.setText("#6")
        panel.run_button.click()
    finally:
        panel.sigRunExperiment.disconnect()
    assert done and panel.result is not None, panel.summary.text()
    return panel


def same_length_variant(tokenizer, text: str) -> str:
    """`text` with one word changed so that it still has as many tokens (patching pairs them by position)."""
    count = len(tokenizer.encode(text))
    words = text.split(" ")
    for i in range(len(words) - 1, -1, -1):
        for other in ("cat", "dog", "mat", "sat", "the", "a", "on", "it"):
            variant = " ".join([*words[:i], other, *words[i + 1:]])
            if variant != text and len(tokenizer.encode(variant)) == count:
                return variant
    raise AssertionError(f"no same-length variant of {text!r}")


def _request(names):
    from gui.headless import ExportRequest

    return ExportRequest(formats=("png",), figures=tuple(names))


def pixels(image: QImage) -> np.ndarray:  # -> [H, W, 3] int
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 3].reshape(image.height(), image.width(), 3).astype(np.int32)


def png_image(figure, width: int | None = None) -> QImage:
    return QImage.fromData(export.figure_files(figure, ["png"], width=width)[f"{figure.name}.png"], "PNG")


def blank_border(image: QImage, tolerance: int = 24) -> tuple[int, int, int, int]:
    """(left, top, right, bottom): how many pixel columns / rows at each edge are all the corner's colour."""
    rgb = pixels(image)
    ink = np.abs(rgb - rgb[0, 0]).sum(axis=-1) > tolerance
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return image.width(), image.height(), image.width(), image.height()
    return int(cols[0]), int(rows[0]), int(image.width() - 1 - cols[-1]), int(image.height() - 1 - rows[-1])
