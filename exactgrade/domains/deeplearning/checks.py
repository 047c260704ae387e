"""The deeplearning domain's own verify checks: check(task) -> list of failure reasons.

Each check recomputes independently with exactgrade.rational (or, for float outcomes, numpy)
from the data a task keeps in ``meta``: every distribution and every marginal used in a log is
dyadic; every gradient equals its exact finite difference; the KL-asymmetry pair differs;
mutual-information tasks are not identically zero; float outcomes agree with an IEEE
implementation and have a documented argument; rational linear-algebra results agree with
Gauss-Jordan elimination; optimiser trajectories agree with a linear-map (SGD family) or an
80-digit mpmath (Adam, schedule) recomputation; and no float hides anywhere in the expected answer.

A problem of a sound but unposeable draw is ``Degenerate`` (generation redraws it): a log of a
probability that is not a power of two, a zero mutual information, a symmetric KL pair, a named
mistake that gives the key, a float outcome that is not robust, a near tie, a finite difference
across a ReLU kink, an infimum that is not attained. Every other problem (a recomputation that
disagrees with the key, missing or inconsistent meta, a float in the key) is a defect, on which
generation fails closed (exactgrade.family).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    "optimisation": ("optimiser", "opt_question"),
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
        ("optimiser", _optimiser), ("opt_question", _opt_question),
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


def _optimiser(task: Task) -> list[str]:
    kind = task.meta["optimiser"]
    if kind == "sgd":
        return _sgd(task)
    if kind in ("adam", "schedule"):
        return _high_precision(task)
    return [f"unknown meta['optimiser'] kind {kind!r}"]


def _sgd(task: Task) -> list[str]:
    """torch.optim.SGD on one coordinate of the quadratic is linear in the state (w, b, 1):
    g = (a + wd) w - a c, b' = mu b + g, then w' = w - lr b' (heavy ball) or
    w' = w - lr (g + mu b') (Nesterov). Iterating that 3x3 map must reproduce the key."""
    inputs = task.inputs
    lr, mu, wd = (rational.as_fraction(inputs[k]) for k in ("lr", "momentum", "weight_decay"))
    columns = []
    for a, c, w0 in zip(inputs["curvature"], inputs["center"], inputs["w0"], strict=True):
        a, c = rational.as_fraction(a), rational.as_fraction(c)
        k = a + wd
        if inputs["nesterov"]:
            step = [[1 - lr * k * (1 + mu), -lr * mu * mu, lr * a * c * (1 + mu)], [k, mu, -a * c], [0, 0, 1]]
        else:
            step = [[1 - lr * k, -lr * mu, lr * a * c], [k, mu, -a * c], [0, 0, 1]]
        state: tuple[Fraction, ...] = (rational.as_fraction(w0), Fraction(0), Fraction(1))
        trajectory = []
        for _ in range(inputs["steps"]):
            state = rational.matvec(step, state)
            trajectory.append(state[0])
        columns.append(trajectory)
    problems = []
    for t, row in enumerate(_rows(task)):
        w = [column[t] for column in columns]
        terms = zip(inputs["curvature"], w, inputs["center"], strict=True)
        loss = sum((rational.as_fraction(a) * (wi - rational.as_fraction(c)) ** 2 for a, wi, c in terms),
                   Fraction(0)) / 2
        if row != {"step": t + 1, "w": w, "loss": loss}:
            problems.append(f"rows[{t}] is {row} but the linear state map gives w = {_show(w)}, "
                            f"loss = {loss}")
    if len(_rows(task)) != inputs["steps"]:
        problems.append(f"{len(_rows(task))} rows for {inputs['steps']} steps")
    return problems


def _high_precision(task: Task) -> list[str]:
    """Adam and the cosine schedule recomputed in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    inputs = task.inputs
    with mpmath.workdps(80):
        def mp(q: Any) -> Any:
            q = rational.as_fraction(q)
            return mpmath.mpf(q.numerator) / q.denominator

        if task.meta["optimiser"] == "adam":
            a, c, w = ([mp(x) for x in inputs[k]] for k in ("curvature", "center", "w0"))
            lr, b1, b2, eps = (mp(inputs[k]) for k in ("lr", "beta1", "beta2", "eps"))
            m, v = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w)
            wanted = []
            for t in range(1, inputs["steps"] + 1):
                g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
                m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
                v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
                w = [wi - lr * (mi / (1 - b1**t)) / (mpmath.sqrt(vi / (1 - b2**t)) + eps)
                     for wi, mi, vi in zip(w, m, v, strict=True)]
                wanted.append(("w", list(w)))
        else:
            peak, low = mp(inputs["peak_lr"]), mp(inputs["min_lr"])
            warmup, decay = inputs["warmup_steps"], inputs["decay_steps"]
            wanted = []
            for s in inputs["steps"]:
                if s < warmup:
                    lr = peak * s / warmup
                elif s <= warmup + decay:
                    lr = low + (peak - low) * (1 + mpmath.cos(mpmath.pi * (s - warmup) / decay)) / 2
                else:
                    lr = low
                wanted.append(("lr", [lr]))
        rows = _rows(task)
        if len(rows) != len(wanted):
            return [f"{len(rows)} rows but the recomputation has {len(wanted)}"]
        problems = []
        for i, (row, (key, values)) in enumerate(zip(rows, wanted, strict=True)):
            exact = row[key] if isinstance(row[key], list) else [row[key]]
            for e, want in zip(exact, values, strict=True):
                got = mpmath.mpf(sympy.N(as_sympy(e), 70))
                if abs(got - want) > mpmath.mpf(10) ** -50:
                    problems.append(f"rows[{i}][{key!r}]: the key is {mpmath.nstr(got, 20)} but 80-digit "
                                    f"mpmath gives {mpmath.nstr(want, 20)}")
    return problems


