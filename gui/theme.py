"""The figures' theme: light (white paper, black ink) or dark (`--theme dark`), one setting for every figure.

A figure is painted by pyqtgraph (plots), by Qt widgets (captions, tables, labels) and by the app's own
paint code (chips, colour keys). Each reads its paper and ink here, so a figure is wholly light or
wholly dark: never a dark plot on a white page, nor a white caption over a dark plot.

The theme is chosen once, before panels are built (`apply_theme`); the desktop's own palette does not
decide it, so a figure prints the same on every machine.
"""
from __future__ import annotations

from typing import Callable

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QWidget

THEMES = ("light", "dark")
PAPER = {"light": "#ffffff", "dark": "#1e1e1e"}
INK = {"light": "#000000", "dark": "#e6e6e6"}
RAISED = {"light": "#f0f0f0", "dark": "#2a2a2a"}    # a table's header, an alternate row: a step off the paper
DISABLED_INK = {"light": "#8a8a8a", "dark": "#6e6e6e"}

_current = {"theme": "light"}


def current_theme() -> str:
    return _current["theme"]


def is_dark_theme() -> bool:
    """Are the figures dark (`--theme dark`)?"""
    return _current["theme"] == "dark"


def page_background() -> QColor:
    """The figures' paper: white, or the dark theme's."""
    return QColor(PAPER[_current["theme"]])


def page_ink() -> QColor:
    """The figures' text colour on their paper."""
    return QColor(INK[_current["theme"]])


def ink(light: str, dark: str) -> QColor:
    """A colour chosen for the theme: `light` on white paper, `dark` on the dark theme's."""
    return QColor(dark if is_dark_theme() else light)


def plot_colours() -> dict[str, str]:
    """pyqtgraph's background and foreground for the theme."""
    return {"background": PAPER[_current["theme"]], "foreground": INK[_current["theme"]]}


def page_style() -> str:
    """A style sheet giving a widget (and what it holds) the figures' paper and ink."""
    return f"background: {PAPER[_current['theme']]}; color: {INK[_current['theme']]};"


def paint_as_page(widget: QWidget) -> QWidget:
    """The widget and its children (labels, tables and their headers) on the figures' paper, in their ink."""
    widget.setAutoFillBackground(True)
    palette = widget.palette()
    paper, raised, text = page_background(), QColor(RAISED[_current["theme"]]), page_ink()
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base):
        palette.setColor(role, paper)
    for role in (QPalette.ColorRole.Button, QPalette.ColorRole.AlternateBase):
        palette.setColor(role, raised)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(role, text)
    widget.setPalette(palette)
    return widget


def tint(colour: QColor, strength: float) -> QColor:
    """`colour` mixed into the paper: 0 is the paper itself, 1 the colour (a score ramp, a highlight)."""
    paper = page_background()
    t = min(1.0, max(0.0, strength))
    return QColor(*(round(a + (b - a) * t) for a, b in zip(paper.getRgb()[:3], colour.getRgb()[:3])))


def readable_on(fill: QColor) -> QColor:
    """Near-black text on a light fill, near-white on a dark one (relative luminance, sRGB weights)."""
    luminance = 0.2126 * fill.redF() + 0.7152 * fill.greenF() + 0.0722 * fill.blueF()
    return QColor(20, 20, 20) if luminance > 0.45 else QColor(250, 250, 250)


def _app_palette(theme: str) -> QPalette:
    """The dark theme's palette for the app's chrome (a disabled control greyed, as on a light desktop)."""
    palette = QPalette()
    paper, text, raised = QColor(PAPER[theme]), QColor(INK[theme]), QColor(RAISED[theme])
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base, QPalette.ColorRole.Button):
        palette.setColor(role, paper)
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText):
        palette.setColor(role, text)
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(DISABLED_INK[theme]))
    palette.setColor(QPalette.ColorRole.AlternateBase, raised)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Button, QColor("#262626"))
    return palette


def apply_theme(app, theme: str) -> Callable[[], None]:
    """The figures' theme (pyqtgraph's colours, the paper and ink above) and, for dark, the widgets'
    palette; before panels are built. Returns a function that puts the process-wide settings back."""
    if theme not in THEMES:
        raise ValueError(f"unknown theme {theme}: choose from {', '.join(THEMES)}")
    before = {name: pg.getConfigOption(name) for name in ("background", "foreground")}
    theme_before, palette_before = _current["theme"], app.palette()

    def undo() -> None:
        _current["theme"] = theme_before
        pg.setConfigOptions(**before)
        app.setPalette(palette_before)

    _current["theme"] = theme
    pg.setConfigOptions(**plot_colours())
    if theme == "dark":
        app.setPalette(_app_palette(theme))
    return undo


_deep: dict[int, QColor] = {}


def on_paper(fill: QColor) -> QColor:
    """A fill that marks a kind (a chip's pastel, a highlight) as the theme shows it: itself on white;
    on the dark theme the same hue with its lightness turned over, so a pale fill becomes a deep one
    under light text and a vivid highlight stays vivid. Data colours (a colour map's) are not for this."""
    if not is_dark_theme():
        return fill
    key = fill.rgb()
    if key not in _deep:
        hue, saturation, lightness, alpha = fill.getHslF()
        _deep[key] = QColor.fromHslF(max(hue, 0.0), saturation, min(1.0, max(0.0, 1.15 - lightness)), alpha)
    return _deep[key]
