"""The registered tasks: ids, category counts and order, policies, and self-contained references."""

from __future__ import annotations

import ast
import builtins
import dis
import inspect
from collections import Counter
from types import CodeType

import pytest

from exactgrade.policy import AllClose, Exact, RelTol
from exactgrade.task import DOMAINS, ID_PREFIX, _with_helpers, domain_module, task_defs

# The issues' category counts, in id order.
CATEGORIES = {
    "deeplearning": {"information": 9, "backprop": 8, "optimisation": 7, "linalg": 6, "numerical": 6},
    "scaling": {"roofline": 7, "flops": 8, "memory": 6, "sharding": 7, "inference": 7},
    "pytorch": {"tensor_ops": 16, "nn_modules": 12, "autograd": 6, "losses": 6, "optim": 5},
}
POLICIES = {
    "deeplearning": Exact(),
    "scaling": RelTol(1e-9),
    "pytorch": AllClose(rtol=1e-5, atol=1e-7),
}
PROFILES = {"deeplearning": "python", "scaling": "python", "pytorch": "torch"}
ALL_DEFS = [(domain, d) for domain in DOMAINS for d in task_defs(domain)]


def test_every_domain_is_covered_by_the_tables():
    assert set(CATEGORIES) == set(POLICIES) == set(PROFILES) == set(DOMAINS)


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_ids_are_prefixed_and_in_order(domain):
    ids = [d.id for d in task_defs(domain)]
    total = sum(CATEGORIES[domain].values())
    assert ids == [f"{ID_PREFIX[domain]}-{i:03d}" for i in range(total)]


def test_ids_are_unique_across_domains():
    ids = [d.id for _, d in ALL_DEFS]
    assert len(ids) == len(set(ids)) == 116


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_category_counts_and_order(domain):
    categories = [d.category for d in task_defs(domain)]
    assert Counter(categories) == CATEGORIES[domain]
    expected_order = [c for c, n in CATEGORIES[domain].items() for _ in range(n)]
    assert categories == expected_order


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_domain_exports(domain):
    module = domain_module(domain)
    assert module.PROFILE == PROFILES[domain]
    assert callable(module.check)
    assert type(module.TASKS) is tuple
    assert {d.policy for d in module.TASKS} == {POLICIES[domain]}


def _global_names(code: CodeType) -> set[str]:
    """Names a code object (and every function or comprehension nested in it) looks up as
    globals."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL")}
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _global_names(constant)
    return names


@pytest.mark.parametrize(("domain", "definition"), ALL_DEFS, ids=[d.id for _, d in ALL_DEFS])
def test_reference_is_self_contained(domain, definition):
    reference = definition.reference
    assert inspect.isfunction(reference) and reference.__closure__ is None, "no closures"
    assert reference.__name__ == reference.__qualname__, "a top-level function"
    parameters = list(inspect.signature(reference).parameters)
    assert parameters == list(definition.inputs), "parameters are exactly the input names, in order"
    helpers: list = []
    _with_helpers(reference, helpers)  # declared with exactgrade.task.uses: the program defines them
    allowed = set(dir(builtins)) | {f.__name__ for f in (*helpers, reference)}
    for function in (*helpers, reference):
        assert function.__closure__ is None and function.__name__ == function.__qualname__, function
        uses = _global_names(function.__code__) - allowed
        assert uses == set(), f"{function.__name__} uses module globals {sorted(uses)}"
    tree = ast.parse(definition.program)
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert not [m for m in imported if m.split(".")[0] == "exactgrade"], "imports exactgrade"
    assert definition.program.endswith(f"result = {reference.__name__}("
                                       + ", ".join(f"{n}={n}" for n in definition.inputs) + ")\n")


@pytest.mark.parametrize(("domain", "definition"), ALL_DEFS, ids=[d.id for _, d in ALL_DEFS])
def test_definition_fields(domain, definition):
    assert definition.category in CATEGORIES[domain]
    assert type(definition.api_description) is str and definition.api_description.strip()
    assert all(type(name) is str and name.isidentifier() for name in definition.inputs)
    assert definition.zero_reason is None or definition.zero_reason.strip()
    assert type(definition.tags) is tuple and all(type(t) is str for t in definition.tags)


def _leans_on_a_global(n):
    return [CATEGORIES[d] for d in range(n)]


def _self_contained(n):
    import math

    return [math.comb(n, k) for k in range(n)]


@pytest.mark.parametrize(("function", "names"), [
    (_leans_on_a_global, {"CATEGORIES", "range"}),
    (_self_contained, {"range"}),
])
def test_the_global_scan_sees_into_nested_code(function, names):
    assert _global_names(function.__code__) == names