def _state_maps(inputs: Mapping[str, Any], lr: Fraction) -> list[list[list[Fraction]]]:
    """Per coordinate, torch SGD's linear map of (w, buffer, 1) (as in _sgd)."""
    mu, wd = rational.as_fraction(inputs["momentum"]), rational.as_fraction(inputs["weight_decay"])
    maps = []
    centre = inputs.get("center", [0] * len(inputs["curvature"]))  # stability: the homogeneous part only
    for a, c in zip(inputs["curvature"], centre, strict=True):
        a, c = rational.as_fraction(a), rational.as_fraction(c)
        k = a + wd
        if inputs["nesterov"]:
            maps.append([[1 - lr * k * (1 + mu), -lr * mu * mu, lr * a * c * (1 + mu)], [k, mu, -a * c],
                         [0, 0, 1]])
        else:
            maps.append([[1 - lr * k, -lr * mu, lr * a * c], [k, mu, -a * c], [0, 0, 1]])
    return maps


def _map_losses(inputs: Mapping[str, Any], lr: Any, steps: int) -> list[Fraction]:
    maps = _state_maps(inputs, rational.as_fraction(lr))
    states = [(rational.as_fraction(w), Fraction(0), Fraction(1)) for w in inputs["w0"]]
    losses = []
    for _ in range(steps):
        states = [tuple(rational.matvec(m, s)) for m, s in zip(maps, states, strict=True)]
        losses.append(sum((rational.as_fraction(a) * (s[0] - rational.as_fraction(c)) ** 2
                           for a, s, c in zip(inputs["curvature"], states, inputs["center"], strict=True)),
                          Fraction(0)) / 2)
    return losses


def _spectral_radius(inputs: Mapping[str, Any], lr: Fraction) -> float:
    import numpy as np

    return max(float(max(abs(np.linalg.eigvals(np.array([[float(x) for x in row[:2]] for row in m[:2]])))))
               for m in _state_maps(inputs, lr))


