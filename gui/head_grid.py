"""Every head of every layer as a small heatmap: layers down, heads across, one click picks a head.

One ViewBox holds one PickableImage per head and no axes (a layer × head grid of plots with axes
costs ~20 axis repaints per update). The items are made once per model shape and reused: a new
trace only sets new images.

Scale: on screen a thumbnail is never smaller than MIN_THUMBNAIL_PX. HeadGridArea, the scroll area the
grid sits in, gives it at least that much room (`least_size`) and scrolls when a big model's grid
(SmolLM2-135M: 30 layers × 9 heads) does not fit, bringing a head selected elsewhere into view. An
exported page is sized by the figure alone (gui.figure_pages.grid_page).
The layer and head names keep their pixel size in a margin of their own, and are thinned (every
2nd, 4th... shown) whenever the thumbnails are too small for all of them (a page of 200 heads).
Scrolled, the head names stay along the top of the part in view and the layer names along its left
(`pin_names`), as a spreadsheet's headers do.

Switches: each thumbnail has a small box in its top-right corner (checked: the head is on); clicking
it, or right-clicking / Ctrl+clicking the thumbnail, asks to switch the head off or on
(sigHeadToggled), and clicking a layer's name asks the same for the whole layer (sigLayerToggled).
The grid only asks: the Attention panel turns that into the app's one Interventions value, and the
boxes and the hatching follow the run shown (`set_switches`). Role badges ("prev", "ind", ...) sit
in each thumbnail's bottom-left corner (`set_badges`).
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, QSize, QSizeF, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QFontMetricsF, QPen
from PySide6.QtWidgets import QApplication, QFrame, QScrollArea

from core.attention_view import AttentionScale, causal_mask, thumbnails
from core.trace import Trace
from gui import plotting
from gui.fonts import ui_font
from gui.heatmap import PickableImage, cosmetic_pen
from gui.theme import page_background

GAP = 0.12                          # space between thumbnails, in thumbnail widths
OUTLINE_PAD = GAP * 0.3             # the selection outline stands this far out of its thumbnail
MARK_COLOUR = QColor(230, 30, 60)   # the selected head's outline
SWITCH_SIZE = 0.22                  # the on/off box, in thumbnail widths
ON_COLOUR, OFF_COLOUR = QColor(20, 130, 60), QColor(200, 30, 40)
BADGE_FILL = QColor(255, 255, 255, 215)
PINNED_ALPHA = 230   # a name held in view over the thumbnails scrolled under it: on a band of the paper
SWITCH_HINT = "right-click or Ctrl+click (or its corner box) switches it off / on in every panel"
# 40 px: a 26-token sentence (the default one) gets 1.5 px per token, so a diagonal or a previous-token
# stripe is an unbroken line (at the ~25 px of issue #10 it breaks up into single pixels); the corner box
# (SWITCH_SIZE) is a 9 px click target and a "prev ind" badge still fits beside it.
MIN_THUMBNAIL_PX = 40
NAME_POINTS = 9           # layer and head names
NAME_GAP_PX = 4           # between two names shown
SCALE_BAR_PX = 320        # a page's colour bar: long enough to read, not the grid's whole width
EDGE_PX = 4               # room kept right of and below the last thumbnail (the selection outline)


def _name_colour() -> QColor:
    """Layer and head names in the plots' text colour (light on a dark theme's page)."""
    return pg.mkColor(pg.getConfigOption("foreground"))


def _pin(name: pg.TextItem, x: float, y: float, pinned: bool) -> None:
    """Move a grid name; pinned over the thumbnails, it gets a band of its own to be read on."""
    if (name.pos().x(), name.pos().y()) != (x, y):
        name.setPos(x, y)
    fill = pg.mkBrush(QColor(*page_background().getRgb()[:3], PINNED_ALPHA) if pinned else None)
    if name.fill.style() != fill.style():
        name.fill = fill
        name.setZValue(9 if pinned else 0)   # above the boxes and badges it covers, below the outline
        name.update()


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


BOX_PEN, MARK_PEN = cosmetic_pen(QColor("white"), 1.5), cosmetic_pen(QColor("white"), 2)   # made once: every box paints
ON_BRUSH, OFF_BRUSH = QBrush(ON_COLOUR), QBrush(OFF_COLOUR)


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
        painter.setPen(BOX_PEN)
        painter.setBrush(ON_BRUSH if self.on else OFF_BRUSH)
        painter.drawRect(r)
        painter.setPen(MARK_PEN)
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
    sigSelectedMoved = Signal(int, int)  # (layer, head): another head is outlined now
    sigShapeChanged = Signal()           # a model of another shape: least_size() changed

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._cmap = plotting.colormap()
        self.ci.setContentsMargins(3, 3, 3, 3)   # every pixel kept goes to the thumbnails
        self.ci.setSpacing(2)
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
        self.head_names: list[pg.TextItem] = []
        self.selected: tuple[int, int] | None = None    # the outlined head
        self.head_mask: np.ndarray | None = None        # [L, H] what the boxes and hatching show
        self.mode_text = "zero"                         # what a switched-off head outputs, for the tooltips
        self.role_text: list[list[str]] = []            # [L][H] the role scores, for the tooltips
        self._over_switch: tuple[int, int] | None = None      # the box under the mouse: its tooltip wins
        self._over_thumbnail: tuple[int, int] | None = None   # the thumbnail under the mouse
        self._tip_owner: tuple | None = None                  # what the tooltip shown is about
        self.scale: AttentionScale | None = None
        self._scale_bar: plotting.ColourBar | None = None   # on a page only (set_on_page)
        self.shape: tuple[int, int] = (0, 0)            # (layers, heads) the items are made for
        self.px_per_unit = 0.0                          # screen pixels per thumbnail width, as laid out
        self._metrics = QFontMetricsF(ui_font(NAME_POINTS))
        self._every: dict[int, int] = {}   # id(self.head_names or self.layer_names) -> show every n-th (_thin_names)
        probe = pg.TextItem("")   # kept alive while read: its text item dies with it
        self._text_pad = 2 * probe.textItem.document().documentMargin()   # a TextItem's own padding
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
                image = self.images[layer][head]
                if image.image is not None and image.image.shape == rgba.shape[2:]:
                    image.setImage(rgba[layer, head], levels=(0, 255))   # as many cells: its rect stays
                else:
                    image.setImage(rgba[layer, head], levels=(0, 255), rect=QRectF(*self.origin(layer, head), 1, 1))
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
            name, text = self.layer_names[layer], f"L{layer} off" if all_off else f"L{layer}"
            if name.toPlainText() != text:   # a TextItem lays itself out again at every setText / setColor
                name.setColor(OFF_COLOUR if all_off else _name_colour())
                name.setText(text)

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

    def set_on_page(self, on_page: bool) -> None:
        """On an exported page (gui.figure_pages.on_page) nothing is clicked: no switch boxes (the hatching
        shows a head that is off), and each role badge moves to its thumbnail's top-right corner, over the
        masked half, where it hides no weight."""
        for layer, row in enumerate(self.badges):
            for head, badge in enumerate(row):
                x, y = self.origin(layer, head)
                badge.setAnchor((1, 0) if on_page else (0, 1))
                badge.setPos(*((x + 0.98, y + 0.02) if on_page else (x + 0.02, y + 0.98)))
        for switch in (switch for row in self.switches for switch in row):
            switch.setVisible(not on_page)
        self._show_scale_bar(on_page)

    def _show_scale_bar(self, shown: bool) -> None:
        """A page has a colour bar under the grid (the screen keeps its pixels for thumbnails and says the
        scale in the title): the shared scale's numbers, or 0 to each head's own largest weight."""
        if not shown:
            if self._scale_bar is not None and self._scale_bar in self.ci.items:
                self.ci.removeItem(self._scale_bar)
                self.ci.layout.setRowSpacing(1, self.ci.layout.verticalSpacing())
            return
        if self._scale_bar is None:
            self._scale_bar = plotting.ColourBar(values=(0.0, 1.0), colorMap=self._cmap, orientation="horizontal",
                                                 interactive=False, width=10)
            self._scale_bar.setMaximumWidth(SCALE_BAR_PX)
            self._scale_bar.set_title("attention weight")
        tops = self.scale.tops[np.isfinite(self.scale.tops)] if self.scale is not None else np.ones(1)
        top = float(tops.max()) if tops.size and tops.max() > 0 else 1.0   # a NaN run: the bar still has a range
        each_own = self.scale is not None and self.scale.mode.key not in ("fixed", "shared")
        self._scale_bar.setLevels((0.0, 1.0 if each_own else top))
        ends = [(0.0, "0"), (1.0, "each head's largest weight")] if each_own else \
            [(value, f"{value:.2f}".rstrip("0").rstrip(".") or "0") for value in (0.0, top / 2, top)]
        axis = self._scale_bar.getAxis("bottom")
        axis.setTicks([ends, []])   # the ends named; no minor ticks
        axis.setStyle(hideOverlappingLabels=False)   # an end's label reaches past the bar: keep it
        self.ci.addItem(self._scale_bar, row=2, col=0)
        self.ci.layout.setRowSpacing(1, 10)   # the bar apart from the last row's thumbnails
        self.ci.layout.setAlignment(self._scale_bar, Qt.AlignmentFlag.AlignHCenter)

    def badge_texts(self) -> list[list[str]]:
        """[L][H] the badge text shown on each thumbnail ("" for none)."""
        return [[item.toPlainText() if item.isVisible() else "" for item in row] for row in self.badges]

    def select(self, layer: int, head: int) -> None:
        x, y = self.origin(layer, head)
        pad = OUTLINE_PAD
        self.outline.setRect(QRectF(x - pad, y - pad, 1 + 2 * pad, 1 + 2 * pad))
        if self.selected != (layer, head):   # only a change: redraws must not undo the user's scrolling
            self.selected = (layer, head)
            self.sigSelectedMoved.emit(layer, head)

    def head_rect(self, layer: int, head: int) -> QRect:
        """The thumbnail of (layer, head) in this widget's own pixels (for scrolling it into view)."""
        x, y = self.origin(layer, head)
        corners = [self.viewport().mapTo(self, self.mapFromScene(self.view.mapViewToScene(QPointF(x + dx, y + dy))))
                   for dx, dy in ((0, 0), (1, 1))]
        return QRect(corners[0], corners[1])

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
        for item in [*(item for grid in made for row in grid for item in row), *self.layer_names, *self.head_names]:
            self.view.removeItem(item)

        def per_head(make):
            return [[make(layer, head) for head in range(num_heads)] for layer in range(num_layers)]

        self.images, self.switched_off = per_head(self._thumbnail), per_head(self._hatch)
        self.switches, self.badges = per_head(self._switch), per_head(self._badge)
        self.role_text = []
        self.shape = (num_layers, num_heads)
        self.layer_names = [self._layer_name(layer) for layer in range(num_layers)]
        self.head_names = [self._head_name(head) for head in range(num_heads)]
        self._fit_range()
        self.sigShapeChanged.emit()

    # -------------------------------------------------------------- layout in pixels
    def _margins_px(self) -> tuple[float, float]:
        """(left, top): room for the widest layer name ("L29 off") and for the head names, in pixels."""
        widest = self._metrics.horizontalAdvance(f"L{max(0, self.shape[0] - 1)} off") + self._text_pad
        return widest, self._metrics.height() + self._text_pad   # the text's own padding keeps it off the thumbnails

    def _units(self) -> tuple[float, float]:
        """The thumbnails' extent (width, height) in thumbnail widths, with room left of them for the
        selection outline (the layer names stand clear of it)."""
        layers, heads = self.shape
        return heads * (1 + GAP) - GAP + OUTLINE_PAD, layers * (1 + GAP) - GAP

    def _chrome_px(self) -> QSize:
        """What the widget has around its ViewBox: the title row, the layout's margins and spacing."""
        left, top, right, bottom = self.ci.layout.getContentsMargins()
        title = self.title.sizeHint(Qt.SizeHint.PreferredSize, QSizeF()).height()
        return QSize(math.ceil(left + right), math.ceil(top + bottom + title + self.ci.layout.verticalSpacing()))

    def height_for_rows(self, rows: int, width: int) -> int:
        """The height that shows `rows` rows of thumbnails whole at `width` (thumbnails fill the width,
        and never shrink below MIN_THUMBNAIL_PX: the area scrolls sideways then)."""
        (left, top), (units_wide, _) = self._margins_px(), self._units()
        thumb = max(MIN_THUMBNAIL_PX, (width - left - EDGE_PX - self._chrome_px().width()) / max(units_wide, 1e-9))
        rows = min(rows, self.shape[0])
        return math.ceil(top + thumb * (rows * (1 + GAP) - GAP) + EDGE_PX) + self._chrome_px().height()

    def content_size(self, thumb: float) -> QSizeF:
        """The pixels the view needs to show every thumbnail `thumb` pixels wide, with its names' margins."""
        (left, top), (width, height) = self._margins_px(), self._units()
        return QSizeF(left + width * thumb + EDGE_PX, top + height * thumb + EDGE_PX)

    def least_size(self) -> QSize:
        """The size at which every thumbnail is MIN_THUMBNAIL_PX: the scroll area scrolls below it."""
        (left, top), (width, height), chrome = self._margins_px(), self._units(), self._chrome_px()
        return QSize(math.ceil(left + width * MIN_THUMBNAIL_PX + EDGE_PX) + chrome.width(),
                     math.ceil(top + height * MIN_THUMBNAIL_PX + EDGE_PX) + chrome.height())

    def _fit_range(self) -> None:
        """The whole grid in view at any widget size, its names in pixel margins of their own (an
        aspect-locked view keeps its old scale otherwise), then as many names as fit."""
        if not self.images:
            return
        (left, top), (width, height) = self._margins_px(), self._units()
        rect = self.view.boundingRect()
        room_w, room_h = rect.width() - left - EDGE_PX, rect.height() - top - EDGE_PX
        if room_w <= 0 or room_h <= 0:
            return   # not laid out yet
        s = min(room_w / width, room_h / height)
        self.px_per_unit = s
        self.view.setRange(xRange=(-left / s - OUTLINE_PAD, width - OUTLINE_PAD + EDGE_PX / s), yRange=(-top / s, height + EDGE_PX / s),
                           padding=0)
        self._thin_names(s)
        self.pin_names()

    def pin_names(self) -> None:
        """Head names along the top, layer names along the left of the part of the grid in view: where
        they belong while that is the grid's edge, else over the thumbnails (on a white band)."""
        if not self.images or self.px_per_unit <= 0:
            return
        parent = self.parentWidget()   # a scroll area's viewport: the part of the grid it shows
        shown = self.rect() if parent is None else self.rect() & QRect(self.mapFromParent(QPoint(0, 0)), parent.size())
        corner = self.view.mapSceneToView(self.mapToScene(self.viewport().mapFrom(self, shown.topLeft())))
        (left, top), s = self._margins_px(), self.px_per_unit
        x, y = max(0.0, corner.x() + left / s + OUTLINE_PAD), max(0.0, corner.y() + top / s)   # the names' inner edges
        heads = self._shown_names(self.head_names, self._metrics.horizontalAdvance(f"H{len(self.head_names) - 1}"),
                                  x - OUTLINE_PAD)
        layers = self._shown_names(self.layer_names, self._metrics.height(), y)
        # Where the two rows of names cross (scrolled, or thumbnails smaller than a name), the head names
        # win: a layer name reaching into their band is hidden while a head name reaches into its band.
        crossing = any(reaches for _, reaches in heads)
        for head, (shown, _) in enumerate(heads):
            _pin(self.head_names[head], head * (1 + GAP) + 0.5, y, pinned=y > 0)
            self.head_names[head].setVisible(shown)
        for layer, (shown, reaches) in enumerate(layers):
            _pin(self.layer_names[layer], x - OUTLINE_PAD, layer * (1 + GAP) + 0.5, pinned=x > 0)
            self.layer_names[layer].setVisible(shown and not (crossing and reaches))

    def _shown_names(self, names: list, extent_px: float, edge: float) -> list[tuple[bool, bool]]:
        """Per name: shown by the thinning, and whether it reaches (its half extent, in view units, from
        its centre) before `edge`, into the other row of names' band."""
        every, half = self._every.get(id(names), 1), (extent_px + self._text_pad) / 2 / self.px_per_unit
        return [(i % every == 0, i * (1 + GAP) + 0.5 - half < edge) for i in range(len(names))]

    def wheelEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        """The grid never zooms: the wheel scrolls the area it sits in (passed on by hand, as QScrollBar
        does: Qt hands an ignored wheel event to the parent only when it came from the window system)."""
        parent = self.parentWidget()
        if parent is None:
            event.ignore()
        else:
            QApplication.sendEvent(parent, event)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        QTimer.singleShot(0, self.pin_names)   # back in its scroll area (after an export): where is it scrolled?

    def _thin_names(self, s: float) -> None:
        """Every n-th name is shown (pin_names), n as small as keeps neighbours apart at s pixels per thumbnail."""
        step_px = s * (1 + GAP)
        widest_head = self._metrics.horizontalAdvance(f"H{len(self.head_names) - 1}") + self._text_pad
        for names, size in ((self.head_names, widest_head), (self.layer_names, self._metrics.height() + self._text_pad)):
            every = max(1, math.ceil((size + NAME_GAP_PX) / step_px))
            self._every[id(names)] = 1 << (every - 1).bit_length()   # 1, 2, 4...: the names shown stay round

    def name_rects(self) -> list[QRectF]:
        """The scene rectangles of the names shown (tests: no two overlap, none covers a thumbnail)."""
        return [name.sceneBoundingRect() for name in (*self.layer_names, *self.head_names) if name.isVisible()]

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

    def _head_name(self, head: int) -> pg.TextItem:
        name = pg.TextItem(f"H{head}", color=_name_colour(), anchor=(0.5, 1))
        name.setFont(ui_font(NAME_POINTS))
        name.setPos(head * (1 + GAP) + 0.5, 0)
        self.view.addItem(name)
        return name

    def _layer_name(self, layer: int) -> LayerName:
        name = LayerName(f"L{layer}", color=_name_colour(), anchor=(1, 0.5))
        name.setFont(ui_font(NAME_POINTS))
        name.setPos(0, layer * (1 + GAP) + 0.5)
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


