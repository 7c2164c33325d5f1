"""Every head of every layer as a small heatmap: layers down, heads across, one click picks a head.

One ViewBox holds one PickableImage per head and no axes (a layer × head grid of plots with axes
costs ~20 axis repaints per update). The items are made once per model shape and reused: a new
trace only sets new images.

Switches: each thumbnail has a small box in its top-right corner (checked: the head is on); clicking
it, or right-clicking / Ctrl+clicking the thumbnail, asks to switch the head off or on
(sigHeadToggled), and clicking a layer's name asks the same for the whole layer (sigLayerToggled).
The grid only asks: the Attention panel turns that into the app's one Interventions value, and the
boxes and the hatching follow the run shown (`set_switches`). Role badges ("prev", "ind", ...) sit
in each thumbnail's bottom-left corner (`set_badges`).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen

from core.attention_view import AttentionScale, causal_mask, thumbnails
from core.trace import Trace
from gui import plotting
from gui.fonts import ui_font
from gui.heatmap import PickableImage, cosmetic_pen

GAP = 0.12                          # space between thumbnails, in thumbnail widths
MARK_COLOUR = QColor(230, 30, 60)   # the selected head's outline
SWITCH_SIZE = 0.22                  # the on/off box, in thumbnail widths
ON_COLOUR, OFF_COLOUR = QColor(20, 130, 60), QColor(200, 30, 40)
BADGE_FILL = QColor(255, 255, 255, 215)
SWITCH_HINT = "right-click or Ctrl+click (or its corner box) switches it off / on in every panel"


def _toggle_click(event) -> bool:
    """A click that switches a head: the right button, or the left one with Ctrl held."""
    button, ctrl = event.button(), bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
    return button == Qt.MouseButton.RightButton or (button == Qt.MouseButton.LeftButton and ctrl)


class Thumbnail(PickableImage):
    """One head's image: a plain click picks the head, a switching click (see _toggle_click) toggles it."""
    sigToggle = Signal()

    def mouseClickEvent(self, event) -> None:  # noqa: N802 (pyqtgraph's name)
        if _toggle_click(event):
            event.accept()
            self.sigToggle.emit()
            return
        super().mouseClickEvent(event)


class ClickToToggle:
    """For the grid's switches (a corner box, a layer's name): any left or right click toggles; hovering
    says so (sigHovered), and the item, not the image under it, takes the click. The class sets
    sigToggle = Signal() and sigHovered = Signal(bool)."""

    def mouseClickEvent(self, event) -> None:  # noqa: N802
        if event.button() in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton):
            event.accept()
            self.sigToggle.emit()

    def hoverEvent(self, event) -> None:  # noqa: N802
        if event.isExit():
            self.sigHovered.emit(False)
            return
        event.acceptClicks(Qt.MouseButton.LeftButton)
        self.sigHovered.emit(True)


class SwitchBox(ClickToToggle, pg.GraphicsObject):
    """The small on/off box in a thumbnail's corner: a tick on green when on, a cross on red when off."""
    sigToggle = Signal()
    sigHovered = Signal(bool)   # True on enter, False on leave

    def __init__(self, x: float, y: float) -> None:
        super().__init__()
        self.rect = QRectF(x + 1 - SWITCH_SIZE - 0.03, y + 0.03, SWITCH_SIZE, SWITCH_SIZE)
        self.on = True
        self.setZValue(8)
        self.setAcceptHoverEvents(True)

    def set_on(self, on: bool) -> None:
        if on != self.on:
            self.on = on
            self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802
        return self.rect

    def paint(self, painter, *args) -> None:
        r = self.rect
        painter.setPen(cosmetic_pen(QColor("white"), 1.5))
        painter.setBrush(QBrush(ON_COLOUR if self.on else OFF_COLOUR))
        painter.drawRect(r)
        painter.setPen(cosmetic_pen(QColor("white"), 2))
        if self.on:   # a tick
            painter.drawPolyline([QPointF(r.left() + 0.2 * r.width(), r.top() + 0.55 * r.height()),
                                  QPointF(r.left() + 0.42 * r.width(), r.top() + 0.78 * r.height()),
                                  QPointF(r.left() + 0.8 * r.width(), r.top() + 0.25 * r.height())])
        else:         # a cross
            inner = r.adjusted(0.25 * r.width(), 0.25 * r.height(), -0.25 * r.width(), -0.25 * r.height())
            painter.drawLine(inner.topLeft(), inner.bottomRight())
            painter.drawLine(inner.topRight(), inner.bottomLeft())


