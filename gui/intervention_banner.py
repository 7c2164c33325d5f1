"""The strip over a panel saying what the run it shows has switched off or patched (hidden for a plain run)."""
from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

BANNER_STYLE = "QLabel { background: #fff1b8; color: #5a4300; border: 1px solid #e0c060; padding: 2px 6px; }"


def interventions_text(trace) -> str:
    """"" for no trace or a plain run, else one line naming every intervention of the run."""
    interventions = getattr(trace, "interventions", None)
    described = interventions.describe() if interventions is not None else ""
    return f"Intervened run: {described}" if described else ""


class InterventionBanner(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("intervention_banner")
        self.setStyleSheet(BANNER_STYLE)
        self.setWordWrap(True)
        self.hide()

    def show_for(self, trace) -> None:
        text = interventions_text(trace)
        self.setText(text)
        self.setVisible(bool(text))