def _adam_first_moves(inputs: Mapping[str, Any], lr: Any, eps: Any) -> list[Fraction]:
    """|w1 - w0| per coordinate through Adam's general step in sympy (m_hat, v_hat, sqrt)."""
    moves = []
    b1, b2 = sympy.Rational(9, 10), sympy.Rational(999, 1000)  # step 1 does not depend on the betas
    for a, w, c in zip(inputs["curvature"], inputs["w0"], inputs["center"], strict=True):
        g = rational.to_sympy(rational.as_fraction(a) * (rational.as_fraction(w) - rational.as_fraction(c)))
        m_hat, v_hat = (1 - b1) * g / (1 - b1), (1 - b2) * g**2 / (1 - b2)
        move = sympy.Abs(rational.to_sympy(rational.as_fraction(lr)) * m_hat /
                         (sympy.sqrt(v_hat) + rational.to_sympy(rational.as_fraction(eps))))
        moves.append(rational.from_sympy(move))
    return moves


def _opt_question(task: Task) -> list[str]:
    """The upper-level optimisation questions recomputed another way (see the module docstring)."""
    inputs, question = task.inputs, task.meta["opt_question"]
    exact = task.expected["rows"][0]
    want: Any
    if question == "stability":
        limit = exact["lr_limit"]
        curvature = [rational.as_fraction(a) for a in inputs["curvature"]]
        worst = curvature.index(max(curvature))
        m = _state_maps(inputs, limit)[worst]
        if (m[0][0] + 1) * (m[1][1] + 1) - m[0][1] * m[1][0] != 0:
            return [f"at lr = {limit} the worst coordinate's map has no eigenvalue -1"]
        below, above = (_spectral_radius(inputs, limit * Fraction(k, 100)) for k in (99, 101))
        if not below < 1 < above:
            return [f"numpy eigenvalues do not change stability at lr = {limit}"]
        return []
    if question in ("closed_form", "closed_form_momentum"):
        return _sgd_closed_form(task)
    if question in ("final", "first_below"):
        losses = _map_losses(inputs, inputs["lr"], inputs["steps"])
        if question == "final":
            radius = _spectral_radius(inputs, rational.as_fraction(inputs["lr"]))
            want = {"final_loss": losses[-1], "diverges": radius > 1}
        else:
            want = {"rows": [{"step": next((t for t, v in enumerate(losses, 1) if v <= target), None)}
                             for target in inputs["targets"]]}
    elif question == "first_step":
        moves = _adam_first_moves(inputs, inputs["lr"], inputs["eps"])
        want = {"rows": [{"move": m, "furthest": i == moves.index(max(moves))} for i, m in enumerate(moves)]}
    elif question == "smallest_eps":
        fits = [rational.as_fraction(e) for e in inputs["candidates"]
                if max(_adam_first_moves(inputs, inputs["lr"], e)) <= inputs["cap"]]
        want = {"eps": min(fits, default=None)}
    elif question == "decay_modes":
        return _decay_modes(task)
    elif question == "words":
        return []  # the level-1 schedule check (meta['optimiser']) recomputes these rows
    elif question == "two_step_loss":
        return _adam_two_step_loss(task)
    elif question == "closed_schedule":
        return _closed_schedule(task)
    else:
        return _schedule_question(task)
    want = want if list(want) == ["rows"] else {"rows": [want]}
    if task.expected != want:
        return [f"the key {task.expected} differs from the recomputation, which gives {want}"]
    return []


SCHEDULE_POINTS = ((1, 2, 3), (1, 5, 9), (2, 3, 5), (3, 4, 11), (5, 7, 12), (8, 12, 25), (4, 16, 20))
"""(W, D, T) at which warmup_cosine L5's closed forms are summed step by step."""


