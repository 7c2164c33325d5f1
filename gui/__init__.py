"""Glassbox GUI: PySide6 + pyqtgraph. Imports core, never the reverse; stays thin."""
