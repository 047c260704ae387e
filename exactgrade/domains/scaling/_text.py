"""Prompt and api_description text shared by the scaling tasks.

Every hardware number is an input shown in the prompt; every convention is written out in the
api_description, so a task's answer never depends on knowing a real chip.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

_COMMON = """\
You have a Python sandbox with the standard library only (`fractions`, `math`, ...). The task's
inputs are already defined there as Python variables under the names listed in the prompt; exact
values are given as `int` or `fractions.Fraction`.

Answer format: leave the answer in the variable `result` as a dict `{"rows": [...]}` with exactly
the row keys, row order and value types the prompt shows.
- `<number>`: an exact value (int or Fraction) or a float. Either passes when it is within a
  relative 1e-9 of the exact answer: the same formula in any order of operations passes, while a
  dropped factor (a missing (N-1)/N, a factor of 2) or an error of one part in a million fails.
  Do not round.
- `<int>`: a count (chips, devices, batch size, steps...) and must be a Python int, exactly.
- Strings, booleans and None are compared exactly (`"compute"` is not `"Compute"`).

Units and conventions (they hold for every task unless the prompt says otherwise):
- Time in seconds, bandwidth in bytes per second, compute in FLOP/s; 1 FLOP is one multiply or
  one add, so a [m, k] x [k, n] matmul costs 2*m*k*n FLOPs.
- 1 GB = 10**9 bytes; 1 GiB = 2**30 bytes. Memory capacities are given in bytes; answers named
  `*_gib` are in GiB.
- bf16 values take 2 bytes, fp32 values 4 bytes, int8 values 1 byte.
- A quantized format (int8, fp8, int4 weights or cache) counts its values' bytes only: its
  quantization scales and the work of dequantising are ignored (a simplification) unless the
  prompt states them, and its matmuls run at the peak the prompt gives.
- Training a dense model with N parameters on D tokens costs 6*N*D FLOPs (2N forward + 4N
  backward per token); inference costs 2*N FLOPs per generated token.
- Adam mixed-precision training state, as counted here unless the prompt says otherwise, is
  2 + 4 + 4 + 4 = 14 bytes per parameter: bf16 weights, fp32 master weights, fp32 first moment,
  fp32 second moment. This count leaves out the gradients (2 more bytes per parameter in bf16, the
  16 bytes ZeRO counts; 4 in fp32), the activations and temporary buffers: a task that needs them
  states them.
- Ring collectives over N devices, with V the size in bytes of the full (unsharded) array: an
  all-gather or a reduce-scatter moves V*(N-1)/N bytes per device; an all-reduce moves twice that,
  2*V*(N-1)/N. Collective time = bytes per device / per-device link bandwidth.
"""

_CATEGORY = {
    "roofline": """\
Roofline model: an operation with F FLOPs that moves B bytes between memory and the chip takes
max(F / peak_flops, B / bandwidth) seconds (compute and memory traffic overlap perfectly). It is
"compute"-bound when F / peak_flops >= B / bandwidth, else "memory"-bound. Arithmetic intensity
is F / B in FLOPs per byte; the chip's critical intensity is peak_flops / bandwidth.
""",
    "flops": """\
FLOP counting: only matmuls count (no softmax, norms or activations). Training FLOPs are 3x the
forward FLOPs (forward 1x, backward 2x). MFU = (model FLOPs per second actually achieved) /
(number of chips * peak FLOP/s per chip).
""",
    "memory": """\
Memory: a model or a state "fits" when its bytes are at most the capacity. Capacities are given
in bytes; convert bytes to GiB by dividing by 2**30 (and to GB by dividing by 10**9).
""",
    "sharding": """\
Sharding: devices exchange data over links of the stated per-device bandwidth; a device's
collective time is the bytes it sends divided by that bandwidth. Compute time of a device is its
FLOPs / (peak_flops * mfu) when an mfu is given, else FLOPs / peak_flops.
""",
    "inference": """\
