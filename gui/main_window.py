"""The main window: sentence bar on top, one dock per panel, menus, status bar, persistence.

The window only wires things: the Controller runs the model and owns Trace and Selection; the
panels draw. A panel whose dock is hidden (closed, or a tab behind another) is not redrawn on every
keystroke: it is marked stale and brought up to date when it becomes visible. A panel is not even
built until its dock is first shown or something asks for it (MainWindow.panel, .panels, exports):
building all of them, hidden ones too, was about half of start-up.
"""
from __future__ import annotations

import sys
from pathlib import Path

import shiboken6

from PySide6.QtCore import QByteArray, QEvent, QRect, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (QApplication, QDialog, QDockWidget, QFileDialog, QLabel, QMainWindow,
                               QMessageBox, QTabBar, QTextBrowser, QToolBar, QToolButton, QVBoxLayout, QWidget)

from core.bundle import Bundle
from gui.controller import Controller, panels_fields
from gui.import_actions import ImportActions
from gui.menu_shortcuts import MenuShortcutsFirst
from gui.panels.base import Figure, Panel
from gui.sentence_bar import SentenceBar
from gui.session_actions import SessionActions
from gui.steady_label import SteadyLabel

ORGANISATION = "Glassbox"
APPLICATION = "Glassbox"
STATE_VERSION = 3   # bump when the default dock set or arrangement changes: a layout saved before is not restored

Area = Qt.DockWidgetArea
# object_name -> (dock area, the dock to share a tab group with); panels not listed go right.
# Left: how the model computes; right: what it predicts and the experiments on it. Two groups of
# about six tabs each keep every tab title whole on a 1280×800 screen (nine in one group were cut to "P…").
DEFAULT_LAYOUT: dict[str, tuple[Qt.DockWidgetArea, str | None]] = {
    "tokens": (Area.TopDockWidgetArea, None),
    "attention": (Area.LeftDockWidgetArea, None),
    "positions": (Area.LeftDockWidgetArea, "attention"),
    "moe": (Area.LeftDockWidgetArea, "attention"),
    "step": (Area.LeftDockWidgetArea, "attention"),
    "patching": (Area.LeftDockWidgetArea, "attention"),   # its inputs need the wider area
    "head_roles": (Area.LeftDockWidgetArea, "attention"),
    "logit_lens": (Area.LeftDockWidgetArea, "attention"),
    "parity": (Area.LeftDockWidgetArea, "attention"),
    "next_token": (Area.RightDockWidgetArea, None),
}
FIRST_SIZE = QSize(1500, 950)   # the first window on a big screen
SCREEN_SHARE = 0.9              # ...and on a smaller one, this share of its width
TITLE_BAR_ROOM = 48             # and its height less the window's title bar: at 800 px every line counts
STATUS_BACKENDS = {"onnx": "ONNX Runtime", "numpy": "NumPy", "both": "ONNX + NumPy"}
BUSY_TEXT = "running…"
BUSY_DELAY_MS = 250   # a run over sooner never says "running…": at typing speed it flickered on every key
NO_FIGURE_YET = "there is no figure yet: type a sentence first"
BACKEND_LABELS = {"onnx": "ONNX Runtime", "numpy": "NumPy reference", "both": "Both (ONNX ↔ NumPy parity)"}


def default_settings() -> QSettings:
    return QSettings(ORGANISATION, APPLICATION)


def first_window_size(available: QRect) -> QSize:
    """The window's size before any is saved: FIRST_SIZE, shrunk to fit the screen's free area."""
    return FIRST_SIZE.boundedTo(QSize(int(available.width() * SCREEN_SHARE), available.height() - TITLE_BAR_ROOM))


def tokens_dock_height(line: int) -> int:
    """The Tokens dock's height for two whole rows of chips (measured on the chip widget itself) under its
    summary and above its legend (two lines each on a small screen), its title, spacing and margins (about
    two lines more: 126 px at a 17 px line)."""
    from gui.chip_flow import Chip, ChipFlow

    two_rows = ChipFlow(big_point_size=12.0, small_point_size=8.0)   # the Tokens panel's chips
    two_rows.resize(1, 1)   # narrower than a chip: each on its own row
    two_rows.set_chips([Chip(("我", "id 0", "bytes 0–3"), Qt.GlobalColor.white)] * 2)
    height = two_rows.height()
    two_rows.deleteLater()
    return height + 6 * line + 28


