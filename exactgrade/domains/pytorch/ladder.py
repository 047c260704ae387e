"""A pytorch family's five levels from one pytorch_family per level.

Level 1 is the canonical family (its question, reference and sampler unchanged); each upper level
is a pytorch_family of its own (its own question, answer form, reference, independent check and
sampler), so every level keeps the domain's guarantees: the key is the torch reference's output,
recomputed without torch by the level's own independent computation, and refused when exactly
zero without a reason or when the level's refuse/reject names a problem.
"""

from __future__ import annotations

from collections.abc import Mapping

from exactgrade.family import LEVELS, Branch, Family
from exactgrade.task import Task


def laddered(base: Family, upper: Mapping[int, Family], *, levels: str, varying: tuple[str, ...] = (),
             constant: Mapping[str, str] | None = None, branches: tuple[Branch, ...] = ()) -> Family:
    """``base`` at level 1 and ``upper[level]`` at levels 2-5, as one Family named like ``base``."""
    per_level = {1: base, **upper}
    if set(per_level) != set(LEVELS):
        raise ValueError(f"family {base.name!r}: levels {sorted(per_level)} given, {list(LEVELS)} needed")

    def build_level(task_id, inputs, level):
        return per_level[level].build(task_id, inputs)

    def sample(draw, level):
        return per_level[level].sample(draw, level)

    def reject(task: Task) -> str | None:
        fam = per_level[task.level or 1]
        return fam.reject(task) if fam.reject is not None else None

    return Family(name=base.name, build=base.build, sample=sample, levels=levels, reject=reject,
                  build_level=build_level, varying=varying, constant=dict(constant or {}), branches=branches)


__all__ = ["laddered"]
