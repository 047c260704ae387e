"""The deeplearning domain's own verify checks: check(task) -> list of failure reasons.

Every level's own check sits beside its reference in the family module and reaches check() as
``meta["independent"]``: it recomputes the key another way (exactgrade.rational, numpy, 80-digit
mpmath, a finite difference, a state map). This module runs it and keeps what every category
shares: the key holds no float, meta mirrors the inputs, and a task cannot skip its category's
check by leaving meta out; plus the information checks on the data a task keeps in ``meta``
(every distribution and every marginal used in a log is dyadic; the KL-asymmetry pair differs;
mutual information is not identically zero) and the linear-algebra checks not yet moved beside
their levels (Gauss-Jordan elimination, eigenvalue identities).

A problem of a sound but unposeable draw is ``Degenerate`` (generation redraws it): a log of a
probability that is not a power of two, a zero mutual information, a symmetric KL pair, a named
mistake that gives the key, a float outcome that is not robust, a near tie, a finite difference
across a ReLU kink, an infimum that is not attained. Every other problem (a recomputation that
disagrees with the key, missing or inconsistent meta, a float in the key) is a defect, on which
generation fails closed (exactgrade.family).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import sympy

from exactgrade import rational
from exactgrade.family import Degenerate
from exactgrade.rational.information import joint_table
from exactgrade.task import Task
from exactgrade.verdict import render_path

# The meta key each category needs, so a task cannot skip its category's check by omission.
REQUIRED_META = {
    "information": ("distributions", "joint", "labels", "independent"),
    "backprop": ("independent",),
    "numerical": ("independent",),
    "linalg": ("linalg", "linalg_question"),
    "optimisation": ("independent",),
}


def check(task: Task) -> list[str]:
    """Every reason this task fails the domain's checks (empty when it passes)."""
    problems = list(_floats(task.expected, ()))
    meta = task.meta
    needed = REQUIRED_META.get(task.category)
    if needed is None:
        problems.append(f"unknown category {task.category!r}; expected one of {sorted(REQUIRED_META)}")
    elif needed and not any(key in meta for key in needed):
        keys = " or ".join(map(repr, needed))
        problems.append(f"this {task.category} task needs meta[{keys}] for its check")
    checks: list[tuple[str | None, Callable[[Task], list[str]]]] = [
        (None, _meta_mirrors_inputs), ("distributions", _distributions), ("joint", _joint),
        ("mutual_information", _mutual_information), ("labels", _label_probabilities),
        ("kl_asymmetry", _kl_asymmetry), ("independent", _independent),
        ("linalg", _linalg),
        ("linalg_question", _linalg_question),
    ]
    for key, run in checks:  # key None: always runs
        if key is None or key in meta:
            try:
                problems += run(task)
            except (rational.RationalError, KeyError, IndexError, TypeError) as error:
                problems.append(f"{key or 'meta'} check could not run: {type(error).__name__}: {error}")
    return problems


def _independent(task: Task) -> list[str]:
    """The check its level attached beside its reference: it recomputes the key another way."""
    return list(task.meta["independent"](task))


def _meta_mirrors_inputs(task: Task) -> list[str]:
    """The checks read meta; it must describe the same data the reference is given."""
    mirrored = ("joint", "network", "batch", "predictions", "labels")
    problems = [f"meta[{key!r}] differs from inputs[{key!r}]" for key in mirrored
                if key in task.meta and key in task.inputs and task.meta[key] != task.inputs[key]]
    inputs = task.inputs
    given = [*inputs.get("distributions", []),
             *(pair[k] for pair in inputs.get("pairs", []) for k in ("p", "q"))]
    listed = task.meta.get("distributions", [])
    problems += [f"input distribution {_show(d)} is missing from meta['distributions']"
                 for d in given if d not in listed]
    return problems


def _floats(value: Any, path: tuple[str | int, ...]) -> list[str]:
    """Every float (or sympy Float atom) inside the expected answer."""
    if type(value) is float:
        return [f"float {value!r} at {render_path(path)}: the key must be exact"]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in _floats(v, (*path, i))]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in _floats(v, (*path, k))]
    if isinstance(value, sympy.Basic) and value.atoms(sympy.Float):
        return [f"sympy Float inside {render_path(path)}: the key must be exact"]
    return []


def _rows(task: Task) -> list[Any]:
    return list(task.expected["rows"])