def _closed_schedule(task: Task) -> list[str]:
    """warmup_cosine L5 another way: the key, a rational function of W, D, T, must equal at every
    point of SCHEDULE_POINTS the step-by-step sum of the learning rates (and of their squares) of
    the schedule in 50-digit mpmath; the named mistakes (the cosine over D steps, not D + 1; the
    squared cosines summed to (D + 1)/2; step W counted in the warmup too) must not."""
    import mpmath

    inputs, row = task.inputs, task.expected["rows"][0]
    W, D, T = (inputs[k] for k in ("W", "D", "T"))
    peak, low = (rational.as_fraction(inputs[k]) for k in ("peak_lr", "min_lr"))
    for name in ("total", "total_squares"):
        value = row[name]
        if not (isinstance(value, sympy.Expr) and value.free_symbols <= {W, D, T}
                and value.is_rational_function(W, D, T)):
            return [f"{name} {value} is not a rational function of W, D and T"]
    half = rational.to_sympy((peak - low) / 2)
    mistakes = {"the cosine over D steps": (row["total"] - rational.to_sympy((peak + low) / 2), "total"),
                "squared cosines summing to (D + 1)/2": (row["total_squares"] - half**2 / 2, "total_squares"),
                "step W in the warmup too": (row["total"] + rational.to_sympy(peak), "total")}
    problems, differs = [], dict.fromkeys(mistakes, False)
    with mpmath.workdps(50):
        def mp(q: Fraction) -> Any:
            return mpmath.mpf(q.numerator) / q.denominator

        for w, d, t in SCHEDULE_POINTS:
            rates = [mp(peak) * s / w if s < w else
                     mp(low) + (mp(peak) - mp(low)) * (1 + mpmath.cos(mpmath.pi * (s - w) / d)) / 2
                     if s <= w + d else mp(low) for s in range(1, t + 1)]
            point = {W: w, D: d, T: t}
            for name, want in (("total", sum(rates)), ("total_squares", sum(r**2 for r in rates))):
                got = mp(rational.from_sympy(row[name].subs(point)))
                if abs(got - want) > mpmath.mpf(10) ** -40:
                    problems.append(f"at W = {w}, D = {d}, T = {t} the key's {name} is "
                                    f"{mpmath.nstr(got, 20)} but summing the steps gives "
                                    f"{mpmath.nstr(want, 20)}")
                for mistake, (wrong, field) in mistakes.items():
                    if field == name and abs(mp(rational.from_sympy(wrong.subs(point))) - want) > 10**-30:
                        differs[mistake] = True
    problems += [Degenerate(f"the named mistake ({m}) gives the key") for m, ok in differs.items() if not ok]
    return problems


CLOSED_FORM_POINTS = ((Fraction(1, 7), Fraction(1, 3)), (Fraction(2, 5), Fraction(5, 6)),
                      (Fraction(3, 11), Fraction(1, 2)), (Fraction(9, 4), Fraction(7, 9)))
"""(eta, mu) points at which the SGD closed form is re-derived in exact rationals."""


