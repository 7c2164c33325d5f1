"""--theme dark: every exported figure is dark from edge to edge (paper, plot, caption, tables, colour keys)
and its text light; --theme light: every one is on white. A figure half in one theme (a dark plot on a
white page, a white caption band over a dark plot, light chips on dark paper) fails here."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage

from core.runners import NumpyRunner
from core.session import analyse
from gui import export
from gui.headless import ExportRequest, FigureHost
from tests.gui.test_export_vector import pixels

TEXT = "我们今天去公园散步，看到了很多花。The cat sat."   # whole characters and pieces of one
EDGE = 3              # pixels of each edge: the page's paper
DARK, LIGHT = 70, 200


def grey(png: bytes) -> np.ndarray:  # -> [H, W] 0..255
    return pixels(QImage.fromData(png, "PNG")).mean(axis=2)


def edges(image: np.ndarray) -> dict[str, np.ndarray]:
    return {"top": image[:EDGE], "bottom": image[-EDGE:], "left": image[:, :EDGE], "right": image[:, -EDGE:]}


def light_band(image: np.ndarray) -> float:
    """The share of the figure's rows that are mostly light: a white caption, a white table, light chips."""
    return float(((image > LIGHT).mean(axis=1) > 0.8).mean())


@pytest.fixture(scope="module")
def figures_by_theme(request):
    """theme -> {figure name: its PNG}, every figure the host draws for TEXT (readouts included)."""
    bundle, qapp = request.getfixturevalue("bundle"), request.getfixturevalue("qapp")
    drawn = {}
    for theme in ("light", "dark"):
        runner = NumpyRunner(bundle)
        host = FigureHost(theme=theme, runner=runner)   # a runner: the probe and occlusion figures too
        try:
            figures = host.figures(analyse(runner, TEXT), ExportRequest(formats=("png",)))
            drawn[theme] = {figure.name: export.figure_files(figure, ("png",))[f"{figure.name}.png"]
                            for figure in figures}
        finally:
            host.close()
    return drawn


def test_every_figure_is_drawn_in_both_themes(figures_by_theme):
    names = set(figures_by_theme["dark"])
    assert names == set(figures_by_theme["light"])
    for expected in ("tokens_chips", "attention_head", "interventions_switches", "attribution_bars",
                     "head_roles_table", "head_roles_evidence", "logit_lens_position", "occlusion_strip"):
        assert expected in names, f"{expected} was not drawn: the checks below would not see it"


def test_every_dark_figure_is_dark_with_light_text(figures_by_theme):
    for name, png in figures_by_theme["dark"].items():
        image = grey(png)
        for side, strip in edges(image).items():
            assert strip.mean() < DARK, f"{name}: its {side} edge is {strip.mean():.0f}, not the dark paper"
        assert light_band(image) < 0.1, f"{name}: {light_band(image):.0%} of its rows are a light band"
        assert (image > LIGHT).mean() > 0.001, f"{name}: no light ink (text) on the dark paper"


def test_every_light_figure_is_on_white(figures_by_theme):
    for name, png in figures_by_theme["light"].items():
        image = grey(png)
        for side, strip in edges(image).items():
            assert strip.mean() > LIGHT, f"{name}: its {side} edge is {strip.mean():.0f}, not white"
        assert (image < DARK).mean() > 0.001, f"{name}: no dark ink (text) on the white paper"
