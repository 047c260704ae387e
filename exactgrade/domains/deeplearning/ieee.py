"""An independent IEEE 754 evaluator for the numerical tasks' expression trees, on numpy scalars.

The reference programs round with struct and emulate IEEE exceptions by hand; this module lets
numpy's float16/float32/float64 scalars do the arithmetic, so verify's agreement between the
two is evidence, not a tautology. (numpy ships with the `datasets` dependency.)
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any


def outcome(expr: Any, fmt: str) -> str:
    """'nan', 'inf', 'zero' or 'finite': the category of expr evaluated in fmt."""
    import numpy as np

    dtype = {"float16": np.float16, "float32": np.float32, "float64": np.float64}[fmt]
    binary = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    unary = {"exp": np.exp, "log": np.log, "neg": np.negative}

    def evaluate(node: Any) -> Any:
        if not isinstance(node, dict):
            return dtype(float(Fraction(node)))
        name, args = node["op"], node["args"]
        if name == "powi":
            x = evaluate(args[0])
            value = x
            for _ in range(args[1] - 1):
                value = dtype(value * x)
            return value
        values = [evaluate(a) for a in args]
        if name == "sum":
            total = values[0]
            for v in values[1:]:
                total = dtype(total + v)
            return total
        if name == "max":
            return dtype(np.max(np.array(values, dtype=dtype)))
        if name in binary:
            return dtype(binary[name](values[0], values[1], dtype=dtype))
        return dtype(unary[name](values[0], dtype=dtype))

    with np.errstate(all="ignore"):
        value = evaluate(expr)
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf"
    return "zero" if value == 0 else "finite"
