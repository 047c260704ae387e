"""The kinds of value a graded answer can hold, and the tensor value object.

Exact: int (never bool), fractions.Fraction, sympy exact expressions (no Float atoms), which may
contain the free symbols a task declares (exactgrade._symbolic).
Approximate: float (including nan/inf). Categorical: str, bool, None.
Tensors: TensorValue. Containers: list and str-keyed dict of the above.

This module imports nothing from the rest of exactgrade (the sandbox worker ships it
beside wire.py), and torch only lazily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# dtype name -> element kind. Names are torch's short names ("float32", not "torch.float32").
FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
INT_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64"})
BOOL_DTYPES = frozenset({"bool"})
DTYPES = FLOAT_DTYPES | INT_DTYPES | BOOL_DTYPES


def dtype_family(dtype: str) -> str:
    """'float', 'int' or 'bool' for a dtype name in DTYPES."""
    if dtype in FLOAT_DTYPES:
        return "float"
    if dtype in INT_DTYPES:
        return "int"
    if dtype in BOOL_DTYPES:
        return "bool"
    raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")


@dataclass(frozen=True, slots=True)
class TensorValue:
    """A tensor as plain data: dtype name, shape, and flat row-major elements.

    Elements are float for float dtypes, int for integer dtypes, bool for bool.
    Frozen and hashable, so it can sit inside answer keys and cache keys.
    """

    dtype: str
    shape: tuple[int, ...]
    data: tuple[Any, ...]

    def __post_init__(self) -> None:
        family = dtype_family(self.dtype)
        if type(self.shape) is not tuple or any(type(n) is not int or n < 0 for n in self.shape):
            raise ValueError(f"shape={self.shape!r} must be a tuple of non-negative ints")
        if type(self.data) is not tuple:
            raise ValueError(f"data must be a tuple, got {type(self.data).__name__}")
        if len(self.data) != math.prod(self.shape):
            raise ValueError(f"data has {len(self.data)} elements but shape {self.shape} needs "
                             f"{math.prod(self.shape)}")
        element_type = {"float": float, "int": int, "bool": bool}[family]
        for x in self.data:
            if type(x) is not element_type:
                raise ValueError(f"dtype {self.dtype} needs {element_type.__name__} elements, "
                                 f"got {type(x).__name__}")

    @classmethod
    def from_torch(cls, tensor: Any) -> TensorValue:
        """Convert a torch.Tensor (any device, detached) to a TensorValue."""
        dtype = str(tensor.dtype).removeprefix("torch.")
        family = dtype_family(dtype)
        flat = tensor.detach().cpu().reshape(-1)
        if dtype == "bfloat16" or dtype == "float16":
            flat = flat.to(dtype=__import__("torch").float32)
        cast = {"float": float, "int": int, "bool": bool}[family]
        return cls(dtype, tuple(int(n) for n in tensor.shape), tuple(cast(x) for x in flat.tolist()))

    def to_torch(self) -> Any:
        """Build the equivalent torch.Tensor (requires torch)."""
        import torch

        dtype = getattr(torch, self.dtype)
        return torch.tensor(list(self.data), dtype=dtype).reshape(self.shape)


def typed_equal(a: Any, b: Any) -> bool:
    """a and b have identical types and values all the way down (the check a round trip needs).

    nan equals nan, -0.0 differs from 0.0, 2 differs from 2.0 and from Fraction(2), a tuple is
    not a list, dict key order does not count, and sympy expressions must be structurally equal.
    """
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if type(a) is list or type(a) is tuple:
        return len(a) == len(b) and all(typed_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return set(a) == set(b) and all(typed_equal(a[key], b[key]) for key in a)
    if type(a) is TensorValue:
        return a.dtype == b.dtype and a.shape == b.shape and typed_equal(a.data, b.data)
    return bool(a == b)  # None, bool, int, str, Fraction; sympy compares structurally
