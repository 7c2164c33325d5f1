"""gui.theme: one setting for every figure's paper and ink, which a panel imported later cannot undo."""
from __future__ import annotations

import importlib

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QLabel

import gui.plotting   # its settings first, as every panel has them before a theme is applied
from gui import theme


@pytest.fixture
def dark(qapp):
    undo = theme.apply_theme(qapp, "dark")
    yield
    undo()


def lightness(colour) -> int:
    return pg.mkColor(colour).lightness()


def test_a_panel_imported_after_the_theme_keeps_the_dark_plots(dark):
    importlib.reload(gui.plotting)   # what a lazily built panel's first import of gui.plotting does
    assert lightness(pg.getConfigOption("background")) < 60
    assert lightness(pg.getConfigOption("foreground")) > 200


def test_undo_puts_the_light_theme_back(qapp):
    undo = theme.apply_theme(qapp, "dark")
    undo()
    assert not theme.is_dark_theme()
    assert theme.page_background() == QColor("white")
    assert lightness(pg.getConfigOption("background")) > 200


def test_a_page_and_its_children_take_the_paper_and_ink(dark):
    frame = QLabel("caption")
    theme.paint_as_page(frame)
    palette = frame.palette()
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base, QPalette.ColorRole.Button):
        assert palette.color(role).lightness() < 60, role
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        assert palette.color(role).lightness() > 200, role


def test_a_disabled_button_looks_disabled_on_the_dark_theme(dark, qapp):
    palette = qapp.palette()
    enabled = palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.ButtonText).lightness()
    disabled = palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText).lightness()
    assert enabled - disabled > 80   # the idle Cancel button read as enabled: its text was as light


def test_kind_fills_turn_deep_on_dark_and_stay_themselves_on_light(qapp):
    pastel = QColor(222, 233, 247)
    assert theme.on_paper(pastel) == pastel
    undo = theme.apply_theme(qapp, "dark")
    try:
        deep = theme.on_paper(pastel)
        assert deep.lightness() < 90
        assert abs(deep.hslHue() - pastel.hslHue()) <= 2   # the same kind, the same hue
        assert theme.readable_on(deep).lightness() > 200
    finally:
        undo()


def test_an_unknown_theme_is_refused(qapp):
    with pytest.raises(ValueError, match="choose from light, dark"):
        theme.apply_theme(qapp, "blue")