def _show(values: Any) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _distributions(task: Task) -> list[str]:
    problems = []
    for n, p in enumerate(task.meta["distributions"]):
        try:
            q = rational.information.distribution(p)
        except rational.RationalError as error:
            problems.append(f"distribution {n}: {error}")
            continue
        bad = [x for x in q if x != 0 and not rational.is_dyadic(x)]
        if bad:
            problems.append(Degenerate(f"distribution {n} {_show(q)} is not dyadic: {bad[0]} is not a power "
                                       "of two"))
    return problems


def _label_probabilities(task: Task) -> list[str]:
    """A classification loss takes the log of the true class's probability only: that one must
    be a power of two, and every prediction a distribution."""
    problems = []
    predictions, labels = task.meta["predictions"], task.meta["labels"]
    if len(predictions) != len(labels):
        return [f"{len(predictions)} predictions for {len(labels)} labels"]
    for n, (p, y) in enumerate(zip(predictions, labels, strict=True)):
        try:
            q = rational.information.distribution(p)
        except rational.RationalError as error:
            problems.append(f"prediction {n}: {error}")
            continue
        if not rational.is_dyadic(q[y]):
            problems.append(Degenerate(f"prediction {n}: the true class's probability {q[y]} is not a power "
                                       "of two"))
    return problems


def _joint(task: Task) -> list[str]:
    table = joint_table(task.meta["joint"])
    problems = []
    cells = [x for row in table for x in row if x != 0 and not rational.is_dyadic(x)]
    if cells:
        problems.append(Degenerate(f"joint cell {cells[0]} is not a power of two"))
    pa, pb = rational.marginals(table)
    for name, marginal in (("A", pa), ("B", pb)):
        bad = [x for x in marginal if x != 0 and not rational.is_dyadic(x)]
        if bad:
            problems.append(Degenerate(f"marginal of {name} {_show(marginal)} is not dyadic: {bad[0]} is "
                                       "used in a log but is not a power of two"))
    return problems


def _mutual_information(task: Task) -> list[str]:
    bits = rational.mutual_information_bits(task.meta["joint"])
    problems = []
    if bits == 0:
        problems.append(Degenerate("I(A; B) is identically zero for this joint (A and B are independent): a "
                                   "mutual-information task must not be"))
    for i, row in enumerate(_rows(task)):
        for key, value in row.items():
            if not key.startswith("I_"):
                continue
            want = bits if key == "I_bits" else rational.bits_to_nats(bits)
            if value == 0:
                problems.append(Degenerate(f"rows[{i}][{key!r}] is 0: the mutual information must not be "
                                           "zero"))
            elif value != want:
                problems.append(f"rows[{i}][{key!r}] is {value} but exactgrade.rational gives {want}")
    return problems


def _kl_asymmetry(task: Task) -> list[str]:
    p, q = task.meta["kl_asymmetry"]["p"], task.meta["kl_asymmetry"]["q"]
    forward, backward = rational.kl_bits(p, q), rational.kl_bits(q, p)
    if forward == backward:
        return [Degenerate(f"the KL-asymmetry pair is symmetric: D(p || q) = D(q || p) = {forward} bits")]
    found = [row[key] for row in _rows(task) for key in row if key.startswith("KL_")]
    if len(set(found)) < 2:
        return [f"the expected KL values {_show(found)} do not differ"]
    return []


def _lasso_at(x: Any, y: Any, lam: Fraction) -> list[Fraction]:
    """The lasso minimiser at one lambda, by the optimality conditions alone: for every sign
    pattern s in {-1, 0, 1}^p, w_A = (X_A^T X_A)^-1 (X_A^T y - lam s_A) is kept when its signs are
    s_A and every other column's residual correlation is at most lam in size; exactly one w
    (the minimiser is unique) must survive."""
    from itertools import product

    p = len(x[0])
    cols = [[rational.as_fraction(row[j]) for row in x] for j in range(p)]
    ys = [rational.as_fraction(v) for v in y]

    def dot(u: Any, v: Any) -> Fraction:
        return sum((a * b for a, b in zip(u, v, strict=True)), Fraction(0))

    found = set()
    for signs in product((-1, 0, 1), repeat=p):
        active = [j for j in range(p) if signs[j]]
        w = [Fraction(0)] * p
        if active:
            gram = [[dot(cols[i], cols[j]) for j in active] for i in active]
            part = rational.solve(gram, [dot(cols[i], ys) - lam * signs[i] for i in active])
            if any((v > 0) != (signs[j] > 0) or v == 0 for v, j in zip(part, active, strict=True)):
                continue
            for v, j in zip(part, active, strict=True):
                w[j] = v
        residual = [v - sum((w[j] * cols[j][r] for j in range(p)), Fraction(0)) for r, v in enumerate(ys)]
        if all(abs(dot(cols[j], residual)) <= lam for j in range(p) if not signs[j]):
            found.add(tuple(w))
    if len(found) != 1:
        raise rational.RationalError(f"{len(found)} lasso minimisers at lambda = {lam}")
    return list(found.pop())