def _sgd_closed_form(task: Task) -> list[str]:
    """The three closed forms re-derived another way, at rational points (eta, mu): the loss by
    iterating each coordinate's linear state map in Fractions; Nesterov's best first learning rate
    as the vertex of f(w1), a quadratic in eta fitted through the map at eta = 0, 1, 2, and heavy
    ball's best momentum as the vertex of f(w2), a quadratic in mu fitted through the map at
    mu = 0, 1, 2; the limit as the eta at which the stiffest coordinate's 2x2 map has the
    eigenvalue -1, with numpy's spectral radius below 1 just under it and above 1 just over it
    (every coordinate). The key must be a polynomial in eta and mu (loss) and rational functions
    of one symbol, and the named mistakes (the other momentum's limit; the limit without weight
    decay; Nesterov's first step taken as g; heavy ball's second gradient taken at w0, or its
    best momentum for f plus the weight-decay term) must give other functions."""
    inputs, row = task.inputs, task.expected["rows"][0]
    eta, mu = inputs["eta"], inputs["mu"]
    problems = []
    nesterov = inputs["nesterov"]
    best_name, best_symbol = ("best_first_lr", mu) if nesterov else ("best_momentum", eta)
    loss, best, limit = (row[k] for k in ("loss_after_two_steps", best_name, "lr_limit"))
    if not (isinstance(loss, sympy.Expr) and loss.is_polynomial(eta, mu) and loss.free_symbols <= {eta, mu}):
        return [f"the loss {loss} is not a polynomial in eta and mu"]
    for name, value, symbol in ((best_name, best, best_symbol), ("lr_limit", limit, mu)):
        if not (isinstance(value, sympy.Expr) and value.free_symbols <= {symbol}
                and value.is_rational_function(symbol)):
            return [f"{name} {value} is not a rational function of {symbol}"]
    if not nesterov:
        problems += _best_momentum(inputs, best, eta)
    curvature = [rational.as_fraction(a) for a in inputs["curvature"]]
    worst = curvature.index(max(curvature))
    polynomial = sympy.Poly(loss, eta, mu)
    for lr, m in CLOSED_FORM_POINTS:
        at = {**inputs, "momentum": m}

        def subs(expr: Any, m: Fraction = m) -> Fraction:
            return rational.from_sympy(expr.subs(mu, rational.to_sympy(m)))

        point = {eta: rational.to_sympy(lr), mu: rational.to_sympy(m)}
        at_point = rational.from_sympy(polynomial.eval(point))
        if at_point != _map_losses(at, lr, 2)[-1]:
            problems.append(f"at eta = {lr}, mu = {m} the key's loss is {at_point} but the state map gives "
                            f"{_map_losses(at, lr, 2)[-1]}")
        if nesterov:
            vertex = _vertex([_map_losses(at, Fraction(x), 1)[0] for x in (0, 1, 2)])
            if subs(best) != vertex:
                problems.append(f"at mu = {m} best_first_lr is {subs(best)} but the vertex of f(w1) is "
                                f"{vertex}")
        edge = subs(limit)
        grid = _state_maps(at, edge)[worst]
        if (grid[0][0] + 1) * (grid[1][1] + 1) - grid[0][1] * grid[1][0] != 0:
            problems.append(f"at mu = {m}, eta = lr_limit = {edge}: the stiffest map has no eigenvalue -1")
        below, above = (_spectral_radius(at, edge * Fraction(k, 100)) for k in (99, 101))
        if not below < 1 < above:
            problems.append(f"at mu = {m} numpy eigenvalues do not change stability at eta = {edge}")
    wd = rational.to_sympy(rational.as_fraction(inputs["weight_decay"]))
    lam = rational.to_sympy(max(curvature))
    mistakes = [("the other momentum's limit", 2 * (1 + mu) / (lam + wd) if inputs["nesterov"]
                 else 2 * (1 + mu) / ((1 + 2 * mu) * (lam + wd)), limit)]
    if wd != 0:
        mistakes.append(("the limit without weight decay", 2 * (1 + mu) / ((1 + 2 * mu) * lam)
                         if inputs["nesterov"] else 2 * (1 + mu) / lam, limit))
    if nesterov:
        mistakes.append(("Nesterov's first step taken as g", best * (1 + mu), best))
    for name, wrong, right in mistakes:  # differing at one rational point proves another function
        if all(rational.from_sympy(wrong.subs(mu, rational.to_sympy(m))) ==
               rational.from_sympy(right.subs(mu, rational.to_sympy(m))) for _, m in CLOSED_FORM_POINTS):
            problems.append(Degenerate(f"the named mistake ({name}) gives the key"))
    return problems


def _vertex(values: Sequence[Fraction]) -> Fraction:
    """The minimiser x of the quadratic through (0, values[0]), (1, values[1]), (2, values[2])."""
    f0, f1, f2 = values
    curve = f2 - 2 * f1 + f0  # q(x) = f0 + b x + (curve / 2) x**2
    return -(f1 - f0 - curve / 2) / curve


