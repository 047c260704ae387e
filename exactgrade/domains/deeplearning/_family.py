"""What every deeplearning family shares: the rules a generated, keyed instance must pass on top
of the domain's check() (which build_instance runs on every instance), and small samplers.

The rules: a key number stays small (a model must write it and the grader compare it fast), and
an exact zero in the key is there only when the builder declared why (zero_reason), mirroring
verify's generic check so that no generated instance fails ``verify --generated`` later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from exactgrade.family import (
    Branch,
    Draw,
    Family,
    Level,
    Reject,
    Rule,
    constant_fields,
    five_levels,
)
from exactgrade.task import Task

MAX_KEY_DIGITS = 40
"""A key rational needing more digits than this (numerator or denominator) is rejected."""
MAX_EXPR_NODES = 160
"""A key sympy expression with more nodes than this is rejected (compare stays fast)."""


def deeplearning_family(name: str, levels: Sequence[Level], *, about: str, reject: Rule | None = None,
                        varying: tuple[str, ...] = (), constant: Mapping[str, str] | None = None,
                        branches: tuple[Branch, ...] = ()) -> Family:
    """A family of five Levels (five_levels) whose instances also pass the key-size and
    declared-zero rules, before ``reject`` and each level's own rule."""

    def every_level(task: Task) -> str | None:
        return key_size_problem(task) or zero_problem(task) or (reject(task) if reject else None)

    return five_levels(name, levels, about=about, reject=every_level, varying=varying, constant=constant,
                       branches=branches)


def varying_fields(*paths: str) -> Rule:
    """A level's own rule: each field at ``paths`` takes two values or more in the key (Family.varying
    holds the fields every level's key has)."""
    return lambda task: constant_fields(task.expected, paths)


def key_agrees(task: Task, want: Any) -> list[str]:
    """The problem of a key that differs from its independent recomputation ``want`` (a one-row
    answer may be given unwrapped)."""
    want = want if isinstance(want, dict) and list(want) == ["rows"] else {"rows": [want]}
    if task.expected != want:
        return [f"the key {task.expected} differs from exactgrade.rational, which gives {want}"]
    return []


def answer_field(task: Task, key: str, missing: Any = ...) -> Any:
    """The value of ``key`` in the first row of a task's key (``missing`` when there is none)."""
    rows = task.expected.get("rows") if isinstance(task.expected, dict) else None
    if not rows or not isinstance(rows[0], dict):
        return missing
    return rows[0].get(key, missing)


def single_row(shape: str) -> str:
    """An answer shape in the key's {"rows": [...]} form (a one-row answer is wrapped)."""
    return shape if shape.startswith('{"rows"') else '{"rows": [' + shape + "]}  (a single row)"


def key_size_problem(task: Task) -> str | None:
    import sympy

    from exactgrade.verify import iter_leaves

    limit = 10**MAX_KEY_DIGITS
    for _, leaf in iter_leaves(task.expected):
        if type(leaf) is Fraction or type(leaf) is int:
            if max(abs(Fraction(leaf).numerator), Fraction(leaf).denominator) >= limit:
                return f"a key number needs more than {MAX_KEY_DIGITS} digits"
        elif isinstance(leaf, sympy.Basic):
            if _nodes_over(leaf, MAX_EXPR_NODES):
                return f"a key expression has more than {MAX_EXPR_NODES} nodes"
            for atom in leaf.atoms(sympy.Rational):
                if max(abs(int(atom.p)), int(atom.q)) >= limit:
                    return f"a key expression holds a rational of more than {MAX_KEY_DIGITS} digits"
    return None


def _nodes_over(expr: Any, limit: int) -> bool:
    """More than ``limit`` nodes in the expression tree (counting stops at the limit)."""
    stack, seen = [expr], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return True
        stack.extend(node.args)
    return False


def zero_problem(task: Task) -> str | None:
    zeros = _has_zero(task.expected)
    if zeros and not task.zero_reason:
        return "an exact zero in the key that the builder did not declare"
    if task.zero_reason and not zeros:
        return "a zero_reason but no zero in the key"
    return None


def _has_zero(expected: Any) -> bool:
    """Whether verify's zero_paths finds a zero in the key, answered faster: an irrational sympy
    leaf that evaluates (strict evalf: every digit certain) to a non-zero number cannot be
    exactly zero, so only the leaves evalf cannot settle ask sympy's costlier ``is_zero``."""
    import sympy

    from exactgrade.verify import iter_leaves, zero_paths

    undecided = []
    for _, leaf in iter_leaves(expected):
        if isinstance(leaf, sympy.Basic) and not leaf.is_Rational and leaf.is_number:
            try:
                if leaf.evalf(15, strict=True) != 0:
                    continue
            except (sympy.core.evalf.PrecisionExhausted, ValueError, TypeError):
                pass
        undecided.append(leaf)
    return bool(zero_paths(undecided))


def nonzero_dyadic(draw: Draw, low: Fraction | int, high: Fraction | int, bits: int) -> Fraction:
    """A non-zero multiple of 2**-bits in [low, high] (zero is drawn again)."""
    for _ in range(64):
        value = draw.dyadic(low, high, bits)
        if value != 0:
            return value
    raise Reject("drew only zeros")


def as_int(q: Fraction) -> int | Fraction:
    """An integral Fraction as int (inputs read like the canonical ones: 2, not 2/1)."""
    return q.numerator if q.denominator == 1 else q
