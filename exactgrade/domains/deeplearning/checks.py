"""The deeplearning domain's own verify checks: check(task) -> list of failure reasons.

Every level's own check sits beside its reference in the family module and reaches check() as
``meta["independent"]``: it recomputes the key another way (exactgrade.rational, numpy, 80-digit
mpmath, a finite difference, a state map). This module runs it and keeps what every category
shares: the key holds no float, meta mirrors the inputs, and a task cannot skip its category's
check by leaving meta out; plus the information checks on the data a task keeps in ``meta``
(every distribution and every marginal used in a log is dyadic; the KL-asymmetry pair differs;
mutual information is not identically zero).

A problem of a sound but unposeable draw is ``Degenerate`` (generation redraws it): a log of a
probability that is not a power of two, a zero mutual information, a symmetric KL pair, a named
mistake that gives the key, a float outcome that is not robust, a near tie, a finite difference
across a ReLU kink, an infimum that is not attained. Every other problem (a recomputation that
disagrees with the key, missing or inconsistent meta, a float in the key) is a defect, on which
generation fails closed (exactgrade.family).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import sympy

from exactgrade import rational
from exactgrade.family import Degenerate
from exactgrade.rational.information import joint_table
from exactgrade.task import Task
from exactgrade.verdict import render_path

# The meta key each category needs, so a task cannot skip its category's check by omission.
REQUIRED_META = {
    "information": ("distributions", "joint", "labels", "independent"),
    "backprop": ("independent",),
    "numerical": ("independent",),
    "linalg": ("independent",),
    "optimisation": ("independent",),
}


def check(task: Task) -> list[str]:
    """Every reason this task fails the domain's checks (empty when it passes)."""
    problems = list(_floats(task.expected, ()))
    meta = task.meta
    needed = REQUIRED_META.get(task.category)
    if needed is None:
        problems.append(f"unknown category {task.category!r}; expected one of {sorted(REQUIRED_META)}")
    elif needed and not any(key in meta for key in needed):
        keys = " or ".join(map(repr, needed))
        problems.append(f"this {task.category} task needs meta[{keys}] for its check")
    checks: list[tuple[str | None, Callable[[Task], list[str]]]] = [
        (None, _meta_mirrors_inputs), ("distributions", _distributions), ("joint", _joint),
        ("mutual_information", _mutual_information), ("labels", _label_probabilities),
        ("kl_asymmetry", _kl_asymmetry), ("independent", _independent),
    ]
    for key, run in checks:  # key None: always runs
        if key is None or key in meta:
            try:
                problems += run(task)
            except (rational.RationalError, KeyError, IndexError, TypeError) as error:
                problems.append(f"{key or 'meta'} check could not run: {type(error).__name__}: {error}")
    return problems


def _independent(task: Task) -> list[str]:
    """The check its level attached beside its reference: it recomputes the key another way."""
    return list(task.meta["independent"](task))


def _meta_mirrors_inputs(task: Task) -> list[str]:
    """The checks read meta; it must describe the same data the reference is given."""
    mirrored = ("joint", "network", "batch", "predictions", "labels")
    problems = [f"meta[{key!r}] differs from inputs[{key!r}]" for key in mirrored
                if key in task.meta and key in task.inputs and task.meta[key] != task.inputs[key]]
    inputs = task.inputs
    given = [*inputs.get("distributions", []),
             *(pair[k] for pair in inputs.get("pairs", []) for k in ("p", "q"))]
    listed = task.meta.get("distributions", [])
    problems += [f"input distribution {_show(d)} is missing from meta['distributions']"
                 for d in given if d not in listed]
    return problems


def _floats(value: Any, path: tuple[str | int, ...]) -> list[str]:
    """Every float (or sympy Float atom) inside the expected answer."""
    if type(value) is float:
        return [f"float {value!r} at {render_path(path)}: the key must be exact"]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in _floats(v, (*path, i))]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _floats(v, (*path, k))]
    if isinstance(value, sympy.Basic) and value.atoms(sympy.Float):
        return [f"sympy Float inside {render_path(path)}: the key must be exact"]
    return []


