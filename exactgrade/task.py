"""The task model shared by the three domains.

A task is written as parameters (``inputs``) + a reference solution + a prompt renderer
(a ``TaskDef``). The reference is a self-contained top-level function whose parameters
are the input names; its source, followed by ``result = name(inputs...)``, is exactly the
program a perfect model would send to ``execute_code`` (the ``program``), and the answer key
is that program's executed output, pushed through the wire format. Nothing is hand-written.
A reference may name self-contained helpers with ``uses`` (references of one category that
share a log2 or an entropy write it once); their sources open the program.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from exactgrade.policy import Policy

DOMAINS: dict[str, str] = {
    "deeplearning": "exactgrade.domains.deeplearning",
    "scaling": "exactgrade.domains.scaling",
    "pytorch": "exactgrade.domains.pytorch",
}
ID_PREFIX = {"deeplearning": "dl", "scaling": "sc", "pytorch": "pt"}


class UnknownTask(KeyError):
    """Raised by get_task (exactgrade.lookup) for an id no domain defines."""


@dataclass(frozen=True)
class TaskDef:
    """What a domain author writes: parameters, reference solution, prompt renderer.

    ``render(inputs)`` returns the question (units, exact answer shape, and that the answer
    goes in ``result``). ``zero_reason`` says why an exactly-zero value in the key is right;
    ``tags`` mark headline phenomena; ``meta`` holds data for the domain's own checks.
    """

    id: str
    category: str
    inputs: Mapping[str, Any]
    reference: Callable[..., Any]
    render: Callable[[Mapping[str, Any]], str]
    api_description: str
    policy: Policy
    tags: tuple[str, ...] = ()
    zero_reason: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    family: str | None = None
    """The family (exactgrade.family) this task is an instance of."""
    level: int | None = None
    """For a generated task: its level 1..5, seed and index in its stream (None: canonical)."""
    seed: int | None = None
    index: int | None = None

    @property
    def program(self) -> str:
        """The reference's source plus the call that leaves its output in ``result``."""
        source = reference_source(self.reference)
        args = ", ".join(f"{name}={name}" for name in self.inputs)
        return f"{source.rstrip()}\n\n\nresult = {self.reference.__name__}({args})\n"


F = TypeVar("F", bound=Callable[..., Any])


def uses(*helpers: Callable[..., Any]) -> Callable[[F], F]:
    """Mark a reference as calling these self-contained top-level helpers: the program defines
    them (and theirs, each once) before the reference, so one helper serves many references."""

    def mark(reference: F) -> F:
        reference.__dict__["helpers"] = helpers
        return reference

    return mark


def _with_helpers(reference: Callable[..., Any], seen: list[Callable[..., Any]]) -> None:
    for helper in reference.__dict__.get("helpers", ()):
        if helper not in seen:
            _with_helpers(helper, seen)
            seen.append(helper)


@cache
def reference_source(reference: Callable[..., Any]) -> str:
    """A reference function's source, dedented, after its helpers' (read once: generated tasks
    reuse it)."""
    helpers: list[Callable[..., Any]] = []
    _with_helpers(reference, helpers)
    return "".join(_undecorated(f).rstrip() + "\n\n\n" for f in (*helpers, reference))


def _undecorated(function: Callable[..., Any]) -> str:
    """A function's dedented source from its ``def`` on (a ``uses`` mark is not part of the program)."""
    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    return "".join(source.splitlines(keepends=True)[definition.lineno - 1:])


@cache
def _compiled(program: str) -> Any:
    return compile(program, "<reference>", "exec")


@dataclass(frozen=True)
class Task:
    """A materialised task: what the dataset row and the grader see."""

    id: str
    domain: str
    category: str
    prompt: str
    api_description: str
    inputs: Mapping[str, Any]
    expected: Any
    policy: Policy
    program: str
    tags: tuple[str, ...] = ()
    zero_reason: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    family: str | None = None
    level: int | None = None
    """None for a canonical task; 1..5 for a generated one (with its ``seed`` and ``index``)."""
    seed: int | None = None
    index: int | None = None


