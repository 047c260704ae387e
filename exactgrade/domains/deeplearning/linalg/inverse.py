"""The inverse family of linalg: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.common import prompt
from exactgrade.domains.deeplearning.linalg.shared import (
    SQUARE,
    _plain,
    first_level,
    fractions_of,
    invertible_matrix,
    question_level,
    rational_matrix,
    rows_agree,
    to_fraction,
)
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import uses


def inverse_rows(matrices):
    from fractions import Fraction

    import sympy

    def exact(q):
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def fraction(x):
        return Fraction(int(x.p), int(x.q))

    rows = []
    for rows_of_a in matrices:
        a = sympy.Matrix([[exact(x) for x in row] for row in rows_of_a]).to_DM().to_field()  # over Q
        inverse = a.inv().to_Matrix()
        rows.append({"det": fraction(a.domain.to_sympy(a.det())),
                     "inverse": [[fraction(x) for x in inverse.row(i)] for i in range(inverse.rows)]})
    return {"rows": rows}


def _inverse_prompt(inputs):
    return prompt("For each square matrix in `matrices`, compute its determinant and its inverse, exactly.",
                  {"matrices": ("list of square matrices (lists of rows of Fraction)", inputs["matrices"])},
                  '{"rows": [{"det": Fraction, "inverse": [[Fraction, ...], ...]}, ...]}  '
                  "(one row per matrix, in order)",
                  "dimensionless (pure numbers)")


def _inverse_without_zeros(draw: Draw, n: int) -> list[list]:
    """An invertible matrix whose inverse has no zero entry (a zero would be an undeclared zero
    in the key): such a matrix is drawn again here, before the reference runs."""
    for _ in range(16):
        matrix = invertible_matrix(draw, n)
        if all(x != 0 for row in rational.inverse(matrix) for x in row):
            return matrix
    raise Reject("every drawn matrix has a zero in its inverse")


def sample_inverse(draw: Draw, level: int) -> dict:
    return {"matrices": [_inverse_without_zeros(draw, draw.integer(*SQUARE[level])) for _ in range(2)]}


def _check_inverse(task):
    return rows_agree(task, [{"det": rational.determinant(m),
                              "inverse": [list(r) for r in rational.inverse(m)]}
                             for m in task.inputs["matrices"]])


LEVEL_1 = Level(first_level(inverse_rows, _inverse_prompt, ("inverse", "determinant"), _check_inverse),
                sample_inverse)


# L2 (derive): the solution of A x = b, no inverse asked
@uses(rational_matrix, to_fraction)
def solutions(matrices, vectors, question=None):
    rows = []
    for a, b in zip(matrices, vectors, strict=True):
        x = rational_matrix(a).LUsolve(rational_matrix([[v] for v in b]))
        rows.append({"x": [to_fraction(v) for v in x]})
    return {"rows": rows}


def _check_solutions(task):
    """Each x satisfies A x = b in exactgrade.rational."""
    inputs = task.inputs
    ok = all(list(rational.matvec(a, row["x"])) == [rational.as_fraction(v) for v in b]
             for a, b, row in zip(inputs["matrices"], inputs["vectors"], task.expected["rows"], strict=True))
    return [] if ok else ["a solution x does not satisfy A x = b"]


def sample_linear_systems(draw: Draw, level: int) -> dict:
    """Two invertible A of order 2-4, each with an integer b."""
    draw.integer(2, 3)  # the order levels 3-5 draw first: drawn here too, so the streams stay as they were
    matrices = [invertible_matrix(draw, draw.integer(2, 4)) for _ in range(2)]
    return {"question": "solve", "matrices": matrices,
            "vectors": [[draw.integer(-3, 3) for _ in m] for m in matrices]}


LEVEL_2 = Level(question_level(
    "solve", solutions, _check_solutions,
    "For each square matrix A in `matrices` and the vector b at the same position in `vectors`, give the "
    "vector x with A x = b, exactly.",
    '{"rows": [{"x": [Fraction, ...]}, ...]}  (one row per matrix, in order)', "dimensionless"),
    sample_linear_systems)


# L3 (compose): det(A B) and the trace of (A B)^-1
@uses(rational_matrix, to_fraction)
def product_det_and_trace_inverse(A, B, question=None):
    ab = rational_matrix(A) * rational_matrix(B)
    return {"rows": [{"det": to_fraction(ab.det()), "trace_inverse": to_fraction(ab.inv().trace())}]}


def _check_product(task):
    """det(A) det(B), and the trace of B^-1 A^-1, by Gauss-Jordan."""
    a, b = task.inputs["A"], task.inputs["B"]
    inverse = rational.matmul(rational.inverse(b), rational.inverse(a))
    return key_agrees(task, {"det": rational.determinant(a) * rational.determinant(b),
                             "trace_inverse": sum((inverse[i][i] for i in range(len(inverse))), F(0))})


def sample_matrix_pair(draw: Draw, level: int) -> dict:
    """Two invertible matrices of one order, 2 or 3."""
    n = draw.integer(2, 3)
    return {"question": "product", "A": invertible_matrix(draw, n), "B": invertible_matrix(draw, n)}


LEVEL_3 = Level(question_level(
    "product", product_det_and_trace_inverse, _check_product,
    "Let C = A B (the matrix product). Give the determinant of C and the trace (sum of the diagonal "
    "entries) of the inverse of C, exactly.",
    '{"det": Fraction, "trace_inverse": Fraction}', "dimensionless"), sample_matrix_pair)


# L4 (inverse): the value of one entry that makes A singular
@uses(rational_matrix)
def with_entry(a, i, j, t):
    """The matrix a with its entry (i, j), counted from 0, replaced by t."""
    m = rational_matrix(a)
    m[i, j] = t
    return m


@uses(with_entry, to_fraction)
def singular_entry(A, entry, question=None):
    import sympy

    i, j = entry[0] - 1, entry[1] - 1
    t = sympy.Symbol("t")
    det = sympy.expand(with_entry(A, i, j, t).det())
    slope = det.coeff(t, 1)
    return {"rows": [{"t": None if slope == 0 else to_fraction(-det.coeff(t, 0) / slope)}]}


def _check_singular_entry(task):
    """A is singular at the key's t (Gauss-Jordan); for None, the determinant does not depend on t."""
    inputs = task.inputs
    i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

    def at(t):
        m = fractions_of(inputs["A"])
        m[i][j] = rational.as_fraction(t)
        return m

    t = task.expected["rows"][0]["t"]
    if t is None:
        same = rational.determinant(at(0)) == rational.determinant(at(1)) != 0
        return [] if same else ["the key says no t is singular, but the determinant depends on t"]
    return [] if rational.determinant(at(t)) == 0 else [f"A is not singular at t = {t}"]


