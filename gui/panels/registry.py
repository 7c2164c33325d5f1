"""The panels the main window docks, in their default order. One line per panel.

A line gives what the panel's dock shows before the panel is built (its object_name and title: the tab
and the View menu) and where its class lives. The main window imports a panel's module only when it
builds the panel, so the panels hidden at start cost nothing at start-up (importing the ten of them
took ~75 ms). tests/gui/test_panel_registry.py holds each line to its class.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PanelEntry:
    object_name: str
    title: str
    where: str   # "module:ClassName"
    imported: type | None = field(default=None, compare=False, repr=False)   # the class, when given one

    def load(self) -> type:
        if self.imported is not None:
            return self.imported
        module, _, name = self.where.partition(":")
        return getattr(importlib.import_module(module), name)

    @classmethod
    def of(cls, panel_class: type) -> PanelEntry:
        """The entry of a class already imported (a window given its own panel classes, a test's among them)."""
        return cls(panel_class.object_name, panel_class.title, f"{panel_class.__module__}:{panel_class.__qualname__}",
                   panel_class)


# Each panel file adds itself here, in dock order:
PANELS = (
    PanelEntry("tokens", "Tokens", "gui.panels.tokens_panel:TokensPanel"),
    PanelEntry("attention", "Attention", "gui.panels.attention_panel:AttentionPanel"),
    PanelEntry("next_token", "Next token", "gui.panels.next_token_panel:NextTokenPanel"),
    PanelEntry("positions", "Positions", "gui.panels.positions_panel:PositionsPanel"),
    PanelEntry("moe", "MoE routing", "gui.panels.moe_panel:MoePanel"),
    PanelEntry("step", "Step by step", "gui.panels.step_panel:StepPanel"),
    PanelEntry("interventions", "Interventions", "gui.panels.interventions_panel:InterventionsPanel"),
    PanelEntry("patching", "Patching", "gui.panels.patching_panel:PatchingPanel"),
    PanelEntry("occlusion", "Occlusion", "gui.panels.occlusion_panel:OcclusionPanel"),
    PanelEntry("head_roles", "Head roles", "gui.panels.head_roles_panel:HeadRolesPanel"),
    PanelEntry("logit_lens", "Logit lens", "gui.panels.logit_lens_panel:LogitLensPanel"),
    PanelEntry("attribution", "Logit attribution", "gui.panels.attribution_panel:AttributionPanel"),
    PanelEntry("parity", "Parity", "gui.panels.parity_panel:ParityPanel"),
)


def panel_classes() -> list[type]:
    """Every panel's class, each module imported now (exports, tests)."""
    return [entry.load() for entry in PANELS]
