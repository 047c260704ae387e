"""What two or more linalg families use (written once)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction as F
from math import isqrt, lcm

from exactgrade import rational
from exactgrade.domains.deeplearning._family import as_int, nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Builder, Draw
from exactgrade.task import Task, TaskDef

CONVENTIONS = (
    "Linear-algebra conventions. A matrix is a list of rows (lists of fractions.Fraction or int); a vector "
    "is a list. All arithmetic is exact over the rationals (sympy.Matrix with sympy.Rational entries, or "
    "fractions.Fraction by hand); rational results are given as Fraction (or int), irrational ones as "
    "exact sympy expressions (e.g. 3/2 - sqrt(5)/2). Least squares minimises ||X w - y||**2 (the normal "
    "equations X^T X w = X^T y); rss is the residual sum of squares ||y - X w||**2. The orthogonal "
    "projection onto the column space of A is P = A (A^T A)^-1 A^T. Eigenvalues are listed in ascending "
    "order, each repeated as often as its algebraic multiplicity. A sample covariance here is the "
    "population covariance (1/n) * sum_k (p_k - mean)(p_k - mean)^T over the n points."
)


def least_squares_rows(X, y):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    x = sympy.Matrix([[exact(v) for v in row] for row in X]).to_DM().to_field()  # over Q
    target = sympy.Matrix([exact(v) for v in y]).to_DM().to_field()
    xt = x.transpose()
    w = (xt * x).lu_solve(xt * target)
    residual = target - x * w
    rss = (residual.transpose() * residual).to_Matrix()[0, 0]
    return {"rows": [{"w": [fraction(v) for v in w.to_Matrix()], "rss": fraction(rss)}]}


def projection_rows(A, vectors):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    a = sympy.Matrix([[exact(x) for x in row] for row in A]).to_DM().to_field()  # over Q
    at = a.transpose()
    p = (a * (at * a).inv() * at).to_Matrix()
    rows = []
    for v in vectors:
        vector = sympy.Matrix([exact(x) for x in v])
        projected = p * vector
        rows.append({"projection": [fraction(x) for x in projected],
                     "residual": [fraction(x) for x in vector - projected]})
    return {"rows": rows}


API = api(CONVENTIONS)


def _small(draw: Draw, nonzero: bool = False) -> F:
    """An entry: a multiple of 1/2 in [-2, 2]."""
    return nonzero_dyadic(draw, -2, 2, 1) if nonzero else draw.dyadic(-2, 2, 1)


def _matmul(a, b) -> list[list[F]]:
    """a @ b exactly, as exactgrade.rational.matmul, but in integers over one common denominator
    per factor (a sampler multiplies many small matrices; Fraction sums cost a gcd per term)."""
    (ia, da), (ib, db) = _scaled(a), _scaled(b)
    columns = list(zip(*ib, strict=True))
    return [[F(sum(x * y for x, y in zip(row, column, strict=True)), da * db) for column in columns]
            for row in ia]


def _scaled(matrix) -> tuple[list[list[int]], int]:
    """(integer matrix, d) with matrix = integer matrix / d."""
    entries = [[x if type(x) is F else F(x) for x in row] for row in matrix]
    d = lcm(*(x.denominator for row in entries for x in row))
    return [[x.numerator * (d // x.denominator) for x in row] for row in entries], d


def _plain(matrix):
    return [[as_int(F(x)) for x in row] for row in matrix]


def invertible_matrix(draw: Draw, n: int) -> list[list]:
    """P L U: unit lower-triangular L, upper-triangular U with a non-zero diagonal, rows permuted."""
    lower = [[F(int(i == j)) if j >= i else _small(draw, nonzero=True) for j in range(n)] for i in range(n)]
    upper = [[_small(draw, nonzero=True) if j >= i else F(0) for j in range(n)] for i in range(n)]
    product = _matmul(lower, upper)
    return _plain([product[i] for i in draw.shuffled(range(n))])


def full_column_rank(draw: Draw, m: int, k: int) -> list[list]:
    """[I_k; R] with its rows shuffled, times an invertible k x k: rank k by construction."""
    stacked = [[F(int(i == j)) for j in range(k)] for i in range(k)]
    stacked += [[_small(draw) for _ in range(k)] for _ in range(m - k)]
    stacked = [stacked[i] for i in draw.shuffled(range(m))]
    return _plain(_matmul(stacked, invertible_matrix(draw, k)))


def is_rational_square(q: F) -> bool:
    """q >= 0 is the square of a rational (numerator and denominator are perfect squares)."""
    return q >= 0 and isqrt(q.numerator) ** 2 == q.numerator and isqrt(q.denominator) ** 2 == q.denominator


SQUARE = {1: (2, 3), 2: (3, 3), 3: (3, 4), 4: (4, 4), 5: (4, 5)}
"""matrix sizes per level"""


def irrational_eigenvalues(task: Task) -> str | None:
    """Level 1's rule for eigenvalues and pca: the tasks are posed for their exact irrational
    answers (the upper levels ask other questions of matrices built with irrational eigenvalues)."""
    import sympy

    for row in task.expected["rows"]:
        if all(isinstance(v, sympy.Rational) or type(v) in (int, F) for v in row["eigenvalues"]):
            return "every eigenvalue of a matrix is rational"
    return None


def first_level(reference, render, tags, independent) -> Builder:
    """The builder of a family's level 1: the stated formula's question, its reference, and its
    independent check (``meta["independent"]``)."""

    def build(task_id, inputs):
        return TaskDef(task_id, "linalg", inputs, reference, render, API, POLICY, tags=tags,
                       meta={"independent": independent})

    return build


BASICS = (
    "Linear-algebra conventions. A matrix is a list of rows (lists of fractions.Fraction or int); a vector "
    "is "
    "a list. All arithmetic is exact over the rationals (sympy.Matrix with sympy.Rational entries, or "
    "fractions.Fraction by hand); rational results are given as Fraction (or int), irrational ones as exact "
    "sympy expressions (e.g. 3/2 - sqrt(5)/2). Positions in a list, rows and columns are counted from 1 in "
    "answers."
)

UPPER_API = api(BASICS)


GIVEN = {"matrices": "list of matrices (lists of rows of Fraction)", "vectors": "list of vectors",
          "A": "matrix", "B": "matrix", "entry": "[row, column], counted from 1",
          "X": "design matrix, one row per observation", "y": "observed targets",
          "x_new": "a new row of X", "bound": "the bound",
          "products": "list of dicts {'A': matrix, 'B': matrix}", "thresholds": "list of numbers c",
          "points": "list of points [x, y] with Fraction coordinates", "direction": "a direction [a, b]",
          "directions": "list of directions [a, b]"}


def _render(word, question, shape, units):
    def render(inputs):
        variables = {k: (d, inputs[k]) for k, d in GIVEN.items() if k in inputs}
        if word is not None:
            variables["question"] = ("the question asked, as a word", word)
        return prompt(question, variables, single_row(shape), units)

    return render


def question_level(word, reference, independent, question, shape, units, zero_reason=None) -> Builder:
    """The builder of one levels 2-5 question: its text, answer shape and units, its reference and
    its independent check (``meta["independent"]``); the inputs carry the question's ``word``, which
    the prompt shows. ``zero_reason(rows)`` says why the key holds an exact zero, if it does."""
    render = _render(word, question, shape, units)

    def build(task_id, inputs):
        if inputs.get("question") != word:
            raise ValueError(f"this level asks {word!r}; the inputs say {inputs.get('question')!r}")
        zero = zero_reason(reference(**inputs)["rows"]) if zero_reason else None
        return TaskDef(task_id, "linalg", inputs, reference, render, UPPER_API, POLICY, tags=("linalg", word),
                       zero_reason=zero, meta={"independent": independent})

    return build


def restated_level(tags, reference, independent, question, shape, units) -> Builder:
    """The builder of a level 2 that asks level 1's question without its formula: level 1's
    reference and check, the question in words (the inputs carry no question word)."""
    render = _render(None, question, shape, units)

    def build(task_id, inputs):
        return TaskDef(task_id, "linalg", inputs, reference, render, UPPER_API, POLICY, tags=tags,
                       meta={"independent": independent})

    return build


def zero_count(reason: str) -> Callable[[list[dict]], str | None]:
    """A count question's zero rule: ``reason`` when some count in the rows is exactly 0."""
    return lambda rows: reason if any(v == 0 for row in rows for v in row.values()) else None