TORCH_INSTALL_HINT = "pip install torch==2.13.0 (the CPU build), then pip install -e ."


def preload(inputs: Mapping[str, Any], profile: str = "python") -> dict[str, Any]:
    """The namespace a program starts with, as the sandbox builds it: every input by name,
    TensorValues as torch tensors under the ``torch`` profile."""
    if profile not in ("python", "torch"):
        raise ValueError(f"unknown sandbox profile {profile!r}; expected 'python' or 'torch'")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    if profile == "torch":
        try:
            import torch  # noqa: F401
        except ImportError as error:
            raise ImportError(f"the torch profile needs torch: {TORCH_INSTALL_HINT}") from error
    for name, value in inputs.items():
        namespace[name] = _tensors_to_torch(value) if profile == "torch" else value
    return namespace


def run_program(program: str, inputs: Mapping[str, Any], profile: str = "python") -> Any:
    """Execute a program with ``inputs`` preloaded by name, as the sandbox does, and return
    ``result`` after a wire round trip (so torch tensors become TensorValues).

    Runs in this process: use it only on trusted (reference) programs.
    """
    from exactgrade import wire

    namespace = preload(inputs, profile)
    exec(_compiled(program), namespace)
    if "result" not in namespace:
        raise ValueError("the program did not set `result`")
    return wire.decode(wire.encode(namespace["result"]))


def _tensors_to_torch(value: Any) -> Any:
    from exactgrade.values import TensorValue

    if isinstance(value, TensorValue):
        return value.to_torch()
    if isinstance(value, list):
        return [_tensors_to_torch(v) for v in value]
    if isinstance(value, dict):
        return {k: _tensors_to_torch(v) for k, v in value.items()}
    return value


def domain_module(domain: str) -> Any:
    """The module of a domain: it exports TASKS (tuple of TaskDef), PROFILE and check()."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {sorted(DOMAINS)}")
    return importlib.import_module(DOMAINS[domain])


def materialise(definition: TaskDef, domain: str, profile: str) -> Task:
    """Render the prompt and compute the answer key by running the reference program."""
    program = definition.program
    return Task(
        id=definition.id,
        domain=domain,
        category=definition.category,
        prompt=definition.render(definition.inputs),
        api_description=definition.api_description,
        inputs=definition.inputs,
        expected=run_program(program, definition.inputs, profile),
        policy=definition.policy,
        program=program,
        tags=definition.tags,
        zero_reason=definition.zero_reason,
        meta=definition.meta,
        family=definition.family,
        level=definition.level,
        seed=definition.seed,
        index=definition.index,
    )


@cache
def _materialise(domain: str, task_id: str) -> Task:
    module = domain_module(domain)
    definition = next(d for d in module.TASKS if d.id == task_id)
    return materialise(definition, domain, module.PROFILE)


def task_defs(domain: str) -> tuple[TaskDef, ...]:
    """A domain's task definitions, in id order (nothing is run)."""
    return tuple(domain_module(domain).TASKS)


def tasks(domain: str | None = None) -> list[Task]:
    """Every registered task (of one domain, or of all), answer keys computed by running the
    reference solutions."""
    domains = [domain] if domain is not None else list(DOMAINS)
    return [_materialise(d, t.id) for d in domains for t in task_defs(d)]


def canonical_task(task_id: str) -> Task | None:
    """The canonical task with this id (``dl-000``, ``sc-012``, ``pt-044`` ...), or None."""
    prefix = task_id.split("-", 1)[0]
    for domain, id_prefix in ID_PREFIX.items():
        if prefix == id_prefix and any(t.id == task_id for t in task_defs(domain)):
            return _materialise(domain, task_id)
    return None