def _rows(task: Task) -> list[Any]:
    return list(task.expected["rows"])


def _show(values: Any) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _distributions(task: Task) -> list[str]:
    problems = []
    for n, p in enumerate(task.meta["distributions"]):
        try:
            q = rational.information.distribution(p)
        except rational.RationalError as error:
            problems.append(f"distribution {n}: {error}")
            continue
        bad = [x for x in q if x != 0 and not rational.is_dyadic(x)]
        if bad:
            problems.append(Degenerate(f"distribution {n} {_show(q)} is not dyadic: {bad[0]} is not a power "
                                       "of two"))
    return problems


def _label_probabilities(task: Task) -> list[str]:
    """A classification loss takes the log of the true class's probability only: that one must
    be a power of two, and every prediction a distribution."""
    problems = []
    predictions, labels = task.meta["predictions"], task.meta["labels"]
    if len(predictions) != len(labels):
        return [f"{len(predictions)} predictions for {len(labels)} labels"]
    for n, (p, y) in enumerate(zip(predictions, labels, strict=True)):
        try:
            q = rational.information.distribution(p)
        except rational.RationalError as error:
            problems.append(f"prediction {n}: {error}")
            continue
        if not rational.is_dyadic(q[y]):
            problems.append(Degenerate(f"prediction {n}: the true class's probability {q[y]} is not a power "
                                       "of two"))
    return problems


def _joint(task: Task) -> list[str]:
    table = joint_table(task.meta["joint"])
    problems = []
    cells = [x for row in table for x in row if x != 0 and not rational.is_dyadic(x)]
    if cells:
        problems.append(Degenerate(f"joint cell {cells[0]} is not a power of two"))
    pa, pb = rational.marginals(table)
    for name, marginal in (("A", pa), ("B", pb)):
        bad = [x for x in marginal if x != 0 and not rational.is_dyadic(x)]
        if bad:
            problems.append(Degenerate(f"marginal of {name} {_show(marginal)} is not dyadic: {bad[0]} is "
                                       "used in a log but is not a power of two"))
    return problems


def _mutual_information(task: Task) -> list[str]:
    bits = rational.mutual_information_bits(task.meta["joint"])
    problems = []
    if bits == 0:
        problems.append(Degenerate("I(A; B) is identically zero for this joint (A and B are independent): a "
                                   "mutual-information task must not be"))
    for i, row in enumerate(_rows(task)):
        for key, value in row.items():
            if not key.startswith("I_"):
                continue
            want = bits if key == "I_bits" else rational.bits_to_nats(bits)
            if value == 0:
                problems.append(Degenerate(f"rows[{i}][{key!r}] is 0: the mutual information must not be "
                                           "zero"))
            elif value != want:
                problems.append(f"rows[{i}][{key!r}] is {value} but exactgrade.rational gives {want}")
    return problems


def _kl_asymmetry(task: Task) -> list[str]:
    p, q = task.meta["kl_asymmetry"]["p"], task.meta["kl_asymmetry"]["q"]
    forward, backward = rational.kl_bits(p, q), rational.kl_bits(q, p)
    if forward == backward:
        return [Degenerate(f"the KL-asymmetry pair is symmetric: D(p || q) = D(q || p) = {forward} bits")]
    found = [row[key] for row in _rows(task) for key in row if key.startswith("KL_")]
    if len(set(found)) < 2:
        return [f"the expected KL values {_show(found)} do not differ"]
    return []


def as_sympy(value: Any) -> sympy.Expr:
    """An exact key value as sympy (never via sympify); TypeError for anything inexact."""
    if type(value) is int or type(value) is Fraction:
        return rational.to_sympy(value)
    if isinstance(value, sympy.Expr):
        return value
    raise TypeError(f"{type(value).__name__} is not an exact number")
