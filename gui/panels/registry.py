"""The panels the main window docks, in their default order. One import line per panel."""
from __future__ import annotations


def panel_classes() -> list[type]:
    """Imported lazily so that importing gui.panels does not pull in every panel."""
    classes: list[type] = []
    # Each panel file adds itself here, in dock order:
    from gui.panels.tokens_panel import TokensPanel; classes.append(TokensPanel)  # noqa: E702
    from gui.panels.attention_panel import AttentionPanel; classes.append(AttentionPanel)  # noqa: E702
    from gui.panels.next_token_panel import NextTokenPanel; classes.append(NextTokenPanel)  # noqa: E702
    from gui.panels.positions_panel import PositionsPanel; classes.append(PositionsPanel)  # noqa: E702
    from gui.panels.moe_panel import MoePanel; classes.append(MoePanel)  # noqa: E702
    from gui.panels.step_panel import StepPanel; classes.append(StepPanel)  # noqa: E702
    from gui.panels.interventions_panel import InterventionsPanel; classes.append(InterventionsPanel)  # noqa: E702
    from gui.panels.patching_panel import PatchingPanel; classes.append(PatchingPanel)  # noqa: E702
    from gui.panels.occlusion_panel import OcclusionPanel; classes.append(OcclusionPanel)  # noqa: E702
    from gui.panels.head_roles_panel import HeadRolesPanel; classes.append(HeadRolesPanel)  # noqa: E702
    from gui.panels.logit_lens_panel import LogitLensPanel; classes.append(LogitLensPanel)  # noqa: E702
    from gui.panels.attribution_panel import AttributionPanel; classes.append(AttributionPanel)  # noqa: E702
    from gui.panels.parity_panel import ParityPanel; classes.append(ParityPanel)  # noqa: E702
    return classes