def _lasso_path(task: Task) -> list[str]:
    """least_squares L5 another way: the minimiser at each key lambda and on both sides of it (a
    quarter of the way to the neighbouring key lambdas, and beyond the last), each from the
    optimality conditions alone (_lasso_at), never by following the path: w must be the key's
    at each key lambda, the support must change there, and not change between two key lambdas
    (w must be affine in lambda there: checked at three points of every stretch); the
    orthogonal-design mistake must give other lambdas."""
    from exactgrade.domains.deeplearning.linalg.least_squares import lasso_mistake

    x, y, rows = task.inputs["X"], task.inputs["y"], task.expected["rows"]
    lams = [rational.as_fraction(r["lambda"]) for r in rows]
    problems = []

    def support(w: list[Fraction]) -> list[int]:
        return [j + 1 for j, v in enumerate(w) if v != 0]

    if support(_lasso_at(x, y, lams[0] * Fraction(5, 4))):
        problems.append("above the first lambda the lasso weights are not all 0")
    for k, (lam, row) in enumerate(zip(lams, rows, strict=True)):
        if _lasso_at(x, y, lam) != list(row["w"]):
            problems.append(f"at lambda = {lam} the optimality conditions give w = "
                            f"{_show(_lasso_at(x, y, lam))}")
        low = lams[k + 1] if k + 1 < len(lams) else Fraction(0)
        points = [low + (lam - low) * Fraction(i, 4) for i in (1, 2, 3)]
        ws = [_lasso_at(x, y, t) for t in points]
        if any(support(w) != list(row["support_below"]) for w in ws):
            problems.append(f"below lambda = {lam} the support is not {row['support_below']}")
        if any(ws[0][j] + ws[2][j] != 2 * ws[1][j] for j in range(len(ws[0]))):
            problems.append(f"below lambda = {lam} w is not affine in lambda (a change point is missing)")
    if lams == lasso_mistake(x, y)[:len(lams)]:
        problems.append(Degenerate("the named mistake (orthogonal soft-thresholding) gives the key"))
    return problems


def _minimax_entry(task: Task) -> list[str]:
    """inverse L5 another way, with Gauss-Jordan inverses only: at the key's t the largest absolute
    entry and the binding entries are the key's; nudging t by 2**-30 either way never lowers it; no
    point of a grid of t (step 1/4 on [-20, 20], plus +-2**20) does better; and the limit as t grows
    is not below it (the minimum is attained)."""
    from exactgrade.domains.deeplearning.linalg.inverse import minimax_limit

    inputs, row = task.inputs, task.expected["rows"][0]
    i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

    def largest(t: Fraction) -> tuple[Fraction, list[list[int]]] | None:
        m = _fractions(inputs["A"])
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
    grid = [Fraction(k, 4) for k in range(-80, 81)] + [t + Fraction(1, 2**30), t - Fraction(1, 2**30),
                                                       Fraction(2**20), Fraction(-2**20)]
    better = [x for x in grid if (v := largest(x)) is not None
              and (v[0] < here[0] or (v[0] == here[0] and x < t))]
    limit = minimax_limit(inputs)
    problems = [f"t = {better[0]} gives a smaller largest entry than the key's t"] if better else []
    if limit is not None and limit <= here[0]:
        problems.append(Degenerate("the infimum is not attained (the limit as t grows is no larger)"))
    return problems