class LayerName(ClickToToggle, pg.TextItem):
    """A layer's name beside its row; clicking it switches the layer's heads off (or, all off, back on)."""
    sigToggle = Signal()
    sigHovered = Signal(bool)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.setAcceptHoverEvents(True)


class HeadGrid(pg.GraphicsLayoutWidget):
    sigHeadClicked = Signal(int, int)   # (layer, head)
    sigHeadToggled = Signal(int, int)   # (layer, head): switch it off if on, on if off
    sigLayerToggled = Signal(int)       # layer: every head off if any is on, else every head on

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
        self.images: list[list[Thumbnail]] = []
        self.switched_off: list[list[pg.QtWidgets.QGraphicsRectItem]] = []   # hatched: a head mask removed it
        self.switches: list[list[SwitchBox]] = []
        self.badges: list[list[pg.TextItem]] = []
        self.layer_names: list[LayerName] = []
        self._names: list[pg.TextItem] = []
        self.head_mask: np.ndarray | None = None        # [L, H] what the boxes and hatching show
        self.mode_text = "zero"                         # what a switched-off head outputs, for the tooltips
        self.role_text: list[list[str]] = []            # [L][H] the role scores, for the tooltips
        self._over_switch: tuple[int, int] | None = None      # the box under the mouse: its tooltip wins
        self._over_thumbnail: tuple[int, int] | None = None   # the thumbnail under the mouse
        self._tip_owner: tuple | None = None                  # what the tooltip shown is about
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
        self.set_switches(trace.head_mask)
        self.scale = scale
        title = f"Layers ↓ heads → · {scale.caption}"
        if title != self.title.text:   # a LabelItem re-lays itself out on every setText
            self.title.setText(title)

    def _colours(self, trace: Trace, scale: AttentionScale) -> np.ndarray:  # -> [L, H, P, P, 4] uint8
        """Every head coloured in one pass: each divided by its top, then one colour map for all."""
        attn = thumbnails(trace) / scale.tops[:, :, None, None]  # [L, H, P, P]: at most THUMB_CELLS a side
        n = attn.shape[-1]
        mask = np.broadcast_to(causal_mask(n), attn.shape)
        flat = plotting.masked_rgba(attn.reshape(-1, n), (0.0, 1.0), self._cmap, mask.reshape(-1, n))
        return flat.reshape(*attn.shape, 4)

    def set_switches(self, head_mask: np.ndarray, mode_text: str | None = None) -> None:  # [L, H]
        """Boxes, hatching and layer names for this head mask (0: switched off)."""
        self.head_mask = np.array(head_mask)
        if mode_text is not None:
            self.mode_text = mode_text
        for layer, row in enumerate(self.switches):
            for head, switch in enumerate(row):
                on = bool(head_mask[layer, head] != 0)
                switch.set_on(on)
                self.switched_off[layer][head].setVisible(not on)
            all_off = not (head_mask[layer] != 0).any()
            self.layer_names[layer].setColor(OFF_COLOUR if all_off else QColor("black"))
            self.layer_names[layer].setText(f"L{layer} off" if all_off else f"L{layer}")

    def set_badges(self, badges: list[list[tuple[str, ...]]], role_text: list[list[str]]) -> None:
        """Each head's role badges ([L][H] short names) and the scores its tooltip gives."""
        self.role_text = role_text
        for layer, row in enumerate(self.badges):
            for head, item in enumerate(row):
                names = badges[layer][head] if layer < len(badges) and head < len(badges[layer]) else ()
                text = " ".join(names)
                if text != item.toPlainText():
                    item.setText(text)
                item.setVisible(bool(text))

    def badge_texts(self) -> list[list[str]]:
        """[L][H] the badge text shown on each thumbnail ("" for none)."""
        return [[item.toPlainText() if item.isVisible() else "" for item in row] for row in self.badges]

    def select(self, layer: int, head: int) -> None:
        x, y = self.origin(layer, head)
        pad = GAP * 0.3
        self.outline.setRect(QRectF(x - pad, y - pad, 1 + 2 * pad, 1 + 2 * pad))

    def head_point(self, layer: int, head: int):
        """Where the thumbnail of (layer, head) is, in viewport pixels (for clicks in tests)."""
        x, y = self.origin(layer, head)
        return self.mapFromScene(self.view.mapViewToScene(QPointF(x + 0.5, y + 0.5)))

    def switch_point(self, layer: int, head: int):
        """The centre of (layer, head)'s on/off box, in viewport pixels."""
        return self.mapFromScene(self.view.mapViewToScene(self.switches[layer][head].rect.center()))

    def layer_point(self, layer: int):
        """The centre of a layer's name, in viewport pixels."""
        name = self.layer_names[layer]
        return self.mapFromScene(name.mapToScene(name.boundingRect().center()))

    def _ensure_items(self, num_layers: int, num_heads: int) -> None:
        """One image per head, made again only when the model's shape changes."""
        if len(self.images) == num_layers and all(len(row) == num_heads for row in self.images):
            return
        made = (self.images, self.switched_off, self.switches, self.badges)
        for item in [*(item for grid in made for row in grid for item in row), *self._names]:
            self.view.removeItem(item)

        def per_head(make):
            return [[make(layer, head) for head in range(num_heads)] for layer in range(num_layers)]

        self.images, self.switched_off = per_head(self._thumbnail), per_head(self._hatch)
        self.switches, self.badges = per_head(self._switch), per_head(self._badge)
        self.role_text = []
        step = 1 + GAP
        self.layer_names = [self._layer_name(layer) for layer in range(num_layers)]
        self._names = list(self.layer_names)
        for h in range(num_heads):
            name = pg.TextItem(f"H{h}", color="k", anchor=(0.5, 1))
            name.setFont(ui_font(9))
            name.setPos(h * step + 0.5, -0.03)
            self.view.addItem(name)
            self._names.append(name)
        # Room for the names (TextItems keep their pixel size; "L0 off" when a layer is off), as little as needed.
        self._range = ((-0.5, num_heads * step - GAP), (-0.42, num_layers * step - GAP))
        self._fit_range()

    def _fit_range(self) -> None:
        """The whole grid in view at any widget size (an aspect-locked view keeps its old scale otherwise)."""
        if self._range is not None:
            (x0, x1), (y0, y1) = self._range
            self.view.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0.01)

    def _thumbnail(self, layer: int, head: int) -> Thumbnail:
        image = Thumbnail()
        image.sigCellClicked.connect(lambda *_: self.sigHeadClicked.emit(layer, head))
        image.sigToggle.connect(lambda: self.sigHeadToggled.emit(layer, head))
        image.sigCellHovered.connect(lambda cell: self._hovered(layer, head, cell))
        self.view.addItem(image)
        return image

    def _switch(self, layer: int, head: int) -> SwitchBox:
        switch = SwitchBox(*self.origin(layer, head))
        switch.sigToggle.connect(lambda: self.sigHeadToggled.emit(layer, head))
        switch.sigHovered.connect(lambda inside: self._switch_hovered(layer, head, inside))
        self.view.addItem(switch)
        return switch

    def _badge(self, layer: int, head: int) -> pg.TextItem:
        x, y = self.origin(layer, head)
        badge = pg.TextItem("", color="k", anchor=(0, 1), fill=BADGE_FILL)
        badge.setFont(ui_font(7))
        badge.setPos(x + 0.02, y + 0.98)
        badge.setZValue(7)
        badge.setAcceptedMouseButtons(Qt.MouseButton.NoButton)   # clicks go to the thumbnail under it
        badge.setVisible(False)
        self.view.addItem(badge)
        return badge

    def _layer_name(self, layer: int) -> LayerName:
        name = LayerName(f"L{layer}", color="k", anchor=(1, 0.5))
        name.setFont(ui_font(9))
        name.setPos(-0.05, layer * (1 + GAP) + 0.5)
        name.sigToggle.connect(lambda: self.sigLayerToggled.emit(layer))
        name.sigHovered.connect(lambda inside: self._tip(("layer", layer), self._layer_tip(layer)) if inside
                                else self._untip(("layer", layer)))
        self.view.addItem(name)
        return name

    def _is_on(self, layer: int, head: int) -> bool:
        return self.head_mask is None or bool(self.head_mask[layer, head] != 0)

    def _switch_tip(self, layer: int, head: int) -> str:
        if self._is_on(layer, head):
            return f"L{layer} H{head} is on: click to switch it off in every panel ({self.mode_text} ablation)"
        return f"L{layer} H{head} is switched off ({self.mode_text} ablation): click to switch it back on"

    def _layer_tip(self, layer: int) -> str:
        any_on = self.head_mask is None or bool((self.head_mask[layer] != 0).any())
        what = "switch every head of it off" if any_on else "switch its heads back on"
        return f"Layer {layer}: click to {what} ({self.mode_text} ablation)"

    def _hatch(self, layer: int, head: int) -> pg.QtWidgets.QGraphicsRectItem:
        x, y = self.origin(layer, head)
        hatch = pg.QtWidgets.QGraphicsRectItem(x, y, 1, 1)
        hatch.setBrush(QBrush(QColor(255, 255, 255, 200), Qt.BrushStyle.DiagCrossPattern))
        hatch.setPen(QPen(Qt.PenStyle.NoPen))
        hatch.setZValue(5)
        hatch.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.view.addItem(hatch)
        return hatch

    # Tooltips: the item under the mouse owns the grid's tooltip. pyqtgraph tells the items newly under
    # the mouse before those it left, so one that is left clears the tooltip only while it still owns it.
    def _tip(self, owner: tuple, text: str) -> None:
        self._tip_owner = owner
        self.setToolTip(text)

    def _untip(self, owner: tuple) -> None:
        if self._tip_owner == owner:
            self._tip(None, "")

    def _switch_hovered(self, layer: int, head: int, inside: bool) -> None:
        self._over_switch = (layer, head) if inside else None
        if inside:
            self._tip(("switch", layer, head), self._switch_tip(layer, head))
        elif self._over_thumbnail == (layer, head):   # back onto the thumbnail under it
            self._tip(("thumbnail", layer, head), self._thumbnail_tip(layer, head))
        else:
            self._untip(("switch", layer, head))

    def _hovered(self, layer: int, head: int, cell) -> None:
        """The thumbnail's tooltip; the box in its corner (hovered first, as it lies on top) keeps its own."""
        self._over_thumbnail = None if cell is None else (layer, head)
        if cell is None:
            self._untip(("thumbnail", layer, head))
        elif self._over_switch != (layer, head):
            self._tip(("thumbnail", layer, head), self._thumbnail_tip(layer, head))

    def _thumbnail_tip(self, layer: int, head: int) -> str:
        tops = self.scale.tops if self.scale is not None else np.ones((layer + 1, head + 1))
        state = "" if self._is_on(layer, head) else f" · switched off ({self.mode_text} ablation)"
        roles = self.role_text[layer][head] if layer < len(self.role_text) else ""
        return (f"L{layer} H{head}{state} · colour scale 0 – {tops[layer, head]:.3f}\n"
                f"click: show it large · {SWITCH_HINT}" + (f"\n{roles}" if roles else ""))
