"""Export: the headless CLI, atomic writes that leave nothing partial, and SVG from pyqtgraph itself."""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QSettings, QSize
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

import main
from core.raw_export import ExportError
from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.figure_pages import laid_out_size
from gui.fonts import register_fonts
from gui.headless import ExportRequest, FigureHost, figure_owner, figure_table
from gui.panels.registry import panel_classes
from gui.svg_export import restore_close_commands, split_close_commands, widget_svg_bytes

ROOT = Path(__file__).resolve().parents[2]
TEXT = "订单成交，订单取消。The cat sat."


def run_main(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                          env=env, timeout=600, cwd=ROOT)


def panel_figures(qtbot, bundle) -> list:
    """(panel object_name, figure) for every figure every registered panel offers for TEXT, built in-process."""
    register_fonts()
    trace = analyse(NumpyRunner(bundle), TEXT)
    figures = []
    for cls in panel_classes():
        panel = cls()
        qtbot.addWidget(panel)
        panel.set_trace(trace)
        figures += [(panel.object_name, figure) for figure in panel.figures()]
    return figures


@pytest.fixture(scope="module")
def exported(tmp_path_factory, bundle):
    out = tmp_path_factory.mktemp("export")
    result = run_main("export", "--text", TEXT, "--out", str(out), "--model", str(bundle.path),
                      "--format", "png,svg,csv,npz", "--width", "640", "--backend", "numpy")
    return out, result


def test_headless_export_writes_every_figure_with_its_stable_name(qtbot, bundle, exported):
    out, result = exported
    assert result.returncode == 0, result.stderr
    for panel, figure in panel_figures(qtbot, bundle):
        assert figure_owner(figure.name) == panel, f"{figure.name} is not in {panel}'s Panel.figure_names"
        png = QImage(str(out / f"{figure.name}.png"))
        assert not png.isNull() and png.width() == 640, figure.name
        assert ET.parse(out / f"{figure.name}.svg").getroot().tag.endswith("svg")
        if figure.table is not None:
            assert (out / f"{figure.name}.csv").read_text(encoding="utf-8").strip()
        for name in figure.extra_tables:
            assert (out / f"{name}.csv").is_file()
    printed = {Path(line).name for line in result.stdout.split()}
    assert printed == {p.name for p in out.iterdir()}


def test_every_figure_the_cli_accepts_is_exported_but_those_drawn_only_in_the_app(exported):
    """The panels declare no figure that none offers: Export all writes every declared name but those drawn only
    after a what-if, a patching sweep or a run on both backends, and never one of those."""
    out, _ = exported
    written = {p.stem for p in out.glob("*.png")}
    declared = {name: when for names in figure_table().values() for name, when in names.items()}
    listed = {name for name in declared if name.islower()}   # step_NN_KEY stands for the steps' names
    app_only = {name for name, when in declared.items() if when}
    assert app_only and listed - written == app_only
    steps = written - listed
    assert steps and all(figure_owner(name) == "step" for name in steps)


def test_every_panel_offers_for_a_sentence_the_figures_it_declares(bundle):
    """Panel.figure_names is the one list of a panel's figures: with a sentence loaded (and its occlusion run),
    each panel offers exactly the names it declares, those drawn only in the app aside."""
    register_fonts()
    runner = NumpyRunner(bundle)
    host = FigureHost(runner=runner)
    try:
        host.figures(analyse(runner, TEXT), ExportRequest(formats=("png",)))   # every panel built and drawn
        assert len(host.panels) == len(panel_classes())
        for panel in host.panels:
            offered = [figure.name for figure in panel.figures()]
            drawn = {panel.object_name: {name: when for name, when in panel.figure_names.items() if not when}}
            assert all(figure_owner(name, drawn) == panel.object_name for name in offered), (panel.object_name, offered)
            for name in drawn[panel.object_name]:   # each declared name offered (step_NN_KEY: at least one step)
                assert any(figure_owner(figure, {"one": {name: ""}}) for figure in offered), name
    finally:
        host.close()