def _linalg(task: Task) -> list[str]:
    kind = task.meta["linalg"]
    rows, inputs = _rows(task), task.inputs
    expected: list[dict[str, Any]]
    if kind == "inverse":
        expected = [{"det": rational.determinant(m), "inverse": [list(r) for r in rational.inverse(m)]}
                    for m in inputs["matrices"]]
    elif kind == "least_squares":
        x, y = inputs["X"], inputs["y"]
        xt = rational.transpose(x)
        w = rational.solve(rational.matmul(xt, x), rational.matvec(xt, y))
        residual = [yi - fi for yi, fi in zip(y, rational.matvec(x, w), strict=True)]
        expected = [{"w": list(w), "rss": sum((r * r for r in residual), Fraction(0))}]
    elif kind == "rank":
        expected = [{"rank": rational.rank(m)} for m in inputs["matrices"]]
    elif kind == "projection":
        a = inputs["A"]
        at = rational.transpose(a)
        expected = []
        for v in inputs["vectors"]:
            coefficients = rational.solve(rational.matmul(at, a), rational.matvec(at, v))
            projected = rational.matvec(a, coefficients)
            expected.append({"projection": list(projected),
                             "residual": [vi - pi for vi, pi in zip(v, projected, strict=True)]})
    elif kind in ("eigenvalues", "pca"):
        return _eigen(task)
    else:
        return [f"unknown meta['linalg'] kind {kind!r}"]
    if rows != expected:
        return [f"the expected rows differ from exactgrade.rational.matrix: {rows} != {expected}"]
    return []


def _fractions(m: Any) -> list[list[Fraction]]:
    return [[rational.as_fraction(x) for x in row] for row in m]


def _positive_definite(m: list[list[Fraction]]) -> bool:
    """Every pivot of Gaussian elimination without row exchanges is positive (Sylvester's criterion)."""
    a = [list(row) for row in m]
    for k in range(len(a)):
        if a[k][k] <= 0:
            return False
        for i in range(k + 1, len(a)):
            factor = a[i][k] / a[k][k]
            a[i] = [x - factor * y for x, y in zip(a[i], a[k], strict=True)]
    return True


def _residual_sq(a: Any, v: Any) -> Fraction:
    at = rational.transpose(a)
    c = rational.solve(rational.matmul(at, a), rational.matvec(at, v))
    r = [rational.as_fraction(x) - y for x, y in zip(v, rational.matvec(a, c), strict=True)]
    return sum((x * x for x in r), Fraction(0))


def _ls(x: Any, y: Any) -> tuple[tuple[Fraction, ...], Fraction]:
    xt = rational.transpose(x)
    w = rational.solve(rational.matmul(xt, x), rational.matvec(xt, y))
    r = [rational.as_fraction(a) - b for a, b in zip(y, rational.matvec(x, w), strict=True)]
    return w, sum((e * e for e in r), Fraction(0))


def _covariance(points: Any) -> list[list[Fraction]]:
    n = len(points)
    mean = [sum((rational.as_fraction(p[j]) for p in points), Fraction(0)) / n for j in range(2)]
    return [[sum(((rational.as_fraction(p[i]) - mean[i]) * (rational.as_fraction(p[j]) - mean[j])
                  for p in points), Fraction(0)) / n for j in range(2)] for i in range(2)]


def _captured(cov: list[list[Fraction]], d: Any) -> Fraction:
    u = [rational.as_fraction(x) for x in d]
    quadratic = sum((u[i] * cov[i][j] * u[j] for i in range(2) for j in range(2)), Fraction(0))
    return quadratic / (u[0] ** 2 + u[1] ** 2)


