"""Every registered panel keeps the Panel contract: draws real Traces, follows the selection,
shows an empty state, and exports each of its figures as PNG, SVG and CSV."""
from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtGui import QImage

from core.runners import OnnxRunner
from core.session import analyse
from gui import export
from gui.figure_pages import laid_out_size
from gui.panels.base import Panel
from gui.panels.registry import panel_classes
from gui.selection import Selection
from tests.gui.figure_samples import same_length_variant

SENTENCES = {"english": "The cat sat on the mat because it was tired.",
             "chinese": "订单成交，订单取消，查询订单。"}
PANELS = panel_classes()


@pytest.fixture(scope="module")
def traces(analysed):
    return {name: analysed(text) for name, text in SENTENCES.items()}


@pytest.fixture(scope="module")
def onnx_traces(bundle):
    """The other backend's run, for panels that compare the two (as the controller gives them with "both")."""
    runner = OnnxRunner(bundle)
    return {name: analyse(runner, text) for name, text in SENTENCES.items()}


def image_pixels(png: bytes) -> tuple[QImage, np.ndarray]:
    image = QImage.fromData(png, "PNG")
    assert not image.isNull(), "the PNG does not decode"
    rgb = image.convertToFormat(QImage.Format.Format_RGB32)
    pixels = np.frombuffer(rgb.constBits(), np.uint32, count=rgb.width() * rgb.height()).copy()
    return image, pixels


def test_tokens_panel_is_registered_first():
    assert PANELS and PANELS[0].object_name == "tokens"


def test_every_panel_has_a_unique_stable_object_name():
    names = [cls.object_name for cls in PANELS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", name) and name != "panel" for name in names)
    assert all(cls.title and cls.title != "Panel" for cls in PANELS)


@pytest.mark.parametrize("language", SENTENCES)
@pytest.mark.parametrize("panel_class", PANELS, ids=lambda cls: cls.object_name)
def test_panel_draws_selects_empties_and_exports(qtbot, show, panel_class, language, traces, onnx_traces, bundle):
    panel: Panel = show(panel_class())
    runner = OnnxRunner(bundle)   # a sweep the panel starts by itself (occlusion) runs here, as the worker would
    panel.sigRunExperiment.connect(lambda job: job.on_done(job.fn(runner)))
    trace = traces[language]
    if hasattr(panel, "set_reference_trace"):
        panel.set_reference_trace(onnx_traces[language])

    panel.set_trace(trace)
    assert panel.trace is trace
    selection = Selection(layer=trace.num_layers - 1, head=trace.num_heads - 1, query=1, key=0)
    panel.set_selection(selection)
    assert panel.selection == selection
    qtbot.wait(10)

    if panel.object_name == "patching":   # its figures are a sweep's, run for sentence B
        corrupt = "订单取消，订单成交，查询订单。" if language == "chinese" else \
            same_length_variant(bundle.tokenizer, SENTENCES[language])
        panel.corrupt_edit.setText(corrupt)
        panel.answer_edit.setText("#5")
        panel.wrong_edit.setText("#6")
        panel.run_button.click()
    figures = panel.figures()
    assert figures, f"{panel_class.__name__} offers no figure for a real trace"
    names = [f.name for f in figures] + [n for f in figures for n in f.extra_tables]
    assert len(set(names)) == len(names), f"duplicate figure file names: {names}"
    for figure in figures:
        assert re.fullmatch(r"[a-z0-9_]+", figure.name) and figure.name.startswith(panel.object_name + "_")
        check_png(figure)
        check_svg(figure)
        check_tables(figure)

    panel.set_trace(None)   # the empty state, not an error
    assert panel.trace is None
    panel.grab()


def check_png(figure) -> None:
    page = laid_out_size(figure)            # exports lay the figure out for the page (gui.figure_pages)
    width = 2 * page.width() + 1            # an odd width: the aspect is kept, not the pixel size
    image, pixels = image_pixels(export.figure_files(figure, ["png"], width)[f"{figure.name}.png"])
    assert image.width() == width
    expected_height = page.height() * width / page.width()
    assert abs(image.height() - expected_height) <= 1
    assert len(np.unique(pixels)) > 1, f"{figure.name}.png is a single colour"
    default, _ = image_pixels(export.figure_files(figure, ["png"])[f"{figure.name}.png"])
    assert default.width() == round(export.default_png_scale(page.width(), page.height()) * page.width())


def check_svg(figure) -> None:
    files = export.figure_files(figure, ["svg"])
    root = ET.fromstring(files[f"{figure.name}.svg"])
    assert root.tag.endswith("svg")
    drawn = [e for e in root.iter() if e.tag.split("}")[-1] in ("path", "rect", "image", "polyline", "ellipse")]
    assert drawn, f"{figure.name}.svg draws nothing"


def check_tables(figure) -> None:
    files = export.figure_files(figure, ["csv"])
    expected = ([f"{figure.name}.csv"] if figure.table is not None else []) + \
        [f"{name}.csv" for name in figure.extra_tables]
    assert sorted(files) == sorted(expected)
    for name, data in files.items():
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
        assert rows and any(cell.strip() for cell in rows[0]), f"{name} has no header"


def test_the_panel_last_clicked_is_the_one_ctrl_e_offers(qtbot, make_window):
    """Clicking a heatmap cell selects through sigSelect: that panel, not the one focused before, is current."""
    window = make_window()
    window.controller.set_text("The cat sat on the mat.")
    window.controller.flush()
    qtbot.waitUntil(lambda: window.controller.trace is not None, timeout=20000)
    window.panel("tokens").chips.setFocus()
    window.panel("attention").sigSelect.emit({"query": 2, "key": 1})
    assert window.current_panel().object_name == "attention"
