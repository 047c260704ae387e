"""Natural answers read back: the leaf a model writes into `result`, through the
real sandbox (torch and python profiles) and the real comparator. The sandbox sends numpy scalars
and arrays, sympy.Float, Decimal and subclasses of the plain kinds as the plain value they hold;
the host's decoder and comparator stay exactly as strict."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy

from exactgrade.compare import compare
from exactgrade.domains.deeplearning.common import EXACTNESS as DEEPLEARNING_TEXT
from exactgrade.domains.pytorch.common import API_DESCRIPTION as PYTORCH_TEXT
from exactgrade.policy import AllClose, Exact, RelTol
from exactgrade.sandbox import ResultNotEncodable, Sandbox, backends
from exactgrade.task import TaskDef, materialise
from exactgrade.values import TensorValue
from exactgrade.verify import round_trip_problem

ALLCLOSE = AllClose(rtol=1e-5, atol=1e-7)
REL = RelTol(1e-9)


def _tensor(dtype: str, shape: tuple[int, ...], *data) -> TensorValue:
    return TensorValue(dtype, shape, tuple(data))


NP = "import numpy as np\n"
DECIMAL = "import decimal\n"
INT_WITH_LIES = ("class I(int):\n    __eq__ = lambda self, other: True\n    __int__ = lambda self: 5\n"
                 "    __repr__ = lambda self: '5'\n")
FLOAT_WITH_LIES = ("class F(float):\n    __float__ = lambda self: 42.0\n"
                   "    __eq__ = lambda self, other: True\n    __repr__ = lambda self: '42.0'\n")
STR_WITH_LIES = "class S(str):\n    __str__ = lambda self: 'no'\n    __eq__ = lambda self, other: True\n"
LIST_WITH_LIES = "class L(list):\n    __iter__ = lambda self: iter([9])\n    __len__ = lambda self: 1\n"
DICT_WITH_LIES = ("class D(dict):\n    items = lambda self: [('a', 9)]\n"
                  "    __iter__ = lambda self: iter(['a'])\n    __getitem__ = lambda self, key: 9\n")

# (code that leaves `result`, the key, the policy, passes?, a word of the reason)
BOTH_PROFILES = [
    (DECIMAL + "result = decimal.Decimal('1.75')", Fraction(7, 4), Exact(), True, "exact rational"),
    (DECIMAL + "result = decimal.Decimal('0.1')", Fraction(1, 10), Exact(), True, "not the float 0.1"),
    (DECIMAL + "result = decimal.Decimal(1) / 3", Fraction(1, 3), Exact(), False, "exact values differ"),
    (DECIMAL + "result = decimal.Decimal('1.75')", 1.75, REL, True, "passed"),
    (DECIMAL + "result = decimal.Decimal('-Infinity')", -math.inf, REL, True, "passed"),
    (DECIMAL + "result = decimal.Decimal('1e-5000')", Fraction(1, 10**5000), Exact(), False,
     "more than 1000 digits"),
    ("import sympy\nresult = sympy.Float(1.75)", 1.75, REL, True, "passed"),
    ("import sympy\nresult = sympy.Float(1.75)", Fraction(7, 4), Exact(), False, "a float was given"),
    ("import sympy\nresult = sympy.Rational(1, 2) < 1", True, Exact(), True, "passed"),
    (INT_WITH_LIES + "result = I(11)", 11, Exact(), True, "passed"),
    (INT_WITH_LIES + "result = I(12)", 11, Exact(), False, "exact values differ"),
    (FLOAT_WITH_LIES + "result = F(1.75)", 1.75, REL, True, "passed"),
    (FLOAT_WITH_LIES + "result = F(1.0)", 42.0, REL, False, "not close"),
    (STR_WITH_LIES + "result = S('yes')", "yes", Exact(), True, "passed"),
    (STR_WITH_LIES + "result = S('yes')", "no", Exact(), False, "got str 'yes'"),
    (LIST_WITH_LIES + "result = L([1, 2])", [1, 2], Exact(), True, "passed"),
    (DICT_WITH_LIES + "result = D(rows=[1])", {"rows": [1]}, Exact(), True, "passed"),
    ("import collections\nresult = collections.OrderedDict(rows=[3])", {"rows": [3]}, Exact(), True,
     "passed"),
    ("import collections\nP = collections.namedtuple('P', 'a b')\nresult = P(1, 2)", [1, 2], Exact(), True,
     "passed"),
    ("class S(str):\n    __hash__ = lambda self: 1\n    __eq__ = lambda self, other: self is other\n"
     "result = {S('a'): 1, 'a': 2}", {"a": 2}, Exact(), False, "two keys"),
    ("result = True", 1, Exact(), False, "a bool only equals a bool"),
    ("result = 1", True, Exact(), False, "a bool only equals a bool"),
    ("class A:\n    __eq__ = lambda self, other: True\nresult = A()", 1, Exact(), False, "cannot encode"),
    ("result = 1.75 + 0j", 1.75, REL, False, "cannot encode"),
]

TORCH_ONLY = [
    (NP + "result = np.float64(1.75)", 1.75, REL, True, "passed"),
    (NP + "result = np.float64(1.75)", Fraction(7, 4), Exact(), False, "a float was given"),
    (NP + "result = np.float32(0.1)", 0.1, ALLCLOSE, True, "passed"),
    (NP + "result = np.float32(0.1)", 0.1, REL, False, "not close"),
    (NP + "result = np.float16(1.75)", 1.75, REL, True, "passed"),
    (NP + "result = np.int64(11)", 11, Exact(), True, "passed"),
    (NP + "result = np.uint8(255)", 255, Exact(), True, "passed"),
    (NP + "result = np.float64(11)", 11, REL, False, "needs an exact integer"),
    (NP + "result = np.bool_(True)", True, Exact(), True, "passed"),
    (NP + "result = np.bool_(True)", 1, Exact(), False, "a bool only equals a bool"),
    (NP + "result = np.array([1.0, 2.0])", _tensor("float64", (2,), 1.0, 2.0), ALLCLOSE, True,
     "passed"),
    (NP + "result = np.array([[1, 2]], dtype=np.float32)", _tensor("float32", (1, 2), 1.0, 2.0),
     ALLCLOSE, True, "passed"),
    (NP + "result = np.array([1.0, 2.0])", _tensor("float32", (1, 2), 1.0, 2.0), ALLCLOSE,
     False, "shape"),
    (NP + "result = np.arange(3)", _tensor("int64", (3,), 0, 1, 2), ALLCLOSE, True, "passed"),
    (NP + "result = np.arange(3.0)", _tensor("int64", (3,), 0, 1, 2), ALLCLOSE, False,
     "dtype family"),
    (NP + "result = np.array([True, False])", _tensor("bool", (2,), True, False), Exact(), True,
     "passed"),
    (NP + "result = np.array(1.75)", 1.75, ALLCLOSE, False, "a tensor only equals a tensor"),
    (NP + "result = np.array(1.75)", _tensor("float64", (), 1.75), ALLCLOSE, True, "passed"),
    (NP + "result = np.array([1], dtype=np.uint16)", _tensor("int64", (1,), 1), ALLCLOSE, False,
     "dtype uint16"),
    (NP + "result = np.array(['a'])", "a", Exact(), False, "dtype str"),
    (NP + "result = np.complex128(1)", 1.0, REL, False, "no wire value"),
    (NP + "result = np.longdouble(1)", 1.0, REL, False, "no wire value"),
    (NP + "result = np.ma.masked_array([1.0])", _tensor("float64", (1,), 1.0), ALLCLOSE, False,
     "cannot encode"),
    (NP + "result = {np.str_('rows'): [{'y': np.float32(0.5), 'n': np.int32(2)}]}",
     {"rows": [{"y": 0.5, "n": 2}]}, ALLCLOSE, True, "passed"),
    ("import torch\nresult = torch.tensor(1.75)", 1.75, ALLCLOSE, False, "a tensor only equals a tensor"),
    ("import torch\nresult = torch.tensor([1.75]).numpy()", _tensor("float32", (1,), 1.75), ALLCLOSE, True,
     "passed"),
]


def _sandbox(profile: str, inputs: dict | None = None):
    found = backends.probe()
    if all(found.unavailable(b) is not None for b in ("namespaces", "landlock")):
        pytest.skip(f"no isolating backend here (namespaces: {found.namespaces}; landlock: {found.landlock})")
    return Sandbox(inputs, profile=profile)


@pytest.fixture(scope="module")
def torch_sandbox():
    with _sandbox("torch") as sb:
        yield sb


@pytest.fixture(scope="module")
def python_sandbox():
    with _sandbox("python") as sb:
        yield sb


def _grade(sb: Sandbox, code: str, key, policy) -> tuple[bool, str]:
    """What the reward would say: the comparator's verdict, or the read-back refusal as a wrong answer."""
    output = sb.execute_code(code)
    assert "Traceback" not in output, output
    try:
        actual = sb.result()
    except ResultNotEncodable as refused:
        return False, str(refused)
    verdict = compare(key, actual, policy)
    return verdict.ok, verdict.reason or "passed"