def _linalg_question(task: Task) -> list[str]:
    """The upper-level linear-algebra questions recomputed with exactgrade.rational (Fraction
    Gauss-Jordan), exact pivots, or numpy eigenvalues away from every decision boundary."""
    import numpy as np

    inputs, question = task.inputs, task.meta["linalg_question"]
    key = task.expected
    one = key["rows"][0]
    want: Any = None
    if question == "solve":
        ok = all(list(rational.matvec(a, row["x"])) == [rational.as_fraction(v) for v in b]
                 for a, b, row in zip(inputs["matrices"], inputs["vectors"], key["rows"], strict=True))
        return [] if ok else ["a solution x does not satisfy A x = b"]
    if question == "product":
        a, b = inputs["A"], inputs["B"]
        inverse = rational.matmul(rational.inverse(b), rational.inverse(a))
        want = {"det": rational.determinant(a) * rational.determinant(b),
                "trace_inverse": sum((inverse[i][i] for i in range(len(inverse))), Fraction(0))}
    elif question == "minimax_entry":
        return _minimax_entry(task)
    elif question == "singular_entry":
        i, j = inputs["entry"][0] - 1, inputs["entry"][1] - 1

        def at(t: Any) -> list[list[Fraction]]:
            m = _fractions(inputs["A"])
            m[i][j] = rational.as_fraction(t)
            return m

        t = one["t"]
        if t is None:
            same = rational.determinant(at(0)) == rational.determinant(at(1)) != 0
            return [] if same else ["the key says no t is singular, but the determinant depends on t"]
        return [] if rational.determinant(at(t)) == 0 else [f"A is not singular at t = {t}"]
    elif question == "prediction":
        w, rss = _ls(inputs["X"], inputs["y"])
        y = [rational.as_fraction(v) for v in inputs["y"]]
        mean = sum(y, Fraction(0)) / len(y)
        tss = sum(((v - mean) ** 2 for v in y), Fraction(0))
        terms = zip(inputs["x_new"], w, strict=True)
        want = {"prediction": sum((rational.as_fraction(a) * b for a, b in terms), Fraction(0)),
                "r2": 1 - rss / tss}
    elif question == "leave_one_out":
        scored = [(_ls([r for n, r in enumerate(inputs["X"]) if n != k],
                       [v for n, v in enumerate(inputs["y"]) if n != k])[1], k + 1)
                  for k in range(len(inputs["X"]))]
        want = {"drop": min(scored)[1], "rss": min(scored)[0]}
    elif question == "lasso_path":
        return _lasso_path(task)
    elif question == "nullity":
        want = {"rows": [{"nullity": len(a[0]) - rational.rank(a), "left_nullity": len(a) - rational.rank(a)}
                         for a in inputs["matrices"]]}
    elif question == "product_rank":
        want = {"rows": [{"rank": rational.rank(rational.matmul(p["A"], p["B"]))}
                         for p in inputs["products"]]}
    elif question in ("spanning_prefix", "essential_columns"):
        rows = []
        for a in inputs["matrices"]:
            columns = rational.transpose(a)
            full = rational.rank(columns)
            if question == "spanning_prefix":
                prefix = next(k for k in range(1, len(columns) + 1) if rational.rank(columns[:k]) == full)
                rows.append({"k": prefix})
            else:
                rows.append({"essential": sum(1 for c in range(len(columns))
                                              if rational.rank(columns[:c] + columns[c + 1:]) < full)})
        want = {"rows": rows}
    elif question == "distance":
        rows = []
        for v in inputs["vectors"]:
            d = _residual_sq(inputs["A"], v)
            norm = sum((rational.as_fraction(x) ** 2 for x in v), Fraction(0))
            rows.append({"distance_sq": d, "cos_sq": (norm - d) / norm})
        want = {"rows": rows}
    elif question == "closest_vector":
        scored = [(_residual_sq(inputs["A"], v), k) for k, v in enumerate(inputs["vectors"], start=1)]
        want = {"closest": min(scored)[1], "distance_sq": min(scored)[0]}
    elif question == "drop_column":
        columns = rational.transpose(inputs["A"])
        scored = []
        for c in range(len(columns)):
            kept = rational.transpose(columns[:c] + columns[c + 1:])
            scored.append((sum((_residual_sq(kept, v) for v in inputs["vectors"]), Fraction(0)), c + 1))
        want = {"drop": min(scored)[1], "total_sq": min(scored)[0]}
    elif question == "shift":
        rows = []
        for m in inputs["matrices"]:
            s = 0
            while not _positive_definite([[x + (s if r == c else 0) for c, x in enumerate(row)]
                                          for r, row in enumerate(_fractions(m))]):
                s += 1
            while _positive_definite([[x + (s - 1 if r == c else 0) for c, x in enumerate(row)]
                                      for r, row in enumerate(_fractions(m))]):
                s -= 1
            rows.append({"shift": s})
        want = {"rows": rows}
    elif question in ("unit_maximum", "radius", "count_below", "max_variance"):
        matrices = ([_covariance(inputs["points"])] if question == "max_variance" else
                    [_fractions(m) for m in inputs["matrices"]])
        values = [np.linalg.eigvalsh(np.array([[float(x) for x in row] for row in m])) for m in matrices]
        if question == "count_below":
            problems = []
            for i, (v, c, row) in enumerate(zip(values, inputs["thresholds"], key["rows"], strict=True)):
                if min(abs(v - float(c))) < 1e-6:
                    problems.append(Degenerate(f"rows[{i}]: an eigenvalue is within 1e-6 of the threshold"))
                elif int(sum(v < float(c))) != row["below"]:
                    problems.append(f"rows[{i}]: numpy counts {int(sum(v < float(c)))} eigenvalues below {c}")
            return problems
        if question == "max_variance":
            got = [float(sympy.N(one["variance"], 30)), float(sympy.N(one["ratio"], 30))]
            trace = float(matrices[0][0][0] + matrices[0][1][1])
            wanted = [values[0][-1], values[0][-1] / trace]
        elif question == "unit_maximum":
            got = [float(sympy.N(row["max"], 30)) for row in key["rows"]]
            wanted = [v[-1] for v in values]
        else:
            got = [float(sympy.N(row["spectral_radius"], 30)) for row in key["rows"]]
            wanted = [max(abs(v)) for v in values]
            squares = [sum((x * y for r, c in zip(m, rational.transpose(m), strict=True)
                            for x, y in zip(r, c, strict=True)), Fraction(0)) for m in matrices]
            if [row["sum_squares"] for row in key["rows"]] != squares:
                return ["the sums of squared eigenvalues differ from trace(M M)"]
        if any(abs(g - w) > 1e-9 * max(1.0, abs(w)) for g, w in zip(got, wanted, strict=True)):
            return [f"the key {got} differs from numpy's eigenvalues {wanted}"]
        return []
    elif question == "along":
        cov = _covariance(inputs["points"])
        along = _captured(cov, inputs["direction"])
        want = {"variance": along, "rest": cov[0][0] + cov[1][1] - along}
    elif question in ("best_direction", "grid_direction"):
        from math import gcd

        cov = _covariance(inputs["points"])
        if question == "best_direction":
            scored = [(-_captured(cov, d), k) for k, d in enumerate(inputs["directions"], start=1)]
            value, best = min(scored)
            want = {"best": best, "ratio": -value / (cov[0][0] + cov[1][1])}
        else:
            bound = inputs["bound"]
            scored = [(-_captured(cov, [a, b]), a, b) for a in range(1, bound + 1)
                      for b in range(-bound, bound + 1) if b != 0 and gcd(a, abs(b)) == 1]
            value, a, b = min(scored)
            want = {"direction": [a, b], "ratio": -value / (cov[0][0] + cov[1][1])}
    else:
        return [f"unknown meta['linalg_question'] {question!r}"]
    want = want if list(want) == ["rows"] else {"rows": [want]}
    if key != want:
        return [f"the key {key} differs from exactgrade.rational, which gives {want}"]
    return []


