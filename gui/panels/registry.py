"""The panels the main window docks, in their default order. One import line per panel."""
from __future__ import annotations


def panel_classes() -> list[type]:
    """Imported lazily so that importing gui.panels does not pull in every panel."""
    classes: list[type] = []
    # Each panel file adds itself here, in dock order:
    return classes