ZERO_COUNT = ("a count in the answer is exactly 0 (a full-rank matrix has nullity 0; a threshold below "
              "every eigenvalue has none below it): that count is the answer")


# The helpers of the levels 2-5 references, written once: each is self-contained (a reference
# that calls one names it with ``uses``, and its program defines it), so it runs in the sandbox.
def rational_matrix(rows):
    """A sympy Matrix of the rows' exact rationals."""
    from fractions import Fraction

    import sympy

    return sympy.Matrix([[sympy.Rational(Fraction(x).numerator, Fraction(x).denominator) for x in row]
                         for row in rows])


def to_fraction(x):
    """A sympy Rational as a Fraction."""
    from fractions import Fraction

    return Fraction(int(x.p), int(x.q))


def ascending_eigenvalues(m):
    """A sympy matrix's eigenvalues, exact, ascending, each as often as its multiplicity."""
    import sympy

    return sorted(m.eigenvals(multiple=True), key=lambda v: sympy.N(v, 50))


# The checks' helpers (exactgrade.rational and numpy, never the references' sympy).
def fractions_of(m) -> list[list[F]]:
    return [[rational.as_fraction(x) for x in row] for row in m]


def rows_agree(task: Task, expected: list) -> list[str]:
    """The problem of a key whose rows differ from exactgrade.rational.matrix's ``expected``."""
    rows = list(task.expected["rows"])
    if rows != expected:
        return [f"the expected rows differ from exactgrade.rational.matrix: {rows} != {expected}"]
    return []


