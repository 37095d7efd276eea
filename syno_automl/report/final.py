"""The report's first section: the final stage's verdict (syno_automl.study.verdict), its table and its figure.

The search's own figures are one seed × a few epochs each, a screening that ranks operators; only the final stage
re-trains the finalists and the baseline alike (same seeds, same budget) and times the whole models, so only it
says whether an operator keeps the baseline's accuracy. The report shows it first; a study without one says so.

Example:
    >>> from syno_automl.study.verdict import Finalist, FinalResult
    >>> base = Finalist("baseline", 0, "the original layers", 1.0, 0.81, [0.81, 0.71], speedup=1.0)
    >>> op = Finalist("ad6c0141110ce7ad", 1, "grouped conv2d", 0.59, 0.62, [0.58, 0.62], speedup=1.46)
    >>> final = FinalResult(base, [op], seeds=2, epochs=1, margin=0.01, timing="torch eager inference")
    >>> print(final_table(final).splitlines()[-1])
    | ad6c0141110ce7ad | 1 | grouped conv2d | 0.600 ± 0.028 | -16.0 pp | no | 1.46× | 0.590x | 0.6200 |
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from syno_automl import vocabulary as V
from syno_automl.report.pareto import Point, Series
from syno_automl.study.verdict import Finalist, FinalResult
from syno_automl.words import counted

__all__ = ["final_table", "verdict_section", "final_series", "plot_final", "search_budget"]


def _difference(final: FinalResult, f: Finalist) -> str:
    d = final.difference(f)
    if d is None:
        return "-"
    # rounded first, so that a difference that rounds to zero reads +0.0, never -0.0
    return f"{round(d * 100, 1) + 0.0:+.1f} pp" if final.maximize else f"{round(d, 3) + 0.0:+.3f} nats"


def final_table(final: FinalResult, search_name: str = "val_acc") -> str:
    """Markdown: the baseline and each finalist re-trained (mean ± sd over the seeds), the difference to the
    baseline, whether it is within the margin, the whole model's speedup, the planned cost and the search's
    one-seed value; the operator the verdict names in bold."""
    rate = any(f.tokens_per_s is not None for f in [final.baseline, *final.candidates])
    lines = [f"| model | trial | description | {final.metric} re-trained (mean ± sd) | vs baseline | "
             f"within {final.margin_text()} | speedup{f' on {final.target}' if final.target else ''} |"
             + (" tokens/s |" if rate else "")
             + f" planned cost | {search_name} in the search |",
             "|---|---:|---|---:|---:|---|---:|" + ("---:|" if rate else "") + "---:|---:|"]
    for f in [final.baseline, *final.candidates]:
        base = f is final.baseline
        label = f"**{f.label}** (named)" if f is final.chosen else f.label
        within = "-" if base else ("yes" if final.within(f) else "no")
        speedup = "-" if f.speedup is None else f.speedup_text()
        tokens = (" - |" if f.tokens_per_s is None else f" {f.tokens_per_s:,.0f} |") if rate else ""
        figure = f.figure() + (f" ({counted(len(f.failures), 'seeds')} failed)" if f.failures else "")
        lines.append(f"| {label} | {'-' if f.trial is None else f.trial} | {f.description.replace('|', '/')} | "
                     f"{figure} | {'-' if base else _difference(final, f)} | {within} | {speedup} |{tokens} "
                     f"{'-' if f.cost_ratio is None else f'{f.cost_ratio:.3f}x'} | "
                     f"{'-' if f.search_value is None else f'{f.search_value:.4f}'} |")
    return "\n".join(lines)


def _plural(count: Any, unit: str) -> str:
    return f"{count} {unit}{'' if count == 1 else 's'}"


def search_budget(settings: dict[str, Any]) -> str:
    """``one seed × 1 epoch each``: what every search trial trained for."""
    if settings.get("task") == "lm":
        return f"one seed × {_plural(settings.get('max_steps', '?'), 'step')} each"
    return f"one seed × {_plural(settings.get('epochs', '?'), 'epoch')} each"


def verdict_section(study: Any, final: FinalResult | None, search_name: str, figure: str | None = None) -> str:
    """The report's first section: the verdict and its table, or why there is none."""
    settings = study.user_attrs.get(V.SETTINGS, {})
    screening = (f"The sections below are the search's figures: {search_budget(settings)}, a screening that ranks "
                 f"operators, not a comparison with the baseline")
    if final is None:
        trials = settings.get("trials")
        again = f"--trials {trials} " if trials is not None else ""
        return ("## Verdict: no final stage\n\n"
                f"No final stage ran for study {study.study_name} (`--finalists 0`, or the search stopped before "
                f"it), so this report has no verdict. {screening}. `syno-automl search --resume {again}"
                f"--finalists 3` re-trains the best operators and the baseline alike and names the fastest one within "
                f"the margin.\n")
    head = (f"## Verdict: the final stage (re-trained alike, {final.budget_text()})\n\n**{final.verdict()}**\n\n")
    if not final.candidates:
        return head + f"{screening}.\n"
    timing = f"the whole model's latency ({final.timing})"
    if final.baseline.latency_ms is not None:
        timing += f"; the baseline's {final.baseline.latency_ms:.3g} ms"
    return (head + final_table(final, search_name) + "\n\n"
            f"Re-trained: every model from scratch with the same {final.seeds} seeds for {final.epochs} "
            f"{final.unit} (a paired comparison). Speedup: {timing}. Planned cost: the search's cost model, vs the "
            f"replaced layers. " + (f"Figure: {figure}. " if figure else "") + f"{screening}.\n")