def test_headless_trace_files_match_the_trace_command(bundle, exported, tmp_path):
    out, _ = exported
    direct = run_main("trace", "--text", TEXT, "--out", str(tmp_path), "--model", str(bundle.path),
                      "--backend", "numpy")
    assert direct.returncode == 0, direct.stderr
    assert (out / "tokens.csv").read_bytes() == (tmp_path / "tokens.csv").read_bytes()
    with np.load(out / "trace.npz") as a, np.load(tmp_path / "trace.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_headless_export_of_only_png_writes_no_numbers(bundle, tmp_path, capsys):
    """Figures with tables (attention_head has two): their PNGs alone, and neither trace.npz nor tokens.csv."""
    code = main.main(["export", "--text", "hello", "--out", str(tmp_path), "--model", str(bundle.path),
                      "--format", "png", "--figures", "attention_head,tokens_chips"])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attention_head.png", "tokens_chips.png"]


@pytest.mark.parametrize("args, message", [
    (["--text", ""], "empty"),
    (["--text", "hi", "--format", "png,gif"], "unknown format gif"),
    (["--text", "hi", "--width", "0"], "--width"),
    (["--text", "hi", "--model", "/no/such/bundle"], "not a folder"),
])
def test_headless_export_bad_input_is_one_line_and_non_zero(tmp_path, args, message):
    result = run_main("export", "--out", str(tmp_path / "out"), *args)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_headless_export_into_a_path_under_a_file_fails_cleanly(bundle, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = run_main("export", "--text", "hi", "--out", str(blocker / "out"), "--model", str(bundle.path))
    assert result.returncode != 0 and "cannot create the folder" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- atomic writes

def test_a_failing_write_leaves_no_partial_file(tmp_path, monkeypatch):
    """Simulate a disk that fails at the rename (chmod does not stop root, so break os.replace itself)."""
    written = []

    def failing_replace(src, dst):
        written.append(Path(src).read_bytes())
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ExportError) as error:
        export.write_files(tmp_path, {"figure.png": b"\x89PNG" + b"x" * 1000})
    assert written == [b"\x89PNG" + b"x" * 1000]   # the bytes really went to a temporary file first
    assert "cannot write" in str(error.value) and "figure.png" in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_export_all_into_an_unwritable_folder_shows_a_message_and_writes_nothing(qtbot, bundle, tmp_path):
    from gui.controller import Controller
    from gui.main_window import MainWindow

    register_fonts()
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    window = MainWindow(Controller(bundle, "numpy"), settings)
    qtbot.addWidget(window)
    window.show()
    window.sentence_bar.setText("hello world")
    qtbot.waitUntil(lambda: window.controller.trace is not None, timeout=20000)
    target = tmp_path / "target"
    target.mkdir()
    blocker = target / "a_file"
    blocker.write_text("x")
    window.export_all_to(blocker / "figures")   # a folder under a file: fails even for root
    qtbot.waitUntil(lambda: window.last_error != "", timeout=20000)
    assert window.last_error.startswith("export failed: cannot create the folder")
    assert list(target.iterdir()) == [blocker] and blocker.read_text() == "x"
    window.close()
    assert not window.controller.is_running()


def test_png_width_defaults_to_twice_the_screen_and_keeps_the_aspect(qtbot):
    label = QLabel("订单 width")
    qtbot.addWidget(label)
    label.resize(120, 30)
    label.show()
    image = QImage.fromData(export.png_bytes(label), "PNG")
    assert (image.width(), image.height()) == (240, 60)
    image = QImage.fromData(export.png_bytes(label, 600), "PNG")
    assert (image.width(), image.height()) == (600, 150)


def test_widget_svg_draws_chinese_as_outlines(qtbot):
    register_fonts()
    label = QLabel("订单成交")
    qtbot.addWidget(label)
    label.resize(200, 40)
    label.show()
    root = ET.fromstring(widget_svg_bytes(label))
    tags = [e.tag.split("}")[-1] for e in root.iter()]
    assert "text" not in tags   # no font needed to view it
    glyph_paths = [e for e in root.iter() if e.tag.endswith("path") and len(e.get("d", "")) > 100]
    assert glyph_paths


# ---------------------------------------------------------------- pyqtgraph's own SVG exporter (#3495)

def test_close_commands_are_set_aside_and_put_back():
    d = "M0,0 L4,0 L4,3 L0,3 L0,0 Z M1,1 L2,1 L2,2Z"
    kept, closes = split_close_commands(d)
    assert "Z" not in kept and all("," in item for item in kept.split())
    assert restore_close_commands(kept, closes) == "M0,0 L4,0 L4,3 L0,3 L0,0 Z M1,1 L2,1 L2,2 Z"


def test_pyqtgraph_svg_exporter_handles_filled_items(qtbot):
    import pyqtgraph.exporters

    plot = pg.PlotWidget()
    qtbot.addWidget(plot)
    plot.plot([1, 3, 2, 4], fillLevel=0, brush=(0, 0, 255, 100))
    plot.addItem(pg.BarGraphItem(x=[1, 2, 3], height=[1, 2, 3], width=0.5, brush="r"))
    plot.resize(400, 300)
    plot.show()
    qtbot.waitExposed(plot)
    exporter = pyqtgraph.exporters.SVGExporter(plot.plotItem)
    svg = exporter.export(toBytes=True)
    root = ET.fromstring(svg)
    closed = [e.get("d") for e in root.iter() if e.tag.endswith("path") and e.get("d", "").rstrip().endswith("Z")]
    assert closed, "a filled curve and bars should export closed paths"


# ---------------------------------------------------------------- clipboard and the dialog's preview

@pytest.fixture
def attention_figures(qtbot, bundle):
    """The attention panel (kept alive for the test) and its figures for TEXT."""
    from gui.panels.attention_panel import AttentionPanel

    register_fonts()
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    panel.set_trace(analyse(NumpyRunner(bundle), TEXT))
    return panel, panel.figures()


def test_copy_figure_puts_png_and_svg_on_the_clipboard(attention_figures):
    from PySide6.QtGui import QGuiApplication

    figure = next(f for f in attention_figures[1] if f.name == "attention_head")
    figure.widget.resize(400, 300)
    export.copy_figure_to_clipboard(figure)
    mime = QGuiApplication.clipboard().mimeData()
    png = QImage.fromData(bytes(mime.data("image/png")), "PNG")
    page = laid_out_size(figure)   # laid out for the page, not at the 400 × 300 it has on screen
    assert (png.width(), png.height()) == (2 * page.width(), 2 * page.height())
    assert figure.widget.size() == QSize(400, 300)
    assert ET.fromstring(bytes(mime.data("image/svg+xml"))).tag.endswith("svg")
    assert mime.hasImage()


def mean_colour(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    return rows[:, : image.width() * 3].reshape(-1, 3).mean(axis=0)


def test_export_dialog_previews_the_file_as_written(qtbot, attention_figures, tmp_path):
    from gui.export_dialog import ExportFigureDialog

    figures = [(f.name, f) for f in attention_figures[1]]
    index = next(i for i, (name, _) in enumerate(figures) if name == "attention_head")
    figure = figures[index][1]
    figure.widget.resize(500, 400)
    page = laid_out_size(figure)
    dialog = ExportFigureDialog(figures, index, str(tmp_path))
    qtbot.addWidget(dialog)
    preview = dialog.preview_image()
    assert abs(preview.width() / preview.height() - page.width() / page.height()) < 0.02
    written_png = export.figure_files(figure, ["png"], dialog.width_box.value())["attention_head.png"]
    written = QImage.fromData(written_png, "PNG")
    assert np.abs(mean_colour(preview) - mean_colour(written)).max() < 4
    dialog.width_box.setValue(300)
    expected = f"300 × {round(page.height() * 300 / page.width())} pixels"
    qtbot.waitUntil(lambda: dialog.preview_note.text() == expected, timeout=5000)
    dialog.format_box.setCurrentIndex(dialog.format_box.findData("pdf"))
    assert "vector PDF" in dialog.preview_note.text() and not dialog.preview_image().isNull()
    dialog.format_box.setCurrentIndex(dialog.format_box.findData("csv"))
    assert dialog.preview.text().splitlines()[0][:80] == figure.table().splitlines()[0][:80]
    assert dialog.choice().path == tmp_path / "attention_head.csv"


def test_export_dialog_words_a_too_large_png_in_its_own_terms(qtbot, attention_figures, tmp_path):
    from gui.export_dialog import ExportFigureDialog

    figures = [(f.name, f) for f in attention_figures[1]]
    index = next(i for i, (name, _) in enumerate(figures) if name == "attention_head")
    dialog = ExportFigureDialog(figures, index, str(tmp_path))
    qtbot.addWidget(dialog)
    dialog.width_box.setValue(export.PNG_WIDTH_RANGE[1])   # a square-ish page: 20000 × ~19000 pixels
    dialog.update_preview()
    assert "smaller PNG width" in dialog.preview.text() and "--" not in dialog.preview.text()