def _best_momentum(inputs: Mapping[str, Any], best: Any, eta: Any) -> list[str]:
    """heavy ball's best momentum at rational learning rates: the vertex of f(w2) through the
    state map at mu = 0, 1, 2 (the key, a function of eta, must agree), and the named mistakes
    (the second gradient taken at w0; the weight-decay term added to f) must give other values."""
    wd = rational.as_fraction(inputs["weight_decay"])
    a, c, w0 = ([rational.as_fraction(x) for x in inputs[k]] for k in ("curvature", "center", "w0"))
    g0 = [ai * (wi - ci) + wd * wi for ai, wi, ci in zip(a, w0, c, strict=True)]
    problems, stale, decayed = [], True, wd != 0
    for lr, _ in CLOSED_FORM_POINTS:
        key = rational.from_sympy(best.subs(eta, rational.to_sympy(lr)))
        vertex = _vertex([_map_losses({**inputs, "momentum": Fraction(m)}, lr, 2)[-1] for m in (0, 1, 2)])
        if key != vertex:
            problems.append(f"at eta = {lr} best_momentum is {key} but the vertex of f(w2) in mu is {vertex}")
        # w2 = w0 - lr * (g0 + g1) - mu * lr * g0, so f(w2) (plus wd/2 ||w2||**2) is quadratic in mu
        g1 = [gi - lr * (ai + wd) * gi for ai, gi in zip(a, g0, strict=True)]
        plain = [wi - lr * (x + y) for wi, x, y in zip(w0, g0, g1, strict=True)]
        at_w0 = [wi - 2 * lr * x for wi, x in zip(w0, g0, strict=True)]

        def minimiser(u: list[Fraction], decay: Fraction, lr: Fraction = lr) -> Fraction:
            terms = zip(a, u, c, g0, strict=True)
            top = sum(((ai * (ui - ci) + decay * ui) * gi for ai, ui, ci, gi in terms), Fraction(0))
            bottom = sum(((ai + decay) * gi * gi for ai, gi in zip(a, g0, strict=True)), Fraction(0))
            return top / (lr * bottom)

        stale = stale and minimiser(at_w0, Fraction(0)) == key
        decayed = decayed and minimiser(plain, wd) == key
        if minimiser(plain, Fraction(0)) != vertex:
            problems.append(f"at eta = {lr} the vertex of f(w2) in mu is {vertex} but the direct form gives "
                            f"{minimiser(plain, Fraction(0))}")
    problems += [Degenerate(f"the named mistake ({name}) gives the key") for name, hit in
                 (("the second gradient taken at w0", stale), ("the weight-decay term added to f", decayed))
                 if hit]
    return problems


def _decay_modes(task: Task) -> list[str]:
    """adam L5 another way: each optimiser's first step run in sympy with lr a symbol, through the
    general update (m, v, bias corrections, the square root; eps = 0), f(w1) expanded to a quadratic
    in lr and its vertex solved for; swapping the two optimisers (the named mistake) must not pass."""
    inputs, row = task.inputs, task.expected["rows"][0]
    lr = sympy.Symbol("lr", positive=True)
    b1, b2 = sympy.Rational(9, 10), sympy.Rational(999, 1000)  # step 1 does not depend on them
    a, c, w = ([rational.to_sympy(rational.as_fraction(x)) for x in inputs[k]]
               for k in ("curvature", "center", "w0"))
    wd = rational.to_sympy(rational.as_fraction(inputs["weight_decay"]))
    want = {}
    for name, coupled in (("adam", True), ("adamw", False)):
        moved = []
        for ai, ci, wi in zip(a, c, w, strict=True):
            g = ai * (wi - ci) + (wd * wi if coupled else 0)
            m_hat, v_hat = (1 - b1) * g / (1 - b1), (1 - b2) * g**2 / (1 - b2)
            start = wi if coupled else wi * (1 - lr * wd)
            moved.append(start - lr * m_hat / sympy.sqrt(v_hat))
        terms = [ai * (x - ci) ** 2 for ai, x, ci in zip(a, moved, c, strict=True)]
        loss = sympy.Poly(sympy.expand(sum(terms) / 2), lr)
        best = sympy.solve(loss.diff(lr).as_expr(), lr)
        if len(best) != 1:
            return [Degenerate(f"{name}: f(w1) is not a quadratic in lr with a positive vertex")]
        want[f"{name}_lr"] = rational.from_sympy(best[0])
        want[f"{name}_loss"] = rational.from_sympy(loss.eval(best[0]))
    problems = [] if row == want else [f"the key {row} differs from sympy's general first step: {want}"]
    if (row["adam_lr"], row["adam_loss"]) == (row["adamw_lr"], row["adamw_loss"]):
        problems.append(Degenerate("the named mistake (the two optimisers swapped) gives the key"))
    return problems