class HeadGridArea(QScrollArea):
    """The head grid in a scroll area: it fills the area while its thumbnails fit at MIN_THUMBNAIL_PX or
    more, and scrolls otherwise; a head selected elsewhere (another panel, a key) is scrolled into view."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.grid = HeadGrid()
        self._kept_scroll: tuple[int, int] | None = None   # (x, y) while an export has the grid
        self.setWidget(self.grid)   # sized here (_fit_grid), not by widgetResizable: no minimum size on the grid
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._wanted: tuple[int, int] | None = None
        self.grid.sigSelectedMoved.connect(self.scroll_to)
        self.grid.sigShapeChanged.connect(self._fit_grid)
        for bar in (self.horizontalScrollBar(), self.verticalScrollBar()):
            bar.valueChanged.connect(self.grid.pin_names)

    def takeWidget(self):  # noqa: N802 (Qt's name)
        """An export lays the grid out on its own page: where the area was scrolled is kept for its return
        (from the first of several exports in a row: the grid is back only in between)."""
        if self._kept_scroll is None:
            self._kept_scroll = (self.horizontalScrollBar().value(), self.verticalScrollBar().value())
        return super().takeWidget()

    def setWidget(self, widget) -> None:  # noqa: N802
        super().setWidget(widget)
        if self._kept_scroll is not None:
            QTimer.singleShot(0, self._restore_scroll)

    def _restore_scroll(self) -> None:
        if self._kept_scroll is None or self.widget() is not self.grid:   # done, or out on a page again
            return
        self._fit_grid()
        (x, y), self._kept_scroll = self._kept_scroll, None
        self.horizontalScrollBar().setValue(x)
        self.verticalScrollBar().setValue(y)
        self.grid.pin_names()

    def viewportEvent(self, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:   # the area resized, or a scroll bar came or went
            self._fit_grid()
        return super().viewportEvent(event)

    def _fit_grid(self) -> None:
        """The grid as large as the area shows, and never below its least size (then it scrolls)."""
        size = self.viewport().size().expandedTo(self.grid.least_size())
        if size != self.grid.size():
            self.grid.resize(size)

    def scroll_to(self, layer: int, head: int) -> None:
        """Bring (layer, head) into view once the grid is laid out (a new model's grid is not, yet)."""
        if self._wanted is None:
            QTimer.singleShot(0, self._scroll_to_wanted)
        self._wanted = (layer, head)

    def _scroll_to_wanted(self) -> None:
        if self._wanted is None:
            return
        rect, self._wanted = self.grid.head_rect(*self._wanted), None
        margin = round(GAP * self.grid.px_per_unit) + 4   # the outline around it too
        self.ensureVisible(rect.center().x(), rect.center().y(), rect.width() // 2 + margin,
                           rect.height() // 2 + margin)
