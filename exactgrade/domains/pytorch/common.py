"""Shared pieces of the pytorch domain: the policy, the conventions text, answer schemas,
input tensors and the level builder.

Nothing here imports torch at module level: the core and the other domains must import
without it, and the task list (TASKS) must exist even where torch is missing.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from exactgrade.domains.pytorch.exact import shape_and_flat
from exactgrade.family import Draw, Level, Reject
from exactgrade.policy import AllClose, Exact
from exactgrade.task import Task, TaskDef
from exactgrade.values import TensorValue, dtype_family

TORCH_VERSION = "2.13.0"
INSTALL_HINT = (f"the pytorch domain needs torch: pip install torch=={TORCH_VERSION} (the CPU build), "
                "then install this project")
POLICY = AllClose(rtol=1e-5, atol=1e-7)
SYMBOLIC_POLICY = Exact()  # a task whose answer holds an ExprSpec: decided by the engine's symbolic equality
PROFILE = "torch"  # the sandbox profile the references need
CATEGORIES = ("tensor_ops", "nn_modules", "autograd", "losses", "optim")


class TorchMissing(ImportError):
    """Raised when a pytorch task is materialised or checked on a machine without torch."""


def require_torch() -> ModuleType:
    """The torch module, or TorchMissing saying how to install it."""
    try:
        import torch
    except ImportError as error:
        raise TorchMissing(INSTALL_HINT) from error
    return torch


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A tensor in the answer: its dtype name and exact shape."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        dtype_family(self.dtype)

    def render(self) -> str:
        shape = "(" + ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"
        return f"<{self.dtype} tensor of shape {shape}>"


@dataclass(frozen=True, slots=True)
class ScalarSpec:
    """A Python number in the answer: 'int' or 'float'."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in ("int", "float"):
            raise ValueError(f"kind={self.kind!r} must be 'int' or 'float'")

    def render(self) -> str:
        return f"<Python {self.kind}>"


@dataclass(frozen=True, slots=True)
class ExprSpec:
    """An exact sympy expression in the task's declared symbols (sympy Symbol inputs, by name),
    graded exactly as a function of them (exactgrade._symbolic), never under AllClose."""

    symbols: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.symbols or any(type(s) is not str or not s.isidentifier() for s in self.symbols):
            raise ValueError(f"symbols={self.symbols!r} must be a non-empty tuple of identifiers")

    def render(self) -> str:
        return f"<sympy expression in {', '.join(self.symbols)}>"


Spec = TensorSpec | ScalarSpec | ExprSpec
Answer = tuple[Mapping[str, Spec], ...]


PY_INT = ScalarSpec("int")
PY_FLOAT = ScalarSpec("float")


def f32(*shape: int) -> TensorSpec:
    return TensorSpec("float32", tuple(shape))


def i64(*shape: int) -> TensorSpec:
    return TensorSpec("int64", tuple(shape))


def render_answer(answer: Answer) -> str:
    """result = {"rows": [{"y": <float32 tensor of shape (2, 3)>}]}, said to be a single answer row
    when it is one: "row" also means a tensor's row, and a small model split a tensor into rows."""
    rows = ", ".join("{" + ", ".join(f'"{k}": {s.render()}' for k, s in row.items()) + "}" for row in answer)
    single = "  (a single answer row: each key holds its whole value)" if len(answer) == 1 else ""
    return f'result = {{"rows": [{rows}]}}{single}'


def _is_float32(x: float) -> bool:
    return struct.unpack("<f", struct.pack("<f", x))[0] == x


def tensor(dtype: str, nested: Any) -> TensorValue:
    """An input tensor from a nested list. float32 elements must be exactly representable in
    float32, so that torch and the independent Fraction arithmetic start from the same numbers."""
    shape, flat = shape_and_flat(nested)
    if not flat:
        raise ValueError("empty tensors are not valid inputs")
    family = dtype_family(dtype)
    if family == "float":
        flat = [float(x) for x in flat]
        bad = [x for x in flat if not math.isfinite(x) or (dtype == "float32" and not _is_float32(x))]
        if bad:
            raise ValueError(f"{bad[:3]} are not finite {dtype} values")
    elif family == "int":
        if any(type(x) is not int for x in flat):
            raise ValueError("integer tensors need int elements")
    else:
        raise ValueError("bool input tensors are not used in this domain")
    return TensorValue(dtype, shape, tuple(flat))


