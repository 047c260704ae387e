"""Natural answers made wire values, inside the sandbox, before the worker encodes `result`.

A correct number must not score 0 for the library it came from, so the sandbox sends what a
model naturally writes as the plain value it stands for; the host's decoder and comparator
stay exactly as strict (this only changes what the sandbox sends):

    numpy float16/32/64, integer, bool_ scalars   float, int, bool
    numpy.ndarray (bool, int8-64, uint8, float16-64)   TensorValue, same dtype and shape
    sympy.Float                                    float (approximate: fails under Exact())
    sympy.true / sympy.false                       True / False
    decimal.Decimal, finite                        Fraction (a finite decimal is an exact rational)
    decimal.Decimal, infinite / NaN                float inf / -inf / nan
    a sympy expression (symbols included)          unchanged: wire.encode writes it as $sym, its
                                                   Symbols by name and domain (a Float, Abs, floor,
                                                   Piecewise or a Dummy inside is refused there)
    a subclass of int, float, str, list, tuple, dict   its base value, built with the base class's
                                                   own methods: its __eq__, __float__, __repr__,
                                                   __iter__ or items() never run

Everything else is passed on unchanged, and wire.encode refuses what it cannot carry. bool stays
bool; a 0-d array stays a 0-d tensor (never a Python number). The walk is bounded like encode:
depth (cycles end there) and element count. Model code shares this process and can replace any
of this; that changes only what it could have sent anyway, and the host checks every reply.
Shipped as `_eginside.readback`; imports only the standard library and `_egwire`.
"""

from __future__ import annotations

import decimal
import sys
from fractions import Fraction
from typing import Any

from _egwire.values import DTYPES, TensorValue
from _egwire.wire import MAX_DEPTH, MAX_ELEMENTS, MAX_INT_DIGITS, WireError

_PLAIN = frozenset({type(None), bool, int, float, str, Fraction, TensorValue})
_NUMPY_FLOATS = ("float16", "float32", "float64")
_NUMPY_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_ARRAY_DTYPES = DTYPES - {"bfloat16"}  # numpy has no bfloat16 of its own


def natural(value: Any) -> Any:
    """value with every natural answer leaf replaced by its wire value (see the module docstring)."""
    return _walk(value, 0, [0])


def _walk(x: Any, depth: int, counter: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"nested deeper than {MAX_DEPTH} levels (or a cycle)")
    _count(counter, 1)
    t = type(x)
    if t in _PLAIN:
        return x
    if t is list or t is tuple:
        return [_walk(item, depth + 1, counter) for item in x]
    if t is dict:
        return _walk_dict(dict.items(x), depth, counter)
    for convert in (_from_numpy, _from_sympy, _from_decimal):
        converted = convert(x, t, counter)
        if converted is not _DECLINED:
            return converted
    return _base_value(x, t, depth, counter)


_DECLINED = object()


def _count(counter: list[int], n: int) -> None:
    counter[0] += n
    if counter[0] > MAX_ELEMENTS:
        raise WireError(f"more than {MAX_ELEMENTS} elements")


def _walk_dict(items: Any, depth: int, counter: list[int]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, item in items:
        if type(key) is not str and issubclass(type(key), str):
            key = str.__str__(key)
        if key in out:
            raise WireError(f"two keys are the string {key[:40]!r}")
        out[key] = _walk(item, depth + 1, counter)  # a key that is not a str: encode refuses it
    return out


def _base_value(x: Any, t: type, depth: int, counter: list[int]) -> Any:
    """A subclass of a plain kind as the plain value it holds (the base class reads its storage)."""
    if issubclass(t, int):  # bool cannot be subclassed, so this is never a bool
        return int.__int__(x)
    if issubclass(t, float):
        return float.__float__(x)
    if issubclass(t, str):
        return str.__str__(x)
    if issubclass(t, list):
        return [_walk(item, depth + 1, counter) for item in list.__iter__(x)]
    if issubclass(t, tuple):
        return [_walk(item, depth + 1, counter) for item in tuple.__iter__(x)]
    if issubclass(t, dict):
        return _walk_dict(dict.items(x), depth, counter)
    return x


def _from_numpy(x: Any, t: type, counter: list[int]) -> Any:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return _DECLINED
    if t is numpy.ndarray:
        return _array(x, counter)
    if t is numpy.bool_:
        return bool(x)
    if t in tuple(getattr(numpy, name) for name in _NUMPY_FLOATS):
        return float(x)
    if t in tuple(getattr(numpy, name) for name in _NUMPY_INTS):
        return int(x)
    if isinstance(x, numpy.generic) and not isinstance(x, numpy.str_):
        raise WireError(f"numpy {t.__name__} has no wire value; convert it to int, float or Fraction")
    return _DECLINED


def _array(array: Any, counter: list[int]) -> TensorValue:
    dtype = array.dtype.name
    if dtype not in _ARRAY_DTYPES:
        raise WireError(f"numpy arrays of dtype {dtype} have no wire dtype (use one of "
                        f"{', '.join(sorted(_ARRAY_DTYPES))})")
    _count(counter, int(array.size))
    return TensorValue(dtype, tuple(int(n) for n in array.shape), tuple(array.reshape(-1).tolist()))


def _from_sympy(x: Any, t: type, counter: list[int]) -> Any:
    sympy = sys.modules.get("sympy")
    if sympy is None:
        return _DECLINED
    if t is sympy.Float:
        return float(x)
    if t is sympy.logic.boolalg.BooleanTrue or t is sympy.logic.boolalg.BooleanFalse:
        return t is sympy.logic.boolalg.BooleanTrue
    return _DECLINED


def _from_decimal(x: Any, t: type, counter: list[int]) -> Any:
    if t is not decimal.Decimal:
        return _DECLINED
    if not x.is_finite():
        return float("nan") if x.is_nan() else (float("-inf") if x.is_signed() else float("inf"))
    sign, digits, exponent = x.as_tuple()
    if len(digits) + abs(exponent) > MAX_INT_DIGITS:  # bound 10**exponent before computing it
        raise WireError(f"Decimal with more than {MAX_INT_DIGITS} digits as a fraction")
    return Fraction(*x.as_integer_ratio())
