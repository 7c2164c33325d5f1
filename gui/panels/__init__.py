"""One panel per file. PANEL_CLASSES lists them in the default dock order (see gui/panels/registry.py)."""