def is_symbolic(answer: Answer) -> bool:
    """Whether an answer holds a symbolic leaf. Such a task is graded under Exact() throughout, so
    its other leaves must be exact too (int specs); a float beside a symbol is refused."""
    specs = [spec for row in answer for spec in row.values()]
    if not any(type(spec) is ExprSpec for spec in specs):
        return False
    floats = [spec.render() for spec in specs if spec == PY_FLOAT
              or (type(spec) is TensorSpec and dtype_family(spec.dtype) != "int")]
    if floats:
        raise ValueError(f"a symbolic answer is graded exactly: {floats[0]} cannot sit beside an expression")
    return True


def _describe_input(name: str, value: Any) -> str:
    if type(value).__name__ == "Symbol" and type(value).__module__.startswith("sympy"):
        flags = "".join(f", {a}=True" for a in ("integer", "positive") if getattr(value, f"is_{a}"))
        flags = flags or (", real=True" if value.is_real else "")
        return f"- `{name}`: sympy Symbol, the same as sympy.Symbol({value.name!r}{flags})"
    if isinstance(value, TensorValue):
        return f"- `{name}`: torch.Tensor, dtype torch.{value.dtype}, shape {tuple(value.shape)}"
    return f"- `{name}`: Python {type(value).__name__} = {value!r}"


API_DESCRIPTION = f"""\
Environment: a Python sandbox with the standard library, sympy, numpy and PyTorch {TORCH_VERSION} (CPU \
build). Run code with the execute_code tool. The task's inputs are already defined as variables: tensors as \
torch.Tensor with the stated dtype and shape, numbers as Python int/float. A numpy array is read back as a \
tensor of its dtype and shape, and a numpy scalar as the Python number it holds.

Conventions: PyTorch defaults apply unless the question says otherwise (default dtype float32, \
reduction='mean', biased/unbiased statistics as torch defines them, and so on). Do not change the inputs in \
place. Leave the answer in the variable `result` as a dict {{"rows": [...]}} with exactly the keys and the \
kinds of value the question shows: a `<float32 tensor of shape (2, 3)>` is a torch.Tensor of that shape \
(shape () is a 0-d tensor, e.g. a loss), a `<Python float>` or `<Python int>` is a plain number (use .item()).

Grading (AllClose, rtol=1e-05, atol=1e-07): each element a of a floating-point tensor passes iff \
|a - e| <= 1e-07 + 1e-05 * |e|, where e is the reference computed with torch {TORCH_VERSION} on CPU in \
float32; a Python float likewise. Shapes must match exactly (no broadcasting; a one-element tensor never \
matches a 0-d tensor or a Python number). Integer results (indices, counts, integer arithmetic) must be \
integer-dtype tensors or Python ints and match exactly; a float tensor never matches an integer one. Float \
tensors may be float32 or float64. NaN and infinity never pass. Every key of every row must be right for \
the reward."""


SYMBOLIC_GRADING = """\
Grading (exact, as functions of the symbols): a `<sympy expression in lr>` is an exact sympy expression \
whose only free symbols are the task's symbols (preloaded under their names, with the assumptions shown; \
building them with sympy.Symbol and the same assumptions gives the same symbols). It passes when it equals \
the reference as a function of the symbols: any algebraically equal form passes (expanded, factored, \
nested). No floats (write sympy.Rational(3, 8), or convert an exact float with sympy.Rational(x)); no Abs, \
floor, sign, Min, Max or Piecewise. A `<Python int>` must match exactly. Every key of every row must be \
right for the reward."""

SYMBOLIC_DESCRIPTION = API_DESCRIPTION[:API_DESCRIPTION.index("Grading (AllClose")] + SYMBOLIC_GRADING


def _render(question: str, answer: Answer, inputs: Mapping[str, Any]) -> str:
    require_torch()  # materialising a task runs its torch reference next: fail here, with the install hint
    lines = [" ".join(question.split()), "", "Inputs (already defined in the sandbox):"]
    lines += [_describe_input(name, value) for name, value in inputs.items()]
    lines += ["", "Leave the answer in the variable `result`, exactly in this form:", render_answer(answer)]
    return "\n".join(lines)


