"""Helpers that several roofline families use."""

from __future__ import annotations

from fractions import Fraction

from exactgrade.domains.scaling._task import tie_edge
from exactgrade.task import Task

_ROOFLINE_ROW = (
    '{"rows": [{"batch": <int>, "intensity": <number>, "time_s": <number>, '
    '"bound": "compute" | "memory"}, ...]}  # one row per entry of `batches`, in order'
)


def _intensity_not_tied(task: Task) -> str | None:
    """A row whose intensity equals the chip's critical intensity (compute time = memory time)
    is a tie a float method may break either way."""
    critical = Fraction(task.inputs["peak_flops"], task.inputs["hbm_bandwidth"])
    for number, row in enumerate(task.expected["rows"]):
        problem = tie_edge(
            f"row {number}: the intensity against the critical intensity", row["intensity"], critical
        )
        if problem:
            return problem
    return None