def _rows(rows: list[tuple]) -> list:
    return [pytest.param(*row, id=f"{row[0].splitlines()[-1][:50]}~{row[4]}") for row in rows]


@pytest.mark.parametrize(("code", "key", "policy", "ok", "reason"), _rows(BOTH_PROFILES + TORCH_ONLY))
def test_torch_profile(torch_sandbox, code, key, policy, ok, reason) -> None:
    passed, why = _grade(torch_sandbox, code, key, policy)
    assert passed is ok, why
    assert (reason in why) if not ok else why == "passed"


@pytest.mark.parametrize(("code", "key", "policy", "ok", "reason"), _rows(BOTH_PROFILES))
def test_python_profile(python_sandbox, code, key, policy, ok, reason) -> None:
    passed, why = _grade(python_sandbox, code, key, policy)
    assert passed is ok, why
    assert (reason in why) if not ok else why == "passed"


def test_read_back_values_keep_their_exact_types(torch_sandbox) -> None:
    torch_sandbox.execute_code(INT_WITH_LIES + FLOAT_WITH_LIES + "import numpy as np, decimal, sympy\n"
                               "result = [np.float32(0.5), np.int16(-3), np.bool_(False), I(7), F(2.5), "
                               "decimal.Decimal('-0'), sympy.Float(0.25), np.float64('nan')]")
    value = torch_sandbox.result()
    assert [type(v) for v in value] == [float, int, bool, int, float, Fraction, float, float]
    assert value[:7] == [0.5, -3, False, 7, 2.5, 0, 0.25] and math.isnan(value[7])