def _matrix_and_entry(draw: Draw) -> tuple[list[list], list[int]]:
    """An invertible 3x3 and one of its entries, [row, column] counted from 1."""
    a = invertible_matrix(draw, 3)
    return a, [draw.integer(1, 3), draw.integer(1, 3)]


def sample_entry_to_make_singular(draw: Draw, level: int) -> dict:
    """In a third, an entry whose cofactor is 0 when there is one: the None case."""
    a, entry = _matrix_and_entry(draw)
    if draw.chance(1, 3):
        flat = [[i, j] for i in range(1, 4) for j in range(1, 4)
                if rational.determinant([[x for c, x in enumerate(row) if c != j - 1]
                                         for r, row in enumerate(a) if r != i - 1]) == 0]
        entry = draw.choice(flat) if flat else entry
    return {"question": "singular_entry", "A": a, "entry": entry}


LEVEL_4 = Level(question_level(
    "singular_entry", singular_entry, _check_singular_entry,
    "The entry of A at row entry[0], column entry[1] (counted from 1) is replaced by an unknown t. Give the "
    "value of t for which the matrix is singular, or None if it is invertible for every t or singular for "
    "every t.",
    '{"t": Fraction or None}', "dimensionless"), sample_entry_to_make_singular)


# L5 (regimes): the entry value that makes the largest absolute entry of the inverse smallest
@uses(with_entry, to_fraction)
def minimax_entry(A, entry, question=None):
    """Every inverse entry is (a + b t) / det(t), det affine in t."""
    import sympy

    i, j = entry[0] - 1, entry[1] - 1
    t = sympy.Symbol("t")
    m = with_entry(A, i, j, t)
    det = sympy.Poly(m.det(), t)
    tops = [sympy.Poly(v, t) for v in m.adjugate()]
    candidates = set()
    for k, top in enumerate(tops):
        candidates.update(top.real_roots())  # where one entry is 0 (a linear numerator)
        for other in tops[k + 1:]:
            for side in (top - other, top + other):  # where two entries have the same size
                if side.degree() == 1:
                    candidates.update(side.real_roots())
    scored = []
    for x in candidates:
        if det.eval(x) != 0:
            sizes = [abs(top.eval(x) / det.eval(x)) for top in tops]
            scored.append((max(sizes), x, sizes))
    value, best, sizes = min(scored, key=lambda s: (s[0], s[1]))
    n = m.rows
    reach = [[k // n + 1, k % n + 1] for k, v in enumerate(sizes) if v == value]
    return {"rows": [{"t": to_fraction(best), "max_entry": to_fraction(value), "entries": reach}]}


def sample_minimax_entry(draw: Draw, level: int) -> dict:
    """An entry whose optimum is attained at a non-integer t."""
    a, entry = _matrix_and_entry(draw)
    inputs = {"question": "minimax_entry", "A": _plain(a), "entry": entry}
    key = minimax_entry(**inputs)["rows"][0]
    limit = minimax_limit(inputs)
    if limit is not None and key["max_entry"] >= limit:
        raise Reject("the infimum is approached as t grows without bound (not attained)")
    if key["t"].denominator == 1:
        raise Reject("the optimal t is an integer (the named mistake, a search over integers, would find it)")
    return inputs


def minimax_limit(inputs) -> F | None:
    """The largest absolute inverse entry of inverse L5's A(t) as t -> +-infinity (None when it grows
    without bound): entry k is (a_k + b_k t) / (c + d t), its limit b_k / d."""
    from exactgrade.rational import determinant, inverse

    i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

    def at(t):
        m = [[F(x) for x in row] for row in inputs["A"]]
        m[i][j] = F(t)
        return m

    ts = [t for t in range(6) if determinant(at(t)) != 0][:2]
    tops = [[[x * determinant(at(t)) for x in row] for row in inverse(at(t))] for t in ts]
    slope_det = (determinant(at(ts[1])) - determinant(at(ts[0]))) / (ts[1] - ts[0])
    slopes = [(b - a) / (ts[1] - ts[0])
              for ra, rb in zip(*tops, strict=True) for a, b in zip(ra, rb, strict=True)]
    if slope_det == 0:
        return None if any(slopes) else F(0)
    return max(abs(b / slope_det) for b in slopes)



def _check_minimax_entry(task):
    """Gauss-Jordan inverses only: at the key's t the largest absolute entry and the binding entries
    are the key's; nudging t by 2**-30 either way never lowers it; no point of a grid of t (step 1/4
    on [-20, 20], plus +-2**20) does better; and the limit as t grows is not below it (the minimum
    is attained)."""
    inputs, row = task.inputs, task.expected["rows"][0]
    i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

    def largest(t: F) -> tuple[F, list[list[int]]] | None:
        m = fractions_of(inputs["A"])
        m[i][j] = t
        if rational.determinant(m) == 0:
            return None
        inv = rational.inverse(m)
        top = max(abs(x) for r in inv for x in r)
        return top, [[a + 1, b + 1] for a, r in enumerate(inv) for b, x in enumerate(r) if abs(x) == top]

    t = rational.as_fraction(row["t"])
    here = largest(t)
    if here is None or here != (rational.as_fraction(row["max_entry"]), [list(e) for e in row["entries"]]):
        return [f"at t = {t} Gauss-Jordan gives (largest entry, entries) {here}, not the key's"]
    grid = [F(k, 4) for k in range(-80, 81)] + [t + F(1, 2**30), t - F(1, 2**30), F(2**20), F(-2**20)]
    better = [x for x in grid if (v := largest(x)) is not None
              and (v[0] < here[0] or (v[0] == here[0] and x < t))]
    limit = minimax_limit(inputs)
    problems = [f"t = {better[0]} gives a smaller largest entry than the key's t"] if better else []
    if limit is not None and limit <= here[0]:
        problems.append(Degenerate("the infimum is not attained (the limit as t grows is no larger)"))
    return problems


LEVEL_5 = Level(question_level(
    "minimax_entry", minimax_entry, _check_minimax_entry,
    "The entry of A at row entry[0], column entry[1] (counted from 1) is replaced by a real number t (every "
    "other entry stays). Among the t for which the matrix is invertible, which makes the largest absolute "
    "value of an entry of the inverse smallest? On a tie, the smallest t. Give t, that largest absolute "
    "entry, and every entry of the inverse that reaches it at that t, as [row, column] counted from 1, in "
    "row-major order.",
    '{"t": Fraction, "max_entry": Fraction, "entries": [[int, int], ...]}', "dimensionless"),
    sample_minimax_entry)


def _none(key, levels):
    return lambda task: task.level in levels and answer_field(task, key) is None


INVERSE = deeplearning_family(
    "inverse", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5), about=
    "L1: determinant and inverse of two P L U matrices. L2 (derive): the solution of A x = b (no inverse "
    "asked). L3 (compose): det(A B) and the trace of (A B)^-1. L4 (inverse): the value of one entry that "
    "makes A singular (None when the determinant does not depend on it). L5 (regimes): the real value of one "
    "entry that makes the largest absolute entry of the inverse smallest (each inverse entry is a ratio of "
    "affine functions of it with one denominator, so the optimum is an exact rational where two entries "
    "cross or one vanishes; no grid finds it), that value and the entries that bind.",
    branches=(Branch("the determinant does not depend on the entry", _none("t", (4,)),
                                       F(1, 30), (4,)),))
