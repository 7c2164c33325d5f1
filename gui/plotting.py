"""pyqtgraph set-up and the few drawing helpers several panels share.

Matrices are drawn row-major with y pointing down, so row i of an array is the i-th row
from the top of the picture (pyqtgraph's default is column-major with y up).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg

# Before any ImageItem exists: row-major arrays; light figures that print well in slides.
pg.setConfigOptions(imageAxisOrder="row-major", background="w", foreground="k", antialias=True)

SEQUENTIAL = "viridis"   # perceptual, for weights and probabilities
DIVERGING = "CET-D1"     # perceptual diverging, for signed values (activations, scores)
MASKED_RGBA = (215, 215, 215, 255)  # cells the causal mask removes: grey, not the colour of 0


def colormap(name: str = SEQUENTIAL) -> pg.ColorMap:
    return pg.colormap.get(name)


def matrix_plot(plot: pg.PlotItem, x_label: str, y_label: str) -> None:
    """Set a PlotItem up for a matrix: y down, square-ish cells, no auto-range surprises."""
    plot.invertY(True)
    plot.setAspectLocked(False)
    plot.setMenuEnabled(True)
    plot.setLabel("bottom", x_label)
    plot.setLabel("left", y_label)
    plot.showGrid(False, False)


def masked_rgba(values: np.ndarray, levels: tuple[float, float], cmap: pg.ColorMap,
                mask: np.ndarray | None = None) -> np.ndarray:  # [R, C] -> [R, C, 4] uint8
    """Colour a matrix by hand so masked cells get their own colour (an ImageItem has no 'bad' colour)."""
    lo, hi = levels
    scaled = np.clip((np.nan_to_num(values, neginf=lo, posinf=hi) - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    lut = cmap.getLookupTable(0.0, 1.0, 256, alpha=True)
    rgba = lut[(scaled * 255).astype(np.int32)]
    if mask is not None:
        rgba[mask] = MASKED_RGBA
    return np.ascontiguousarray(rgba.astype(np.uint8))


def colour_bar(plot_item: pg.PlotItem, image: pg.ImageItem, levels: tuple[float, float],
               cmap: pg.ColorMap, label: str) -> pg.ColorBarItem:
    """A labelled colour bar beside a plot (not interactive: the panel owns the scale)."""
    bar = pg.ColorBarItem(values=levels, colorMap=cmap, label=label, interactive=False, width=14)
    bar.setImageItem(image, insert_in=plot_item)
    return bar