Inference: one decode step generates one token for each sequence in the batch. Its time follows
the roofline model: max(FLOPs / peak_flops, bytes read from HBM / hbm_bandwidth), the FLOPs being
2 * n_params per token, the bytes being all weights read once per step plus any KV cache stated.
It is "compute"-bound when FLOPs / peak_flops >= bytes / hbm_bandwidth, else "memory"-bound.
Throughput in tokens per second = batch / step time.
""",
}


SAME_SPEED_ANY_FORMAT = """\
(a simplification: the matmuls run at `peak_flops` whatever the weight format, as when every weight
is widened to bf16 before it is multiplied; it leaves out the cost of that widening and the faster
int8/fp8 peaks of chips that multiply narrow formats natively)"""
"""The quantized-decode convention, stated once: real chips differ on both counts it leaves out."""


BF16_MATMUL = """\
Activations are bf16 (2 bytes); a 1-byte weight is int8 weight-only quantization, widened to bf16
before the multiply, so the matmul runs at the chip's bf16 peak `peak_flops` whatever the weight
format (a simplification: it leaves out the widening's cost and the quantization scales)."""
"""The format convention of the matmul roofline tasks: the bf16 tensor-core peak applies to bf16
operands only, so an fp32 operand (which runs at a fraction of it) is never posed."""


DEQUANT_AT_PEAK = """\
(A simplification: the dequantising FLOPs count at `peak_flops` with the matmul's; on a real chip
they run on the vector units, several times slower than the tensor-core peak, so this understates
what decoding a narrow format costs.)"""
"""Said by every level that charges dequantisation FLOPs: elementwise_roofline says elementwise
work runs on the vector units, and a task must not teach the opposite unsaid."""


INPUT_LISTING = "Inputs (already defined as Python variables in the sandbox):"


_SYMBOLIC_FORMAT = """\
Answer format: leave the answer in the variable `result` as a dict `{"rows": [...]}` with exactly
the row keys and row order the prompt shows.
- `<expression>`: an exact sympy expression in the task's symbols, which are preloaded as sympy
  Symbols under their names (building them with the same assumptions gives the same symbols). It
  passes when it equals the exact answer as a function of the symbols (any algebraically equal
  form passes). No floats (write Rational(3, 7) or Fraction-derived Rationals), and no Abs, floor,
  sign, Min, Max or Piecewise; sqrt is allowed.
"""


def api_description(category: str, symbolic: bool = False) -> str:
    """The shared conventions plus those of one category (a symbolic task's answer format
    instead of the numeric one)."""
    common = _COMMON
    if symbolic:
        start, end = common.index("Answer format:"), common.index("Units and conventions")
        common = common[:start] + _SYMBOLIC_FORMAT + "\n" + common[end:]
        common = common.replace("the standard library only (`fractions`, `math`, ...)",
                                "the standard library (`fractions`, `math`, ...) and sympy")
    return f"{common}\n{_CATEGORY[category]}"


def show(value: Any) -> str:
    """A Python literal for a wire value, readable for large ints (underscores) and exact for
    Fractions."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, Fraction):
        return f"Fraction({value.numerator}, {value.denominator})"
    if isinstance(value, str):
        return repr(value)
    if type(value).__name__ == "Symbol" and type(value).__module__.startswith("sympy"):
        flags = "".join(f", {name}=True" for name in ("integer", "positive") if value.assumptions0.get(name))
        return f"Symbol({value.name!r}{flags})"
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {show(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot show a {type(value).__name__} in a prompt")


def renderer(question: str, answer_shape: str) -> Callable[[Mapping[str, Any]], str]:
    """A render(inputs) function: the question, every input by name, and the answer shape."""

    def render(inputs: Mapping[str, Any]) -> str:
        listed = "\n".join(f"- `{name}` = {show(value)}" for name, value in inputs.items())
        return (
            f"{question.strip()}\n\n"
            f"{INPUT_LISTING}\n{listed}\n\n"
            f"Leave the answer in the variable `result`, exactly in this shape:\n"
            f"result = {answer_shape.strip()}\n"
        )

    return render
