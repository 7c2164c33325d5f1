"""Every head of every layer as a small heatmap: layers down, heads across, one click picks a head.

One ViewBox holds one PickableImage per head and no axes (a layer × head grid of plots with axes
costs ~20 axis repaints per update). The items are made once per model shape and reused: a new
trace only sets new images.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen

from core.attention_view import AttentionScale, causal_mask
from core.trace import Trace
from gui import plotting
from gui.fonts import ui_font
from gui.heatmap import PickableImage

GAP = 0.12                          # space between thumbnails, in thumbnail widths
MARK_COLOUR = QColor(230, 30, 60)   # the selected head's outline


class HeadGrid(pg.GraphicsLayoutWidget):
    sigHeadClicked = Signal(int, int)   # (layer, head)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._cmap = plotting.colormap()
        self.title = self.addLabel("", row=0, col=0, size="9pt")
        self.view = self.addViewBox(row=1, col=0, lockAspect=True, enableMouse=False, invertY=True)
        self.view.setMenuEnabled(False)
        self.outline = pg.QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        pen = QPen(MARK_COLOUR, 3)
        pen.setCosmetic(True)
        self.outline.setPen(pen)
        self.outline.setZValue(10)
        self.view.addItem(self.outline)
        self.images: list[list[PickableImage]] = []
        self.switched_off: list[list[pg.QtWidgets.QGraphicsRectItem]] = []   # hatched: a head mask removed it
        self._names: list[pg.TextItem] = []
        self.scale: AttentionScale | None = None
        self._range: tuple[tuple[float, float], tuple[float, float]] | None = None   # (x, y) view range
        self.view.sigResized.connect(self._fit_range)

    @staticmethod
    def origin(layer: int, head: int) -> tuple[float, float]:
        return head * (1 + GAP), layer * (1 + GAP)

    def show_heads(self, trace: Trace, scale: AttentionScale) -> None:
        """Draw every head of `trace`, each coloured 0 – scale.tops[l, h]."""
        self._ensure_items(trace.num_layers, trace.num_heads)
        rgba = self._colours(trace, scale)   # [L, H, T, T, 4]
        for layer in range(trace.num_layers):
            for head in range(trace.num_heads):
                x, y = self.origin(layer, head)
                self.images[layer][head].setImage(rgba[layer, head], levels=(0, 255), rect=QRectF(x, y, 1, 1))
                self.switched_off[layer][head].setVisible(bool(trace.head_mask[layer, head] == 0))
        self.scale = scale
        title = f"Layers ↓ heads → · {scale.caption}"
        if title != self.title.text:   # a LabelItem re-lays itself out on every setText
            self.title.setText(title)

    def _colours(self, trace: Trace, scale: AttentionScale) -> np.ndarray:  # -> [L, H, T, T, 4] uint8
        """Every head coloured in one pass: each divided by its top, then one colour map for all."""
        n = trace.n_tokens
        attn = np.stack([layer.attn for layer in trace.layers]) / scale.tops[:, :, None, None]  # [L, H, T, T]
        mask = np.broadcast_to(causal_mask(n), attn.shape)
        flat = plotting.masked_rgba(attn.reshape(-1, n), (0.0, 1.0), self._cmap, mask.reshape(-1, n))
        return flat.reshape(*attn.shape, 4)

    def select(self, layer: int, head: int) -> None:
        x, y = self.origin(layer, head)
        pad = GAP * 0.3
        self.outline.setRect(QRectF(x - pad, y - pad, 1 + 2 * pad, 1 + 2 * pad))

    def head_point(self, layer: int, head: int):
        """Where the thumbnail of (layer, head) is, in viewport pixels (for clicks in tests)."""
        x, y = self.origin(layer, head)
        return self.mapFromScene(self.view.mapViewToScene(QPointF(x + 0.5, y + 0.5)))

    def _ensure_items(self, num_layers: int, num_heads: int) -> None:
        """One image per head, made again only when the model's shape changes."""
        if len(self.images) == num_layers and all(len(row) == num_heads for row in self.images):
            return
        for item in [*sum(self.images, []), *sum(self.switched_off, []), *self._names]:
            self.view.removeItem(item)
        self.images = [[self._thumbnail(layer, head) for head in range(num_heads)] for layer in range(num_layers)]
        self.switched_off = [[self._hatch(layer, head) for head in range(num_heads)] for layer in range(num_layers)]
        step = 1 + GAP
        names = [(f"L{l}", (-0.05, l * step + 0.5), (1, 0.5)) for l in range(num_layers)]
        names += [(f"H{h}", (h * step + 0.5, -0.03), (0.5, 1)) for h in range(num_heads)]
        self._names = []
        for text, (x, y), anchor in names:
            name = pg.TextItem(text, color="k", anchor=anchor)
            name.setFont(ui_font(9))
            name.setPos(x, y)
            self.view.addItem(name)
            self._names.append(name)
        # Room for the names (TextItems keep their pixel size), as little as they need.
        self._range = ((-0.32, num_heads * step - GAP), (-0.42, num_layers * step - GAP))
        self._fit_range()

    def _fit_range(self) -> None:
        """The whole grid in view at any widget size (an aspect-locked view keeps its old scale otherwise)."""
        if self._range is not None:
            (x0, x1), (y0, y1) = self._range
            self.view.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0.01)

    def _thumbnail(self, layer: int, head: int) -> PickableImage:
        image = PickableImage()
        image.sigCellClicked.connect(lambda *_: self.sigHeadClicked.emit(layer, head))
        image.sigCellHovered.connect(lambda cell: self._hovered(layer, head, cell))
        self.view.addItem(image)
        return image

    def _hatch(self, layer: int, head: int) -> pg.QtWidgets.QGraphicsRectItem:
        x, y = self.origin(layer, head)
        hatch = pg.QtWidgets.QGraphicsRectItem(x, y, 1, 1)
        hatch.setBrush(QBrush(QColor(255, 255, 255, 200), Qt.BrushStyle.DiagCrossPattern))
        hatch.setPen(QPen(Qt.PenStyle.NoPen))
        hatch.setZValue(5)
        hatch.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.view.addItem(hatch)
        return hatch

    def _hovered(self, layer: int, head: int, cell) -> None:
        tops = self.scale.tops if self.scale is not None else np.ones((layer + 1, head + 1))
        self.setToolTip("" if cell is None else
                        f"L{layer} H{head} · colour scale 0 – {tops[layer, head]:.3f} · click to show it large")
