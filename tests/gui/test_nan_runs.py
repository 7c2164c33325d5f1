"""Issue 9 item 4: NaN and infinite values in a run are drawn and exported, never a crash.

The bundle here has finite weights (so the gate accepts it) but layer 0's norm scales its input
past float32's range, so every field after it is NaN in both runners: the harshest case of what
NaN weights or rope_theta NaN did before the gate refused them (IndexError in masked_rgba, then
SIGSEGV while painting the attention lines into an SVG).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dataclasses import replace

import numpy as np
import pytest

from core.bundle import load_bundle
from core.runners import NumpyRunner, OnnxRunner
from gui.plotting import MASKED_RGBA, NAN_RGBA, colormap, masked_rgba
from tests import hostile_bundles as hostile

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def nan_bundle_dir(bundle, tmp_path_factory) -> Path:
    return hostile.make_nan_producing(hostile.copy_bundle(bundle.path, tmp_path_factory.mktemp("nan") / "b"))


def test_masked_rgba_marks_nan_cells_even_when_the_levels_are_nan():
    values = np.array([[np.nan, 0.5], [np.inf, -np.inf]], np.float32)
    mask = np.array([[False, False], [False, True]])
    rgba = masked_rgba(values, (0.0, float(np.nanmax(values[0]) * np.nan)), colormap(), mask)
    assert rgba.shape == (2, 2, 4) and rgba.dtype == np.uint8
    assert tuple(rgba[0, 0]) == NAN_RGBA
    assert tuple(rgba[1, 1]) == MASKED_RGBA
    assert tuple(rgba[1, 0]) == tuple(colormap().getLookupTable(0.0, 1.0, 256, alpha=True)[255])


def test_masked_rgba_of_an_all_nan_field():
    rgba = masked_rgba(np.full((3, 3), np.nan), (np.nan, np.nan), colormap())
    assert (rgba == np.array(NAN_RGBA, np.uint8)).all()


def test_the_nan_bundle_passes_the_gate_and_both_runners_give_nan(nan_bundle_dir):
    bundle = load_bundle(nan_bundle_dir)
    for runner in (NumpyRunner(bundle), OnnxRunner(bundle)):
        trace = runner.run([1, 2, 3, 4])
        assert np.isnan(trace.logits).all() and np.isnan(trace.layers[0].attn[:, 1:, 0]).all()


@pytest.mark.parametrize("backend", ["numpy", "onnx"])
def test_headless_export_of_a_nan_run_writes_every_file_with_nan_in_the_csv(nan_bundle_dir, tmp_path, backend):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "main.py", "export", "--text", "hello world, 你好", "--out", str(out),
                             "--model", str(nan_bundle_dir), "--backend", backend],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    written = [Path(line) for line in result.stdout.split("\n") if line]
    assert written and all(path.stat().st_size > 0 for path in written)
    assert {".png", ".svg", ".csv", ".npz"} <= {path.suffix for path in written}
    head = (out / "attention_head.csv").read_text(encoding="utf-8")
    assert "nan" in head.split("\n")[2]   # row 1 (after the header): query 1 on key 0


def test_a_trace_names_its_nonfinite_fields_but_not_the_causal_mask(bundle):
    trace = NumpyRunner(bundle).run([1, 2, 3])
    assert trace.nonfinite_fields() == []  # scores' -inf above the diagonal is the mask, not a problem
    broken = np.array(trace.layers[1].attn)
    broken[0, 2, 1] = np.nan
    layers = list(trace.layers)
    layers[1] = replace(layers[1], attn=broken)
    assert replace(trace, layers=tuple(layers)).nonfinite_fields() == ["layers.1.attn"]


def test_the_window_names_the_nan_fields_of_a_run(qtbot, nan_bundle_dir):
    from gui.controller import Controller

    controller = Controller(load_bundle(nan_bundle_dir), "numpy")
    notices: list[str] = []
    controller.sigNotice.connect(notices.append)
    try:
        controller.set_text("hello world")
        qtbot.waitUntil(lambda: controller.trace is not None, timeout=20000)
        assert any("NaN or infinite values in" in n and "layers.0" in n for n in notices), notices
    finally:
        controller.shutdown()
