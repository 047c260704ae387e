"""The demo's chart: every bar and every category label stays visible (the legend hides nothing)."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from exactgrade.demo import ENVS, RunResult, Tally, chart_figure
from exactgrade.task import task_defs


def _run(env: str, tallies: dict[str, Tally]) -> RunResult:
    return RunResult("reference", env, f"/runs/{env}", 1.0, tallies, {}, [], [])


def _every_category(tally: Tally) -> list[RunResult]:
    """One run per environment with every registered category, all with the same tally."""
    return [_run(env, {d.category: tally for d in task_defs(domain)}) for env, domain in ENVS.items()]


CHARTS = [
    # (runs, what the bars show): a full bar reaches the top of the axes, where the legend used to sit
    (_every_category(Tally(rollouts=4, passed=4)), "all passed"),
    (_every_category(Tally(rollouts=4, passed=1, flagged=3)), "passed and flagged stacked to the top"),
    ([_run("scaling-env", {"roofline": Tally(rollouts=2, flagged=2)})], "one category, all flagged"),
    (_every_category(Tally(rollouts=4, wrong=4)), "nothing passed"),
]


@pytest.mark.parametrize(("runs", "shows"), CHARTS)
def test_the_legend_covers_no_bar_and_no_label(runs: list[RunResult], shows: str) -> None:
    figure = chart_figure("reference", runs)
    renderer = FigureCanvasAgg(figure).get_renderer()  # the PNG's renderer
    figure.draw(renderer)
    (ax,) = figure.axes
    (legend,) = figure.legends
    box = legend.get_window_extent(renderer)
    assert not box.overlaps(ax.get_window_extent(renderer)), shows
    labels = ax.get_xticklabels()
    assert len(labels) == sum(len(r.by_category) for r in runs)
    for label in [*labels, ax.title]:
        assert not box.overlaps(label.get_window_extent(renderer)), label.get_text()
    inside = figure.bbox
    for artist in [legend, ax.title, *labels]:
        extent = artist.get_window_extent(renderer)
        assert inside.contains(extent.x0, extent.y0) and inside.contains(extent.x1, extent.y1), \
            f"{artist} is cut off"


SEGMENTS = [
    # (tally, heights of the passed / flagged / wrong segments)
    (Tally(rollouts=4, passed=4), (1.0, 0.0, 0.0)),
    (Tally(rollouts=4, wrong=4), (0.0, 0.0, 1.0)),
    (Tally(rollouts=4, passed=1, flagged=1, wrong=2), (0.25, 0.25, 0.5)),
]


@pytest.mark.parametrize(("tally", "heights"), SEGMENTS)
def test_every_bar_shows_passed_flagged_and_wrong_stacked_to_the_whole(tally: Tally, heights) -> None:
    """A mutant run (every answer wrong) must show full red bars, not empty axes."""
    (ax,) = chart_figure("mutant", [_run("scaling-env", {"roofline": tally})]).axes
    segments = {container.get_label(): container.patches[0] for container in ax.containers}
    assert list(segments) == ["passed", "harness failure (flagged)", "wrong (scored 0)"]
    assert tuple(bar.get_height() for bar in segments.values()) == heights
    assert segments["wrong (scored 0)"].get_y() == heights[0] + heights[1]
    assert sum(heights) == 1.0