def show_whole_tab_titles(bar: QTabBar) -> None:
    """Dock tab titles are never shortened ("P…" named two tabs): too many tabs scroll instead."""
    bar.setElideMode(Qt.TextElideMode.ElideNone)
    bar.setUsesScrollButtons(True)


class MainWindow(QMainWindow):
    def __init__(self, controller: Controller, settings: QSettings | None = None,
                 panel_classes: list[type] | None = None, restore: bool = True) -> None:
        super().__init__()
        from gui.panels.registry import PANELS, PanelEntry

        self.controller = controller
        self.settings = settings if settings is not None else default_settings()
        # a panel's module is imported when the panel is built (gui/panels/registry.py)
        self._entries = {entry.object_name: entry for entry in
                         (PANELS if panel_classes is None else [PanelEntry.of(cls) for cls in panel_classes])}
        self._built: dict[str, Panel] = {}   # object_name -> panel, in the order they were built
        self._reference = None   # the controller's last NumPy reference trace, for a parity panel built later
        self.docks: dict[str, QDockWidget] = {}
        self._stale: set[str] = set()
        self._current_panel: str | None = None
        self._focused_in_panel: QWidget | None = None   # the widget of a panel that last had the focus
        self.last_error = ""
        self._message_box: QMessageBox | None = None
        self._about: QDialog | None = None
        self.imports = ImportActions(self)

        self.setObjectName("glassbox_main_window")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
                            | QMainWindow.DockOption.AllowNestedDocks)
        self._build_sentence_bar()
        self._build_docks()
        self._build_status_bar()
        self._build_menus()
        self._connect_controller()
        self.place_default_layout()
        self._update_title(controller.bundle)
        if restore:
            self._restore_settings()
        QApplication.instance().focusChanged.connect(self._on_focus_changed)
        QApplication.instance().focusChanged.connect(MenuShortcutsFirst(self).follow_focus)
        collector = getattr(QApplication.instance(), "glassbox_gc", None)   # gui.app.IdleCollector
        if collector is not None:   # a collection while the sentence typed is analysed would delay its picture
            collector.wait_while(controller.busy)

    # ------------------------------------------------------------ building
    def _build_sentence_bar(self) -> None:
        self.sentence_bar = SentenceBar()
        self.notice = QLabel()
        self.notice.setObjectName("notice")
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("QLabel { background: #fff3c4; color: #5a4300; padding: 3px 6px;"
                                  " border: 1px solid #e8cf7a; border-radius: 3px; }")
        self.notice.hide()
        self.text_note = QLabel()   # what the sentence bar did to the text it was given (the surrogate rule)
        self.text_note.setObjectName("text_note")
        self.text_note.setWordWrap(True)
        self.text_note.setStyleSheet(self.notice.styleSheet())
        self.text_note.hide()
        holder = QWidget()
        layout = QVBoxLayout(holder)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(2)
        layout.addWidget(self.sentence_bar)
        layout.addWidget(self.notice)
        layout.addWidget(self.text_note)
        bar = QToolBar("Sentence")
        bar.setObjectName("sentence_toolbar")
        bar.setMovable(False)
        bar.setFloatable(False)
        bar.toggleViewAction().setVisible(False)   # the sentence bar is not optional
        bar.addWidget(holder)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, bar)
        self.sentence_toolbar = bar
        # Docks fill the window; the central widget is a placeholder Qt requires.
        placeholder = QWidget()
        placeholder.setMaximumSize(0, 0)
        self.setCentralWidget(placeholder)
        placeholder.hide()

    def _build_docks(self) -> None:
        self.setCorner(Qt.Corner.TopLeftCorner, Area.TopDockWidgetArea)
        self.setCorner(Qt.Corner.TopRightCorner, Area.TopDockWidgetArea)
        for name, entry in self._entries.items():
            dock = QDockWidget(entry.title, self)
            dock.setObjectName(name)   # saveState/restoreState know docks by it, built or not
            dock.setWidget(QWidget())  # a light placeholder until the panel is built (_build_panel)
            dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                             | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                             | QDockWidget.DockWidgetFeature.DockWidgetClosable)
            dock.visibilityChanged.connect(lambda visible, name=name: self._on_dock_shown(name, visible))
            self.docks[name] = dock

    def _build_panel(self, name: str) -> Panel:
        """Build the panel into its dock, wire it, and show it the current trace and selection at once."""
        panel = self._entries[name].load()()
        self._built[name] = panel
        dock = self.docks[name]
        placeholder = dock.widget()
        dock.setWidget(panel)
        placeholder.deleteLater()
        self.controller.connect_panel(panel)
        panel.sigDrawFailed.connect(lambda p=panel: self.statusBar().showMessage(
            f"the {p.title} panel could not draw this sentence", 8000))
        # A click that selects something (a heatmap cell, a chip...) makes that panel Ctrl+E's default.
        panel.sigSelect.connect(lambda _change, name=name: setattr(self, "_current_panel", name))
        if hasattr(panel, "set_reference_trace"):
            panel.set_reference_trace(self._reference)
        self._update_panel(panel, self.controller.trace)
        self._guarded(panel, Panel.flush, panel)
        return panel

    @property
    def panels(self) -> list[Panel]:
        """Every panel, in registry order (the ones not built yet are built now)."""
        return [self.panel(name) for name in self._entries]

    def built_panels(self) -> list[Panel]:
        """The panels built so far (every one on screen is): what to look at without building the rest."""
        return list(self._built.values())

    def _build_status_bar(self) -> None:
        status = self.statusBar()
        # Steady labels: a run changes their text, and the window is laid out again only if its size changed.
        self.tokens_label = SteadyLabel()
        self.backend_label = SteadyLabel()
        self.time_label = SteadyLabel()
        self.parity_label = SteadyLabel()
        # Busy label and Cancel keep their place (a fixed width, never hidden): showing and hiding them on
        # every run re-laid out the status bar each keystroke.
        self.busy_label = SteadyLabel(BUSY_TEXT)
        self.busy_label.setFixedWidth(self.busy_label.fontMetrics().horizontalAdvance(BUSY_TEXT) + 20)
        self.busy_label.setMinimumHeight(self.busy_label.sizeHint().height())   # "…" may stand a line taller than ""
        self.busy_label.setText("")
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop the analysis in progress (Esc)")
        self.cancel_button.clicked.connect(self.controller.cancel)
        self.cancel_button.setEnabled(False)
        self._busy_delay = QTimer(self)   # (Esc cancels at once all the same)
        self._busy_delay.setSingleShot(True)
        self._busy_delay.setInterval(BUSY_DELAY_MS)
        self._busy_delay.timeout.connect(self._say_busy)
        status.addPermanentWidget(self.cancel_button)
        self.interventions_label = QLabel()   # what is switched off or patched (core.interventions.describe)
        self.interventions_label.setObjectName("status_interventions")
        for label in (self.interventions_label, self.busy_label, self.tokens_label, self.backend_label,
                      self.time_label, self.parity_label):
            label.setStyleSheet("QLabel { padding: 0 8px; }")
            status.addPermanentWidget(label)
        self._show_status(self.controller.status())

    def _build_menus(self) -> None:
        menus = self.menuBar()
        file_menu = menus.addMenu("&File")
        self.session_actions = SessionActions(self, file_menu, STATE_VERSION)   # Open / Recent / Save session
        self._action(file_menu, "&Open bundle…", self.choose_bundle, QKeySequence("Ctrl+Shift+O"))
        self._action(file_menu, "&Import model folder…", self.imports.choose_and_import)
        file_menu.addSeparator()
        self._action(file_menu, "&Export figure…", self.choose_figure_export, QKeySequence("Ctrl+E"))
        self._action(file_menu, "Export &all…", self.choose_export_all, QKeySequence("Ctrl+Shift+E"))
        self._action(file_menu, "&Copy figure", self.copy_current_figure, QKeySequence("Ctrl+Shift+C"))
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence("Ctrl+Q"))

        self.view_menu = menus.addMenu("&View")
        for dock in self.docks.values():
            self.view_menu.addAction(dock.toggleViewAction())
        self.view_menu.addSeparator()
        self._action(self.view_menu, "&Reset layout", self.place_default_layout)

        model_menu = menus.addMenu("&Model")
        group = QActionGroup(self)
        self.backend_actions: dict[str, QAction] = {}
        for name, label in BACKEND_LABELS.items():
            action = model_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(name == self.controller.backend)
            action.triggered.connect(lambda _=False, n=name: self.set_backend(n))
            group.addAction(action)
            self.backend_actions[name] = action
        model_menu.addSeparator()
        self._action(model_menu, "&Cancel the running analysis", self.controller.cancel, QKeySequence("Esc"))

        help_menu = menus.addMenu("&Help")
        self._action(help_menu, "&About the model…", self.show_about)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = menu.addAction(text)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(lambda _=False: slot())
        return action

    def _connect_controller(self) -> None:
        c = self.controller
        self.sentence_bar.sigTextEdited.connect(c.set_text)
        self.sentence_bar.sigSubmitted.connect(c.flush)
        c.sigReferenceTrace.connect(lambda reference: setattr(self, "_reference", reference))
        c.sigTraceChanged.connect(self._push_trace)
        c.sigTokensChanged.connect(self._push_tokens)
        c.panel_fields = lambda: panels_fields(p for p in self.built_panels() if self.on_screen(p))
        c.sigSelectionChanged.connect(self._push_selection)
        c.sigNotice.connect(self._show_notice)
        c.sigError.connect(self.show_error)
        c.sigBusy.connect(self._show_busy)
        c.sigBackendChanged.connect(lambda name: self.backend_actions[name].setChecked(True))
        self.sentence_bar.sigNote.connect(self._show_text_note)
        c.sigStatus.connect(self._show_status)
        c.sigHighlight.connect(self.sentence_bar.highlight)
        c.sigTextReplaced.connect(self.sentence_bar.set_text_silently)
        c.sigTextShownUndoably.connect(self.sentence_bar.set_text_undoably)
        c.sigBundleChanged.connect(self._on_bundle_changed)

    # ------------------------------------------------------------ layout
    def place_default_layout(self) -> None:
        """Every panel docked where it belongs, visible, tabs in registry order (View → Reset layout)."""
        placed: dict[str, QDockWidget] = {}
        for dock in self.docks.values():   # start from nothing: re-tabifying docked widgets leaves stray tab bars
            self.removeDockWidget(dock)
        for name, dock in self.docks.items():
            dock.setFloating(False)
            area, partner = DEFAULT_LAYOUT.get(name, (Area.RightDockWidgetArea, "next_token"))
            anchor = placed.get(partner) if partner else None
            if anchor is None and partner:   # its partner is not registered: share a tab with its area's first dock
                anchor = next((d for d in placed.values() if self.dockWidgetArea(d) == area), None)
            if anchor is not None:
                self.tabifyDockWidget(anchor, dock)
            else:
                self.addDockWidget(area, dock)
            dock.show()
            placed[name] = dock
        for name in ("tokens", "attention", "next_token"):
            if name in placed:
                placed[name].raise_()
        # Dock sizes only take once the window has its real size: now if shown, else at the first show.
        self._size_docks_on_show = not self.isVisible()
        if self.isVisible():
            self._size_default_docks()

    def _size_default_docks(self) -> None:
        width, height = self.width(), self.height()
        left = next((self.docks[n] for n in ("attention", "positions", "step") if n in self.docks), None)
        right = next((self.docks[n] for n in ("next_token", "moe") if n in self.docks), None)
        if "tokens" in self.docks:
            tokens_height = max(int(height * 0.34), tokens_dock_height(self.fontMetrics().lineSpacing()))
            # The docks below named too, sharing the height all have now (their tab bar's included, as Qt
            # shares it by these proportions): Qt sizes the Tokens dock alone hardly or not at all.
            below = [dock for dock in (left, right) if dock is not None]
            tabs = max((bar.height() for bar in self.findChildren(QTabBar) if bar.isVisible()), default=0)
            space = self.docks["tokens"].height() + max((dock.height() for dock in below), default=0) + tabs
            self.resizeDocks([self.docks["tokens"], *below], [tokens_height, *[space - tokens_height] * len(below)],
                             Qt.Orientation.Vertical)
        if left is not None and right is not None:
            self.resizeDocks([left, right], [int(width * 0.55), int(width * 0.45)], Qt.Orientation.Horizontal)

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._size_docks_on_show:
            self._size_docks_on_show = False
            QTimer.singleShot(0, self._size_default_docks)

    def _restore_settings(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self._fit_first_window()
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty() and self.restoreState(state, STATE_VERSION):
            self._size_docks_on_show = False   # the saved layout carries its own sizes

    def _fit_first_window(self) -> None:
        screen = self.screen() or QApplication.primaryScreen()
        available = screen.availableGeometry()
        self.resize(first_window_size(available))
        self.move(available.center() - self.rect().center())

    def childEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        """The main window makes a tab bar for each new group of tabbed docks: make its titles whole."""
        super().childEvent(event)
        if event.type() == QEvent.Type.ChildPolished and isinstance(event.child(), QTabBar):
            show_whole_tab_titles(event.child())

    def save_settings(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState(STATE_VERSION))
        self.settings.setValue("sentence/last", self.sentence_bar.text())
        self.settings.setValue("model/last", str(self.controller.bundle.path))
        self.settings.setValue("model/backend", self.controller.backend)
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.save_settings()
        self.imports.shutdown()
        self.controller.shutdown()
        super().closeEvent(event)

    # ------------------------------------------------------------ trace and selection to panels
    @staticmethod
    def on_screen(panel: Panel) -> bool:
        """Visible and not covered: a dock behind another tab is 'visible' to Qt but has nothing on screen."""
        return panel.isVisible() and not panel.visibleRegion().isEmpty()

    def _push_trace(self, trace) -> None:
        for panel in self.built_panels():
            if self.on_screen(panel):
                self._update_panel(panel, trace)
            else:
                self._stale.add(panel.object_name)

    def _push_tokens(self, trace, selection) -> None:
        """The tokens of the run under way, to the panels on screen that read nothing else (Panel.fields == ()):
        they show the new sentence while the model runs. Its trace then reaches every panel (_push_trace)."""
        for panel in self.built_panels():
            if panel.fields != ():
                continue
            if self.on_screen(panel) and panel.object_name not in self._stale:
                panel.post_trace(trace, selection, paced=False)
            else:   # shown later, it draws the controller's trace then, not what it showed before
                self._stale.add(panel.object_name)

    def _push_selection(self, selection) -> None:
        for panel in self.built_panels():
            if self.on_screen(panel) and panel.object_name not in self._stale:
                panel.post_selection(selection)
            else:
                self._stale.add(panel.object_name)

    def _update_panel(self, panel: Panel, trace) -> None:
        """Drawn at the next frame (Panel.post_trace): results faster than frames are drawn once."""
        self._stale.discard(panel.object_name)
        panel.post_trace(trace, self.controller.selection)   # one refresh for trace and selection together

    def flush_redraws(self) -> None:
        """Draw every posted trace and selection now (see Panel.flush): before reading what panels show."""
        for panel in self.built_panels():
            if panel.has_posted():
                self._guarded(panel, Panel.flush, panel)

    def _guarded(self, panel: Panel, method, argument) -> None:
        """One panel failing to draw must not stop the others; the error still reaches sys.excepthook."""
        try:
            method(argument)
        except Exception:
            self.statusBar().showMessage(f"the {panel.title} panel could not draw this sentence", 8000)
            sys.excepthook(*sys.exc_info())

    def _on_dock_shown(self, name: str, visible: bool) -> None:
        if visible:
            self._current_panel = name
            if name not in self._built:
                self._build_panel(name)
            self.controller.fetch_fields(self._built[name].fields)   # a big model's partial trace
            if name in self._stale:
                panel = self.docks[name].widget()
                self._update_panel(panel, self.controller.trace)

    def bring_all_up_to_date(self) -> None:
        for panel in self.panels:
            if panel.object_name in self._stale:
                self._update_panel(panel, self.controller.trace)
        self.flush_redraws()

    def panel(self, object_name: str) -> Panel | None:
        """The registered panel of that name, built now if it was not yet; None if there is none."""
        if object_name not in self._entries:
            return None
        built = self._built.get(object_name)
        return built if built is not None else self._build_panel(object_name)

    # ------------------------------------------------------------ status, notices, errors
    def _show_status(self, status: dict) -> None:
        self.tokens_label.setText(f"{status['tokens']} / {status['context']} tokens")
        self.interventions_label.setText(f"off/patched: {status['interventions']}" if status.get("interventions") else "")
        self.backend_label.setText(f"backend: {STATUS_BACKENDS[status['backend']]}")
        elapsed = status.get("elapsed_ms")
        self.time_label.setText("" if elapsed is None else f"forward {elapsed:.1f} ms")
        parity = status.get("parity")
        self.parity_label.setVisible(parity is not None)
        if parity is not None:
            self.parity_label.setText(f"ONNX↔NumPy max |Δ| {parity:.1e}")

    def _show_busy(self, busy: bool) -> None:
        """A run under way is said (and Cancel offered) once it has lasted BUSY_DELAY_MS."""
        if busy:
            if not self._busy_delay.isActive() and not self.cancel_button.isEnabled():
                self._busy_delay.start()
            return
        self._busy_delay.stop()
        self.busy_label.setText("")
        self.cancel_button.setEnabled(False)

    def _say_busy(self) -> None:
        if self.controller.busy():
            self.busy_label.setText(BUSY_TEXT)
            self.cancel_button.setEnabled(True)

    def _show_text_note(self, text: str) -> None:
        self.text_note.setText(text)
        self.text_note.setVisible(bool(text))

    def _show_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def show_error(self, message: str) -> None:
        """A clear, non-blocking message box (the app keeps running underneath)."""
        self.last_error = message
        self.statusBar().showMessage(message, 10000)
        if self._message_box is None:
            self._message_box = QMessageBox(QMessageBox.Icon.Warning, "Glassbox", "", parent=self)
            self._message_box.setWindowModality(Qt.WindowModality.NonModal)
        self._message_box.setText(message)
        self._message_box.show()

    def _update_title(self, bundle: Bundle) -> None:
        self.setWindowTitle(f"Glassbox — {bundle.name} ({bundle.path})")

    def _on_bundle_changed(self, bundle: Bundle) -> None:
        self._update_title(bundle)
        self.settings.setValue("model/last", str(bundle.path))
        self.statusBar().showMessage(f"opened {bundle.path}", 5000)
        if self._about is not None and self._about.isVisible():
            self.show_about()

    def set_backend(self, name: str) -> None:
        self.backend_actions[name].setChecked(True)
        self.controller.set_backend(name)

    # ------------------------------------------------------------ menus
    def choose_bundle(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a model bundle (a folder with model.onnx)",
                                                  str(self.controller.bundle.path.parent))
        if folder:
            self.controller.open_bundle(folder)

    def show_about(self) -> None:
        bundle = self.controller.bundle
        if self._about is None:
            self._about = QDialog(self)
            self._about.setWindowTitle("About the model")
            self._about.resize(640, 520)
            self._about_text = QTextBrowser()
            self._about_text.setOpenExternalLinks(True)
            QVBoxLayout(self._about).addWidget(self._about_text)
        self._about_text.setMarkdown(f"**Glassbox** — model bundle `{bundle.path}`\n\n---\n\n"
                                     + (bundle.model_card or "_This bundle has no MODEL_CARD.md._"))
        self._about.show()
        self._about.raise_()

    def _on_focus_changed(self, _old, new) -> None:
        widget = new
        while widget is not None and not isinstance(widget, Panel):
            widget = widget.parentWidget()
        if widget is not None:
            self._current_panel = widget.object_name
            self._focused_in_panel = new   # Copy figure copies the figure holding it (a clicked heatmap)

    def current_panel(self) -> Panel | None:
        """The panel the user last worked in (focus or tab shown), else the first visible one."""
        panel = self.panel(self._current_panel) if self._current_panel else None
        if panel is not None and self.on_screen(panel):
            return panel
        first = next(iter(self._entries), None)
        return next((p for p in self.built_panels() if self.on_screen(p)), self.panel(first) if first else None)

    def _last_folder(self) -> str:
        return str(self.settings.value("export/folder", str(Path.home())))

    def choose_figure_export(self) -> None:
        from gui.export_dialog import ExportFigureDialog

        if self.controller.trace is None:
            self.show_error(NO_FIGURE_YET)
            return
        if not self.controller.holds(None):   # a big model's partial trace: once the whole trace is in
            self.controller.fetch_fields(None, self.choose_figure_export)
            return
        self.bring_all_up_to_date()
        owned = [(p, f) for p in self.panels for f in self._figures_of(p)]
        if not owned:
            self.show_error("there is no figure to export")
            return
        # The figure last worked in (a clicked heatmap), else its panel's first. By the panel that made it:
        # a Figure asked for again is a new object (its table a new lambda).
        current = self.current_panel()
        held = self._figure_holding_focus([f for p, f in owned if p is current])
        first = next((i for i, (p, f) in enumerate(owned) if f is held), None)
        if first is None:
            first = next((i for i, (p, _) in enumerate(owned) if p is current), 0)
        figures = [(f"{p.title} — {f.name}", f) for p, f in owned]
        dialog = ExportFigureDialog(figures, first, self._last_folder(), self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            choice = dialog.choice()
            self.export_figure_to(choice.figure, choice.fmt, choice.path, choice.width)

    def choose_export_all(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export every figure and the numbers to a folder",
                                                  self._last_folder())
        if folder:
            self.export_all_to(folder)

    def _figures_of(self, panel: Panel) -> list[Figure]:
        try:
            return list(panel.figures())
        except Exception:
            sys.excepthook(*sys.exc_info())
            return []

    # ------------------------------------------------------------ exporting
    def export_figure_to(self, figure: Figure, fmt: str, path: str | Path, width: int | None = None) -> None:
        """Render one figure now (GUI thread), write it off the UI thread; errors get a message box."""
        from gui import export   # the export modules load at the first export, not at start-up

        path = Path(path)
        try:
            if fmt in ("png", "svg", "pdf"):
                data = export.figure_files(figure, [fmt], width)[f"{figure.name}.{fmt}"]
            elif figure.table is not None:
                data = figure.table().encode("utf-8")
            else:
                raise ValueError(f"the figure {figure.name} has no table of numbers")
        except ValueError as exc:
            self.show_error(f"export failed: {exc}")
            return
        self.controller.write_files(path.parent, {path.name: data},
                                    on_done=lambda paths: self._exported(paths, path.parent),
                                    on_error=lambda message: self.show_error(f"export failed: {message}"))

    def export_all_to(self, folder: str | Path, formats: tuple[str, ...] | None = None,
                      width: int | None = None) -> None:
        """Every panel's figures plus trace.npz and tokens.csv into folder, in `formats` (None: every format
        gui.export writes); a big model's partial trace: once the whole trace is in."""
        from gui import export

        formats = export.FORMATS if formats is None else formats
        if not self.controller.holds(None):
            self.controller.fetch_fields(None, lambda: self.export_all_to(folder, formats, width))
            return
        self.bring_all_up_to_date()
        figures = [f for p in self.panels for f in self._figures_of(p)]
        self.statusBar().showMessage(f"rendering {len(figures)} figures…")
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)   # painting widgets must happen on this thread
        try:
            files = export.all_files(figures, self.controller.trace, formats, width)
        finally:
            QApplication.restoreOverrideCursor()
        self.controller.write_files(folder, files, on_done=lambda paths: self._exported(paths, folder),
                                    on_error=lambda message: self.show_error(f"export failed: {message}"))

    def copy_current_figure(self) -> None:
        """The figure last worked in (the current panel's first, if none of its figures had the focus) to the
        clipboard, as PNG and SVG (gui.export.figure_mime_data)."""
        from gui import export

        if self.controller.trace is None:
            self.show_error(NO_FIGURE_YET)
            return
        self.bring_all_up_to_date()
        panel = self.current_panel()
        figures = self._figures_of(panel) if panel is not None else []
        if not figures:
            self.show_error("there is no figure to copy")
            return
        figure = self._figure_holding_focus(figures) or figures[0]
        export.copy_figure_to_clipboard(figure)
        self.statusBar().showMessage(f"copied {figure.name} (PNG and SVG)", 5000)

    def _figure_holding_focus(self, figures: list[Figure]) -> Figure | None:
        widget = self._focused_in_panel if shiboken6.isValid(self._focused_in_panel) else None
        while widget is not None:
            held = next((f for f in figures if f.widget is widget), None)
            if held is not None:
                return held
            widget = widget.parentWidget()
        return None

    def _exported(self, paths: list, folder) -> None:
        # The next export starts here, only once this one was written: a folder that failed is not offered again.
        self.settings.setValue("export/folder", str(folder))
        self.statusBar().showMessage(f"exported {len(paths)} file(s) to {folder}", 8000)
