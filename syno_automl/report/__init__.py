"""Reports of a search, one module a section: the Pareto points and plot (pareto), the trials (trials), the
figures found after the search (reevaluation: ``reevaluate``; latency: ``tune``), the final stage's verdict (final)
and the cost front (front).
"""
from __future__ import annotations

from syno_automl import lazy_attributes

_NAMES = {
    "Point": "pareto",
    "points_of": "pareto",
    "latency_points": "pareto",
    "latency_schedules": "pareto",
    "latency_devices": "pareto",
    "pareto_front": "pareto",
    "Series": "pareto",
    "CostAxis": "pareto",
    "plot_pareto": "pareto",
    "plot_loss_curves": "trials",
    "canonical_rate_table": "trials",
    "trial_table": "trials",
    "Reevaluation": "reevaluation",
    "number_text": "reevaluation",
    "search_label": "reevaluation",
    "reevaluations_of": "reevaluation",
    "reevaluation_series": "reevaluation",
    "reevaluation_table": "reevaluation",
    "LatencyFigure": "latency",
    "latency_figures": "latency",
    "latency_series": "latency",
    "latency_table": "latency",
    "final_table": "final",
    "verdict_section": "final",
    "final_series": "final",
    "plot_final": "final",
    "search_budget": "final",
    "front_points": "front",
    "front_table": "front",
    "plot_cost_front": "front",
}
__all__ = list(_NAMES)

__getattr__ = lazy_attributes(__name__, _NAMES)