def numpy_eigenvalues(matrices) -> list:
    """Each matrix's eigenvalues by numpy (eigvalsh, ascending), from floats of its entries."""
    import numpy as np

    return [np.linalg.eigvalsh(np.array([[float(x) for x in row] for row in m])) for m in matrices]


def near_numpy(got: list[float], wanted: list) -> list[str]:
    """The problem of exact key values that differ from numpy's beyond 1e-9 (relative)."""
    if any(abs(g - w) > 1e-9 * max(1.0, abs(w)) for g, w in zip(got, wanted, strict=True)):
        return [f"the key {got} differs from numpy's eigenvalues {wanted}"]
    return []


def eigenvalue_identities(task: Task, matrices) -> list[str]:
    """Each row's eigenvalues sum to the trace and multiply to the determinant, exactly, and are
    ascending; one per row of the matrix."""
    import sympy

    problems = []
    for i, (row, m) in enumerate(zip(task.expected["rows"], matrices, strict=True)):
        values = row["eigenvalues"]
        trace = sum((F(m[k][k]) for k in range(len(m))), F(0))
        if len(values) != len(m):
            problems.append(f"rows[{i}]: {len(values)} eigenvalues for a {len(m)}x{len(m)} matrix")
            continue
        if sympy.expand(sympy.Add(*values) - rational.to_sympy(trace)) != 0:
            problems.append(f"rows[{i}]: the eigenvalues do not sum to the trace {trace}")
        if sympy.expand(sympy.Mul(*values) - rational.to_sympy(rational.determinant(m))) != 0:
            problems.append(f"rows[{i}]: the eigenvalues do not multiply to the determinant")
        numeric = [sympy.N(v, 30) for v in values]
        if numeric != sorted(numeric):
            problems.append(f"rows[{i}]: the eigenvalues are not in ascending order")
    return problems