def _adam_two_step_loss(task: Task) -> list[str]:
    """Two Adam steps and the loss in 80-digit mpmath; the exact key must agree to 1e-50."""
    import mpmath

    inputs = task.inputs
    with mpmath.workdps(80):
        def mp(q: Any) -> Any:
            q = rational.as_fraction(q)
            return mpmath.mpf(q.numerator) / q.denominator

        a, c, w = ([mp(x) for x in inputs[k]] for k in ("curvature", "center", "w0"))
        lr, b1, b2, eps = (mp(inputs[k]) for k in ("lr", "beta1", "beta2", "eps"))
        m, v = [mpmath.mpf(0)] * len(w), [mpmath.mpf(0)] * len(w)
        for t in (1, 2):
            g = [ai * (wi - ci) for ai, wi, ci in zip(a, w, c, strict=True)]
            m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
            v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
            w = [wi - lr * (mi / (1 - b1**t)) / (mpmath.sqrt(vi / (1 - b2**t)) + eps)
                 for wi, mi, vi in zip(w, m, v, strict=True)]
        want = mpmath.fsum(ai * (wi - ci) ** 2 for ai, wi, ci in zip(a, w, c, strict=True)) / 2
        got = mpmath.mpf(sympy.N(as_sympy(task.expected["rows"][0]["loss"]), 70))
        if abs(got - want) > mpmath.mpf(10) ** -50:
            return [f"the loss is {mpmath.nstr(got, 20)} but 80-digit mpmath gives {mpmath.nstr(want, 20)}"]
    return []


def _schedule_question(task: Task) -> list[str]:
    """Schedule totals and searches in 80-digit mpmath; a decision closer than 1e-40 is refused."""
    import mpmath

    inputs, question = task.inputs, task.meta["opt_question"]
    with mpmath.workdps(80):
        def mp(q: Any) -> Any:
            q = rational.as_fraction(q)
            return mpmath.mpf(q.numerator) / q.denominator

        def lr_at(s: int, decay: int) -> Any:
            peak, low, warmup = mp(inputs["peak_lr"]), mp(inputs["min_lr"]), inputs["warmup_steps"]
            if s < warmup:
                return peak * s / warmup
            if s <= warmup + decay:
                return low + (peak - low) * (1 + mpmath.cos(mpmath.pi * (s - warmup) / decay)) / 2
            return low

        def at_least(x: Any, y: Any) -> bool:
            if abs(x - y) < mpmath.mpf(10) ** -40:
                raise ValueError("a near tie")
            return bool(x > y)

        try:
            if question == "total":
                total = mpmath.fsum(lr_at(s, inputs["decay_steps"]) for s in range(1, inputs["last"] + 1))
                got = mpmath.mpf(sympy.N(as_sympy(task.expected["rows"][0]["total"]), 70))
                return [] if abs(got - total) < mpmath.mpf(10) ** -50 else [
                    f"the total is {mpmath.nstr(got, 20)} but 80-digit mpmath gives {mpmath.nstr(total, 20)}"]
            if question != "first_at_most":
                return [f"unknown schedule question {question!r}"]
            warmup, decay = inputs["warmup_steps"], inputs["decay_steps"]
            want = {"rows": [{"step": next((s for s in range(warmup, warmup + decay + 1)
                                            if at_least(mp(target), lr_at(s, decay))), None)}
                             for target in inputs["targets"]]}
        except ValueError as error:
            return [Degenerate(f"the schedule search has {error} between a learning rate and the target")]
    if task.expected != want:
        return [f"the key {task.expected} differs from 80-digit mpmath, which gives {want}"]
    return []


def as_sympy(value: Any) -> sympy.Expr:
    """An exact key value as sympy (never via sympify); TypeError for anything inexact."""
    if type(value) is int or type(value) is Fraction:
        return rational.to_sympy(value)
    if isinstance(value, sympy.Expr):
        return value
    raise TypeError(f"{type(value).__name__} is not an exact number")
