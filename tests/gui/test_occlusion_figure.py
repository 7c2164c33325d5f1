"""`main.py export --figures occlusion_strip`: the sweep runs headless, and the strips are laid out for the page."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect

from core.occlusion import occlude
from core.runners import OnnxRunner
from core.session import analyse
from gui.figure_pages import PAGE_WIDTH, on_page
from gui.headless import ExportRequest, FigureHost
from gui.panels.occlusion_panel import OcclusionPanel
from gui.panels.tokens_panel import TokensPanel

LONG = "The cat sat on the mat because the cat was tired, and then the dog came in and sat on the cat."


@pytest.fixture(scope="module")
def runner(bundle):
    return OnnxRunner(bundle)   # a sweep of many short runs: the faster runner


@pytest.fixture(scope="module")
def trace(runner):
    return analyse(runner, LONG)


@pytest.fixture(scope="module")
def host(qapp, runner):
    host = FigureHost(runner=runner, classes=[OcclusionPanel, TokensPanel])
    yield host
    host.close()


def occlusion_panel(host) -> OcclusionPanel:
    return next(panel for panel in host.panels if isinstance(panel, OcclusionPanel))


def chips_on_page(strip, page) -> QRect:
    """The rectangle around every chip of a strip, in the page's pixels."""
    around = QRect()
    for index in range(strip.chip_count()):
        around = around.united(strip.chip_rect(index).toAlignedRect())
    return around.translated(strip.mapTo(page, QPoint()))


def test_asking_for_the_strip_runs_the_sweep_and_lays_each_strip_out_above_its_colour_bar(host, runner, trace):
    [figure] = host.figures(trace, ExportRequest(formats=("png", "csv"), figures=("occlusion_strip",)))
    panel = occlusion_panel(host)
    docked = figure.widget.size()
    with on_page(figure) as page:
        assert docked.width() + 100 < page.width() <= PAGE_WIDTH   # the splitter it sits in does not take it back
        rows_right = 0
        for strip, bar in ((panel.delta_strip, panel.delta_bar), (panel.rollout_strip, panel.rollout_bar)):
            chips = chips_on_page(strip, page)
            assert chips.height() > 2 * strip.chip_rect(0).height()   # the sentence wraps onto a third row
            assert chips.right() < strip.mapTo(page, QPoint(strip.width(), 0)).x()   # wrapped at the page's width
            assert strip.geometry().contains(chips)   # the strip is as tall as its rows at this width
            assert not chips.intersects(bar.geometry()), (chips, bar.geometry())
            rows_right = max(rows_right, chips.right())
        assert page.width() - rows_right < 20   # the longest row fills the page: no white band at its right
    assert figure.widget.size() == docked


def test_the_strips_numbers_are_core_occlusions_one_row_per_token(host, runner, trace):
    [figure] = host.figures(trace, ExportRequest(formats=("csv",), figures=("occlusion_strip",)))
    rows = list(csv.DictReader(io.StringIO(figure.table())))
    expected = occlude(runner, trace.input_ids)
    assert [row["token"] for row in rows] == trace.labels()
    np.testing.assert_array_equal([float(row["delta_logprob"]) for row in rows], expected.delta_logprob)
    np.testing.assert_array_equal([float(row["rollout"]) for row in rows], expected.rollout)


def test_a_short_sentence_makes_a_narrower_page_not_a_wide_white_one(host, runner):
    [figure] = host.figures(analyse(runner, "The dog sat."), ExportRequest(figures=("occlusion_strip",)))
    strip = occlusion_panel(host).delta_strip
    with on_page(figure) as page:
        assert page.width() < PAGE_WIDTH
        assert strip.chip_rect(strip.chip_count() - 1).top() == strip.chip_rect(0).top()   # still one row


def test_a_batch_of_other_figures_leaves_the_sweep_unrun_until_the_strip_is_asked_for(host, runner):
    trace = analyse(runner, "A bird flew over it.")
    panel = occlusion_panel(host)
    host.figures(trace, ExportRequest(formats=("png",), figures=("tokens_chips",)))
    assert panel.result is None or not np.array_equal(panel.result.input_ids, trace.input_ids)
    [figure] = host.figures(trace, ExportRequest(formats=("png",), figures=("occlusion_strip",)))
    assert np.array_equal(panel.result.input_ids, trace.input_ids)