def final_series(study: Any, final: FinalResult | None, cost: str = V.COST_RATIO,
                 x_of: Callable[[Any], float | None] | None = None) -> list[Series]:
    """The re-trained means at their trials' `cost` (user attr: ``syno.cost_ratio``, ``syno.flops_ratio``) or at
    ``x_of(trial)`` (e.g. the study's speed ratio), a Series that :func:`syno_automl.report.plot_pareto` links to
    the search's points of the same trials."""
    if final is None:
        return []
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    points = []
    for f in [final.baseline, *final.candidates]:
        trial = trials.get(f.trial) if f.trial is not None else None
        if trial is None or f.mean is None:
            continue
        base = f is final.baseline
        x = x_of(trial) if x_of is not None else trial.user_attrs.get(cost)
        x = 1.0 if x is None and base else x  # the replaced layers against themselves
        if isinstance(x, (int, float)):
            points.append(Point(trial.number, None if base else f.label, float(x), float(f.mean), base))
    if not points:
        return []
    return [Series(f"final stage: re-trained mean, {final.budget_text()}", tuple(points))]


def plot_final(final: FinalResult, out_stem: str | Path, title: str) -> list[Path]:
    """``<out_stem>.png`` / ``.svg``. Left: each model's re-trained value (mean, error bar ± sd) against its
    measured speedup, the baseline's mean ± sd as a band, the margin as a dotted line, the named operator ringed.
    Right: per model, the search's one-seed value beside the re-trained one (why the search's figures are not
    the verdict)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_stem = Path(out_stem)
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4), dpi=120, gridspec_kw={"width_ratios": [3, 2]})
    base = final.baseline
    ylabel = "validation accuracy" if final.maximize else f"validation {final.metric}"
    for ax in (left, right):
        if base.mean is not None:
            ax.axhspan(base.mean - (base.sd or 0.0), base.mean + (base.sd or 0.0), color="#cc3311", alpha=0.12,
                       label=f"baseline {base.figure()}")
            line = base.mean - final.margin if final.maximize else base.mean + final.margin
            ax.axhline(line, color="#cc3311", lw=0.8, ls=":", label=f"margin: {final.margin_text()}")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    _speedup_panel(left, final)
    _search_panel(right, final)
    fig.suptitle(title, fontsize=10)
    paths = [out_stem.with_suffix(".png"), out_stem.with_suffix(".svg")]
    for path in paths:
        fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return paths


def _speedup_panel(ax: Any, final: FinalResult) -> None:
    base = final.baseline
    if base.mean is not None:
        ax.errorbar([1.0], [base.mean], yerr=[base.sd or 0.0], fmt="*", ms=14, color="#cc3311", capsize=4,
                    label="baseline (re-trained)")
    timed = sorted((f for f in final.candidates if f.mean is not None and f.speedup is not None),
                   key=lambda f: (f.speedup, f.mean))
    xerr: list[list[float]] = [[], []]  # below and above each speedup: its 95 % interval
    for f in timed:
        assert f.speedup is not None  # timed holds the measured ones
        lo, hi = f.speed_interval() or (f.speedup, f.speedup)
        xerr[0].append(f.speedup - lo)
        xerr[1].append(hi - f.speedup)
    ax.errorbar([f.speedup for f in timed], [f.mean for f in timed], yerr=[f.sd or 0.0 for f in timed], xerr=xerr,
                fmt="o", color="#4477aa", capsize=4, label="finalists (re-trained; speedup's 95 % interval)")
    for i, f in enumerate(timed):   # neighbours' labels staggered above and below their points: no overprint
        ax.annotate(f.label[:6], (f.speedup, f.mean), fontsize=7, xytext=(5, 6 if i % 2 == 0 else -12),
                    textcoords="offset points")
    chosen = final.chosen
    if chosen is not None and chosen.mean is not None and chosen.speedup is not None:
        ax.scatter([chosen.speedup], [chosen.mean], s=260, facecolors="none", edgecolors="#228833", linewidths=2,
                   zorder=5, label=f"named: {chosen.label[:6]}")
    untimed = [f.label[:6] for f in final.candidates if f.mean is not None and f.speedup is None]
    ax.axvline(1.0, color="#777777", lw=0.6, ls="--")
    ax.set_xlabel(f"speedup of the whole model ({final.timing})" + (f"; not timed: {', '.join(untimed)}"
                                                                   if untimed else ""), fontsize=8)
    ax.set_title(f"re-trained, {final.budget_text()}: {final.metric} (mean ± sd) vs speedup", fontsize=9)
    ax.legend(fontsize=7, loc="best")


def _search_panel(ax: Any, final: FinalResult) -> None:
    models: Sequence[Finalist] = [final.baseline, *final.candidates]
    xs = list(range(len(models)))
    searched = [(x, f.search_value) for x, f in zip(xs, models) if f.search_value is not None]
    if searched:
        ax.scatter([x for x, _ in searched], [v for _, v in searched], s=40, facecolors="none",
                   edgecolors="#777777", label="the search (one seed)")
    done = [(x, f) for x, f in zip(xs, models) if f.mean is not None]
    ax.errorbar([x for x, _ in done], [f.mean for _, f in done], yerr=[f.sd or 0.0 for _, f in done], fmt="o",
                color="#4477aa", capsize=4, label="re-trained (mean ± sd)")
    ax.set_xticks(xs, [("baseline" if f is final.baseline else f.label[:6]) + (" *" if f is final.chosen else "")
                       for f in models], fontsize=7, rotation=30)
    ax.set_title("the search's figure vs re-trained (* named)", fontsize=9)
    ax.legend(fontsize=7, loc="best")
