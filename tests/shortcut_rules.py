"""The shortcut rules of a family, checked on many generated instances of one level.

Each domain's table test (tests/domains/<domain>/test_families_<domain>.py) runs ``rule_problems``
for every family and level. A rule is stated once, on the Family (``varying``, ``constant``, ``branches``,
``reject``); this module only counts. EXACTGRADE_RULE_INSTANCES sets the instances per level
(default: the domain's suite default, chosen so the suite stays fast; 200 is the full check).
"""

from __future__ import annotations

import math
import os
from collections import Counter

from exactgrade import wire
from exactgrade.family import LEVELS, constant_fields, family_of, generate

RULE_SEED = 19
COMMONEST_KEY_SHARE = 1 / 4
"""Guessing a level's commonest key may pass at most this share of its instances."""
COMMONEST_KEY_FROM = 12
"""Instances from which the commonest key's share is checked (fewer say little about a share)."""


def pytorch_suite_count(level: int, suite_default: int) -> int:
    """pytorch's suite count: L4 (searches whose answer is a small integer) at enough instances to
    check the commonest key's share (a scan of 20 instances per (family, level) found a shared key
    only at L4); the other levels at the file's default (their generation is the suite's costliest)."""
    return COMMONEST_KEY_FROM if level == 4 else suite_default


def instances(suite_default: int) -> int:
    """Instances per level: EXACTGRADE_RULE_INSTANCES if set, else the domain's suite default."""
    text = os.environ.get("EXACTGRADE_RULE_INSTANCES", "")
    return int(text) if text.strip() else suite_default


def rule_problems(domain: str, family: str, level: int, count: int, seed: int = RULE_SEED) -> list[str]:
    """Every way the first ``count`` instances of (domain, family, level, seed) break the
    family's rules: a varying field constant within an instance, an instance its own reject test
    refuses, a branch reached by fewer than its stated share, counted in whole instances
    (floor(share * count): a branch of share 1/50 is first checked at 50 instances, so the suite
    default checks the common branches and EXACTGRADE_RULE_INSTANCES=200 all of them), or one
    whole key shared by more than COMMONEST_KEY_SHARE of the instances (a constant answer, a None
    answer, a search whose answer space is a handful of values: from COMMONEST_KEY_FROM instances)."""
    fam = family_of(domain, family)
    reached: Counter[str] = Counter()
    keys: Counter[str] = Counter()
    problems = []
    for index in range(count):
        task = generate(domain, seed=seed, index=index, level=level, family=family)
        keys[wire.encode(task.expected)] += 1
        for problem in (constant_fields(task.expected, fam.varying),
                        fam.reject(task) if fam.reject is not None else None):
            if problem is not None:
                problems.append(f"{task.id}: {problem}")
        for branch in fam.branches:
            if level in branch.levels and branch.reached(task):
                reached[branch.name] += 1
    for branch in fam.branches:
        if level in branch.levels and reached[branch.name] < math.floor(branch.share * count):
            problems.append(f"{family} L{level}: branch {branch.name!r} reached by {reached[branch.name]} "
                            f"of {count} instances, below its share {branch.share}")
    key, most = keys.most_common(1)[0]
    if count >= COMMONEST_KEY_FROM and most > COMMONEST_KEY_SHARE * count:
        problems.append(f"{family} L{level}: one key is the answer of {most} of {count} instances, so "
                        f"guessing it passes them: {key[:160]}")
    return problems


__all__ = ["COMMONEST_KEY_FROM", "LEVELS", "RULE_SEED", "instances", "pytorch_suite_count", "rule_problems"]