def test_the_prompts_tell_the_truth_about_numpy(torch_sandbox, python_sandbox) -> None:
    """pytorch prompts (torch profile) say numpy is there; deeplearning ones (python profile): it is not."""
    assert "numpy" in PYTORCH_TEXT.split(".")[0] and "no numpy" not in PYTORCH_TEXT
    assert "numpy is not installed" in DEEPLEARNING_TEXT
    assert torch_sandbox.execute_code("import numpy\nprint(numpy.zeros(2).sum())") == "0.0\n"
    assert "No module named 'numpy'" in python_sandbox.execute_code("import numpy")


# -- answers with free symbols: symbols are declared as inputs, preloaded by name --------

P, M = sympy.symbols("p m", positive=True, integer=True)
BUBBLE = (P - 1) / (M + P - 1)


def bubble_fraction(p, m):
    return (p - 1) / (m + p - 1)


SYMBOLIC_TASK = TaskDef(
    id="sc-symbolic-example", category="pipeline", inputs={"p": P, "m": M}, reference=bubble_fraction,
    render=lambda inputs: ("The symbols p and m are preloaded as sympy Symbols (positive integers; "
                           "sympy.symbols('p m', positive=True, integer=True) makes the same ones). "
                           "Set `result` to the bubble fraction as a sympy expression in p and m."),
    api_description="", policy=Exact())

# (code that leaves `result`, passes?, a word of the reason)
SYMBOLIC = [
    ("result = (p - 1) / (p + m - 1)", True, "passed"),
    ("result = 1 - m / (p + m - 1)", True, "passed"),
    ("import sympy\nq, n = sympy.symbols('p m', positive=True, integer=True)\nresult = (q - 1) / (q + n - 1)",
     True, "passed"),
    ("import sympy\nq, n = sympy.symbols('p m', integer=True, positive=True)\nresult = (q - 1) / (q + n - 1)",
     True, "passed"),
    ("result = (p - 1) / (p + m)", False, "they differ at"),
    ("result = p / (p + m - 1)", False, "they differ at"),
    ("import sympy\nq = sympy.Symbol('p', positive=True)\nresult = (q - 1) / (q + m - 1)", False,
     "the answer's symbol p has assumptions (positive) other than the reference's (integer positive)"),
    ("import sympy\nq = sympy.Symbol('p')\nresult = (q - 1) / (q + m - 1)", False,
     "the answer's symbol p has assumptions (no assumptions)"),
    ("import sympy\nk = sympy.Symbol('k', positive=True, integer=True)\nresult = (k - 1) / (k + m - 1)",
     False,
     "the answer has the symbol k, which the reference does not have (its symbols: m, p)"),
    ("import sympy\nresult = sympy.Abs(p - 1) / (p + m - 1)", True, "passed"),  # sympy drops Abs: p >= 1
    ("import sympy\nx = sympy.Symbol('x', real=True)\nresult = sympy.Abs(x)", False,
     "sympy node Abs is not allowed: a non-analytic function"),
    ("import sympy\nresult = sympy.floor(p / m)", False, "sympy node floor is not allowed: a non-analytic"),
    ("import sympy\nresult = sympy.Piecewise((p, p > m), (m, True))", False,
     "sympy node Piecewise is not allowed: a non-analytic"),
    ("result = (p - 1.0) / (p + m - 1)", False, "sympy node Float is not allowed"),
    ("import sympy\nresult = sympy.Dummy('p')", False, "sympy node Dummy is not allowed"),
]


@pytest.fixture(scope="module")
def symbolic_sandbox():
    with _sandbox("python", {"p": P, "m": M}) as sb:
        yield sb


@pytest.mark.parametrize(("code", "ok", "reason"), SYMBOLIC,
                         ids=[row[0].splitlines()[-1][:60] for row in SYMBOLIC])
def test_symbolic_answers_read_back(symbolic_sandbox, code, ok, reason) -> None:
    passed, why = _grade(symbolic_sandbox, code, BUBBLE, Exact())
    assert passed is ok, why
    assert reason in why


def test_a_task_declares_its_symbols_as_inputs(symbolic_sandbox) -> None:
    """The reference gets the declared Symbols as arguments; its key is a sympy expression in them;
    the reference program run in the sandbox (symbols preloaded by name) reproduces it."""
    task = materialise(SYMBOLIC_TASK, "scaling", "python")
    assert task.expected == BUBBLE
    assert round_trip_problem(task.expected) is None
    symbolic_sandbox.execute_code(task.program)
    assert compare(task.expected, symbolic_sandbox.result(), task.policy).ok
