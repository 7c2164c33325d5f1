"""pyqtgraph set-up and the few drawing helpers several panels share.

Matrices are drawn row-major with y pointing down, so row i of an array is the i-th row
from the top of the picture (pyqtgraph's default is column-major with y up).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from gui import theme
from gui.fast_axis import FastAxis

# Before any ImageItem exists: row-major arrays; the theme's colours (white paper unless `--theme dark`
# was applied first: a panel imported later must not turn its plots back to white).
pg.setConfigOptions(imageAxisOrder="row-major", antialias=True, **theme.plot_colours())

SEQUENTIAL = "viridis"   # perceptual, for weights and probabilities
DIVERGING = "CET-D1"     # perceptual diverging, for signed values (activations, scores)
MASKED_RGBA = (215, 215, 215, 255)  # cells the causal mask removes: grey, not the colour of 0
MASKED_RGBA_DARK = (90, 90, 90, 255)   # the same on the dark theme: a grey that is not a light band
NAN_RGBA = (255, 0, 255, 255)       # NaN cells: magenta, a colour no sequential or diverging map uses


def colormap(name: str = SEQUENTIAL) -> pg.ColorMap:
    return pg.colormap.get(name)


def without_si_prefixes(plot: pg.PlotItem) -> None:
    """No SI-prefix check on any of the plot's axes, hidden ones included: each check lays the axis
    title out again at every range change. For axes whose numbers (or names) need no prefix."""
    for side in ("left", "right", "top", "bottom"):
        plot.getAxis(side).enableAutoSIPrefix(False)


def matrix_plot(plot: pg.PlotItem, x_label: str, y_label: str) -> None:
    """Set a PlotItem up for a matrix: y down, square-ish cells, no auto-range surprises."""
    without_si_prefixes(plot)
    plot.invertY(True)
    plot.setAspectLocked(False)
    plot.setMenuEnabled(True)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", turned_title(y_label))
    plot.showGrid(False, False)


def turned_title(title: str) -> str:
    """A left axis's title as it is drawn, turned a quarter counter-clockwise (read upwards): a "↓"
    written for "rows go down" would point right there, so it becomes a "←" at the title's start,
    which points down the rows, below the words."""
    if not title.endswith("↓"):
        return title
    return "← " + title[:-1].rstrip()


def masked_rgba(values: np.ndarray, levels: tuple[float, float], cmap: pg.ColorMap,
                mask: np.ndarray | None = None) -> np.ndarray:  # [R, C] -> [R, C, 4] uint8
    """Colour a matrix by hand so masked and NaN cells get their own colours (an ImageItem has no 'bad' colour).

    -inf/+inf take the ends of the scale; levels that are not finite (taken from a field full of
    NaN) fall back to the finite values' range, so a broken run is drawn, never an IndexError.
    """
    values = np.asarray(values, np.float64)
    lo, hi = finite_levels(levels, values)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.clip((np.nan_to_num(values, nan=lo, neginf=lo, posinf=hi) - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    scaled[np.isposinf(values)] = 1.0   # even when lo == hi
    # Each colour as one 32-bit word: gathering and masking words is several times faster than byte quadruples.
    lut = np.ascontiguousarray(cmap.getLookupTable(0.0, 1.0, 256, alpha=True), np.uint8).view(np.uint32)[:, 0]
    words = lut[(scaled * 255).astype(np.int32)]   # [R, C]
    words[np.isnan(values)] = _word(NAN_RGBA)
    if mask is not None:
        words[mask] = _word(masked_colour())
    return words[..., None].view(np.uint8)   # [R, C, 4], the bytes of each word in order


def masked_colour() -> tuple[int, int, int, int]:
    """The masked cells' grey in the figures' theme."""
    return MASKED_RGBA_DARK if theme.is_dark_theme() else MASKED_RGBA


def _word(rgba: tuple[int, int, int, int]) -> np.uint32:
    return np.array(rgba, np.uint8).view(np.uint32)[0]


def finite_levels(levels: tuple[float, float], values: np.ndarray | None = None) -> tuple[float, float]:
    """levels if both are finite and ordered; else the finite values' range; else (0, 1)."""
    lo, hi = (float(v) for v in levels)
    if np.isfinite(lo) and np.isfinite(hi) and lo <= hi:
        return lo, hi
    finite = np.asarray(values if values is not None else (), np.float64)
    finite = finite[np.isfinite(finite)]
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)


class ColourBar(pg.ColorBarItem):
    """pyqtgraph's colour bar, its axes drawn by FastAxis: its scale changes with every trace.

    Its value axis has no title, so pyqtgraph's SI prefix never applies to it; checking for one
    would still lay the (empty) title out again at every new range."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.axis.enableAutoSIPrefix(False)

    def setAxisItems(self, axisItems=None) -> None:  # noqa: N802, N803 (pyqtgraph's names)
        super().setAxisItems({side: FastAxis(side) for side in ("left", "right", "top", "bottom")} | (axisItems or {}))

    def set_title(self, title: str) -> None:
        """The bar's title (beside it), laid out again only when it changes."""
        axis = self.getAxis("bottom" if self.horizontal else "left")
        if axis.labelText != title:
            axis.setLabel(title)


def colour_bar(plot_item: pg.PlotItem, image: pg.ImageItem, levels: tuple[float, float],
               cmap: pg.ColorMap, label: str) -> pg.ColorBarItem:
    """A labelled colour bar beside a plot (not interactive: the panel owns the scale)."""
    bar = ColourBar(values=finite_levels(levels), colorMap=cmap, label=label, interactive=False, width=14)
    bar.setImageItem(image, insert_in=plot_item)
    return bar
