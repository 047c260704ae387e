"""calibration.json: measured pass rates per (family, level) cell, and the pool's band filter.

`python -m exactgrade calibrate` writes it (exactgrade.calibrate); a finite generated pool reads it
to keep only the cells whose pass rate lies within a band (`--env.taskset.calibration FILE
--env.taskset.band 0.1-0.9`): cells every rollout solves, or none does, give a group no advantage
and teach a trainer nothing. Each cell carries its count and a Wilson score interval.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

FORMAT = "exactgrade-calibration-v1"
Z95 = 1.959963984540054
"""The two-sided 95% normal quantile."""


@dataclass(frozen=True)
class Cell:
    family: str
    level: int
    passed: int
    count: int
    """Graded rollouts (flagged harness failures are not counted: trainers drop them too)."""
    flagged: int
    rate: float
    low: float
    high: float
    """The Wilson score interval of the pass rate at 95%."""


def wilson(passed: int, count: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of `passed` successes in `count` trials (0-1 when count is 0)."""
    if count == 0:
        return 0.0, 1.0
    p = passed / count
    centre = (p + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(p * (1 - p) / count + z * z / (4 * count * count)) / (1 + z * z / count)
    return max(0.0, centre - half), min(1.0, centre + half)


def cell(family: str, level: int, passed: int, count: int, flagged: int = 0) -> Cell:
    low, high = wilson(passed, count)
    return Cell(family, level, passed, count, flagged, passed / count if count else math.nan, low, high)


def write(path: Path, env: str, domain: str, cells: Sequence[Cell], meta: dict) -> None:
    document = {"format": FORMAT, "env": env, "domain": domain, **meta,
                "cells": [asdict(c) for c in cells]}
    path.write_text(json.dumps(document, indent=2) + "\n")


def read(path: str | Path) -> tuple[str, list[Cell]]:
    """(domain, cells) of a calibration file; ValueError with the reason for anything else."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"cannot read the calibration file {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"the calibration file {path} is not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path} is not a calibration file (format {FORMAT!r} expected)")
    try:
        cells = [Cell(**c) for c in document["cells"]]
        domain = str(document["domain"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"the calibration file {path} is malformed: {error}") from None
    return domain, cells


def parse_band(text: str) -> tuple[float, float]:
    """`"0.1-0.9"` -> (0.1, 0.9): a pass-rate band within 0-1."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*-\s*([0-9]*\.?[0-9]+)\s*", str(text))
    low, high = (float(match[1]), float(match[2])) if match else (1.0, 0.0)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"band must be LOW-HIGH with 0 <= LOW <= HIGH <= 1 (e.g. 0.1-0.9), got {text!r}")
    return low, high


def cells_in_band(path: str | Path, domain: str, cells: Sequence[tuple[int, str]],
                  band: tuple[float, float]) -> tuple[tuple[int, str], ...]:
    """The (level, family) cells, in their order, that the file measured with a pass rate within
    `band` (a cell it did not measure is dropped: its difficulty is unknown)."""
    measured_domain, measured = read(path)
    if measured_domain != domain:
        raise ValueError(f"the calibration file {path} measured the {measured_domain} domain, not {domain}")
    rates = {(c.level, c.family): c.rate for c in measured if c.count > 0}
    kept = tuple(c for c in cells if c in rates and band[0] <= rates[c] <= band[1])
    if not kept:
        raise ValueError(f"no cell of the pool has a pass rate within {band[0]:g}-{band[1]:g} in {path}")
    return kept