def _eigen(task: Task) -> list[str]:
    """Eigenvalues: their sum is the trace and their product the determinant, exactly; ascending."""
    from exactgrade.rational import to_sympy

    if task.meta["linalg"] == "pca":
        points = task.inputs["points"]
        n = len(points)
        mean = [sum((Fraction(p[j]) for p in points), Fraction(0)) / n for j in range(len(points[0]))]
        centred = [[Fraction(p[j]) - mean[j] for j in range(len(mean))] for p in points]
        covariance = [[c / n for c in row] for row in rational.matmul(rational.transpose(centred), centred)]
        if _rows(task)[0]["covariance"] != covariance:
            return [f"the expected covariance differs from exactgrade.rational: {covariance}"]
        matrices = [covariance]
    else:
        matrices = task.inputs["matrices"]
    problems = []
    for i, (row, m) in enumerate(zip(_rows(task), matrices, strict=True)):
        values = row["eigenvalues"]
        trace = sum((Fraction(m[k][k]) for k in range(len(m))), Fraction(0))
        if len(values) != len(m):
            problems.append(f"rows[{i}]: {len(values)} eigenvalues for a {len(m)}x{len(m)} matrix")
            continue
        if sympy.expand(sympy.Add(*values) - to_sympy(trace)) != 0:
            problems.append(f"rows[{i}]: the eigenvalues do not sum to the trace {trace}")
        if sympy.expand(sympy.Mul(*values) - to_sympy(rational.determinant(m))) != 0:
            problems.append(f"rows[{i}]: the eigenvalues do not multiply to the determinant")
        numeric = [sympy.N(v, 30) for v in values]
        if numeric != sorted(numeric):
            problems.append(f"rows[{i}]: the eigenvalues are not in ascending order")
    return problems


def as_sympy(value: Any) -> sympy.Expr:
    """An exact key value as sympy (never via sympify); TypeError for anything inexact."""
    if type(value) is int or type(value) is Fraction:
        return rational.to_sympy(value)
    if isinstance(value, sympy.Expr):
        return value
    raise TypeError(f"{type(value).__name__} is not an exact number")