def make_task(
    id: str,
    category: str,
    *,
    reference: Callable[..., Any],
    inputs: Mapping[str, Any],
    question: str,
    answer: Answer,
    independent: Callable[..., Any],
    zero_reason: str | None = None,
    tags: tuple[str, ...] = (),
) -> TaskDef:
    """A TaskDef whose prompt shows the question, the inputs and the exact answer form.

    ``independent(**inputs)`` recomputes the rows without torch (exact Fractions or mpmath);
    the domain check requires it to agree with the key under POLICY.
    """
    if category not in CATEGORIES:
        raise ValueError(f"category={category!r} must be one of {CATEGORIES}")
    symbolic = is_symbolic(answer)
    return TaskDef(
        id=id,
        category=category,
        inputs=dict(inputs),
        reference=reference,
        render=lambda task_inputs: _render(question, answer, task_inputs),
        api_description=SYMBOLIC_DESCRIPTION if symbolic else API_DESCRIPTION,
        policy=SYMBOLIC_POLICY if symbolic else POLICY,
        tags=tags,
        zero_reason=zero_reason,
        meta={"answer": answer, "independent": independent},
    )


Inputs = Mapping[str, Any]


def pytorch_level(
    category: str,
    reference: Callable[..., Any],
    independent: Callable[..., Any],
    question: str | Callable[[Inputs], str],
    answer: Answer | Callable[[Inputs], Answer],
    sample: Callable[[Draw, int], Inputs],
    *,
    refuse: Callable[[Inputs], str | None] | None = None,
    reject: Callable[[Task], str | None] | None = None,
    zero_reason: Callable[[Inputs], str | None] | None = None,
    tags: tuple[str, ...] = (),
) -> Level:
    """One level of a pytorch family: its question template and answer form (functions of the
    inputs, so sizes in the text follow the sampled shapes), its torch reference, its independent
    recomputation without torch, and its sampler.

    ``refuse(inputs)`` says why inputs must not be posed (a tie that makes an index ambiguous, an
    instance that no longer makes the task's point); it runs on the sampler's draw, before torch, and
    again on the built task. ``reject(task)`` does the same for reasons that need the key.
    ``zero_reason(inputs)`` explains an index that is exactly 0 (computed exactly from the inputs),
    so such an instance is posed instead of refused as an unexplained zero.

    Every instance carries its ``independent`` recomputation in ``meta``, so the domain check
    confirms a generated key exactly as it confirms a canonical one. Generated instances are also
    refused when a key value is exactly zero (the domain gives no zero_reason) or when ``reject``
    names a problem (ties that make an index ambiguous, a point the task no longer makes).
    """

    def build(task_id: str, inputs: Inputs) -> TaskDef:
        return make_task(task_id, category, reference=reference, independent=independent, inputs=inputs,
                         question=question(inputs) if callable(question) else question,
                         answer=answer(inputs) if callable(answer) else answer, tags=tags,
                         zero_reason=zero_reason(inputs) if zero_reason is not None else None)

    def sample_inputs(draw: Draw, level: int) -> Inputs:
        inputs = sample(draw, level)
        reason = refuse(inputs) if refuse is not None else None
        if reason is not None:
            raise Reject(reason)
        return inputs

    def reject_instance(task: Task) -> str | None:
        from exactgrade.verdict import render_path
        from exactgrade.verify import zero_paths

        problem = refuse(task.inputs) if refuse is not None else None
        if problem is None and reject is not None:
            problem = reject(task)
        zeros = zero_paths(task.expected)
        if task.zero_reason is not None:  # it explains a zero index, never a zero float
            zeros = [path for path in zeros if not _is_integer(_leaf(task.expected, path))]
        if problem is None and zeros:
            problem = f"the key is exactly zero at {render_path(zeros[0])}"
        return problem

    return Level(build, sample_inputs, reject_instance)


def _leaf(value: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _is_integer(value: Any) -> bool:
    return type(value) is int or (type(value) is TensorValue and dtype_family(value.dtype) == "int")
