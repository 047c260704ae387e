"""What two or more backprop families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Draw, Reject
from exactgrade.task import TaskDef

CONVENTIONS = (
    "Network conventions. A network is {'layers': [layer_1, layer_2, ...]}; each layer is "
    "{'W': list of rows, 'b': list, 'activation': 'relu' or 'identity'} and computes "
    "z = W @ a_prev + b, a = relu(z) (max(z, 0)) or a = z; a_0 is the input x. Layer k's weight W[i][j] "
    "connects input j to unit i. For one example {'x': input list, 't': target list} the loss is the "
    "squared error L = 1/2 * sum_k (y_k - t_k)**2 with y the last layer's output; for a batch it is the "
    "mean of the per-example losses. Parameters are named 'W<k>[i][j]' and 'b<k>[i]' (layers counted from "
    "1, indices from 0); 'x[j]' names input j (input gradients are asked only for one-example batches). "
    "No pre-activation in these tasks is exactly 0, so every ReLU derivative is defined (1 if z > 0, "
    "else 0). All weights, inputs and targets are fractions.Fraction or int; all results are exact."
)


def mlp_question_rows(network, batch, question, **given):
    def answer(network, batch, question, **given):
        from fractions import Fraction

        lr, candidates, wrt = given.get("lr"), given.get("candidates"), given.get("wrt")
        direction, param = given.get("direction"), given.get("param")

        def forward(layers, x):
            a, pre, acts = [Fraction(v) for v in x], [], []
            acts.append(a)
            for layer in layers:
                z = [sum((Fraction(w) * v for w, v in zip(row, a, strict=True)), Fraction(0)) + Fraction(b)
                     for row, b in zip(layer["W"], layer["b"], strict=True)]
                pre.append(z)
                a = [max(v, Fraction(0)) for v in z] if layer["activation"] == "relu" else z
                acts.append(a)
            return pre, acts

        def loss(layers):
            total = Fraction(0)
            for e in batch:
                y = forward(layers, e["x"])[1][-1]
                pairs = zip(y, e["t"], strict=True)
                total += sum(((yi - Fraction(t)) ** 2 for yi, t in pairs), Fraction(0)) / 2
            return total / len(batch)

        def grads(layers):
            total = {}
            for e in batch:
                pre, acts = forward(layers, e["x"])
                up = [y - Fraction(t) for y, t in zip(acts[-1], e["t"], strict=True)]
                for k in range(len(layers), 0, -1):
                    layer, z = layers[k - 1], pre[k - 1]
                    delta = [g if v > 0 else Fraction(0) for g, v in zip(up, z, strict=True)] \
                        if layer["activation"] == "relu" else up
                    for i, d in enumerate(delta):
                        total[f"b{k}[{i}]"] = total.get(f"b{k}[{i}]", Fraction(0)) + d / len(batch)
                        for j, v in enumerate(acts[k - 1]):
                            name = f"W{k}[{i}][{j}]"
                            total[name] = total.get(name, Fraction(0)) + d * v / len(batch)
                    up = [sum((Fraction(layer["W"][i][j]) * delta[i] for i in range(len(delta))), Fraction(0))
                          for j in range(len(acts[k - 1]))]
            return total

        def moved(layers, step, g):
            return [{"W": [[Fraction(w) - step * g[f"W{k}[{i}][{j}]"] for j, w in enumerate(row)]
                           for i, row in enumerate(layer["W"])],
                     "b": [Fraction(b) - step * g[f"b{k}[{i}]"] for i, b in enumerate(layer["b"])],
                     "activation": layer["activation"]} for k, layer in enumerate(layers, start=1)]

        def shifted(layers, name, h):
            new = [{"W": [list(r) for r in layer["W"]], "b": list(layer["b"]),
                    "activation": layer["activation"]}
                   for layer in layers]
            kind, rest = name[0], name[1:]
            head, tail = rest.split("[", 1)
            k, idx = int(head), [int(i) for i in tail.rstrip("]").split("][")]
            if kind == "W":
                new[k - 1]["W"][idx[0]][idx[1]] = Fraction(new[k - 1]["W"][idx[0]][idx[1]]) + h
            else:
                new[k - 1]["b"][idx[0]] = Fraction(new[k - 1]["b"][idx[0]]) + h
            return new

        layers = network["layers"]
        if question == "active":
            rows = []
            for e in batch:
                pre, acts = forward(layers, e["x"])
                active = sum(1 for z in pre[:-1] for v in z if v > 0)
                pairs = zip(acts[-1], e["t"], strict=True)
                own = sum(((y - Fraction(t)) ** 2 for y, t in pairs), Fraction(0)) / 2
                rows.append({"active_units": active, "output": acts[-1], "loss": own})
            return {"rows": rows}
        if question == "step_loss":
            return {"loss_after": loss(moved(layers, Fraction(lr), grads(layers)))}
        if question == "best_lr":
            g = grads(layers)
            scored = [(loss(moved(layers, Fraction(c), g)), Fraction(c)) for c in candidates]
            best = min(scored)
            return {"lr": best[1], "loss_after": best[0]}
        if question == "free_bias":  # the batch loss as b1[i] = beta varies: piecewise quadratic in beta
            i = int(param[3:-1])
            first = layers[0]
            kinks, pieces = [], []
            for e in batch:  # unit i's pre-activation is u + beta; the output is base + col * relu(u + beta)
                u = sum((Fraction(w) * Fraction(v) for w, v in zip(first["W"][i], e["x"], strict=True)),
                        Fraction(0))
                off = [{**layer} for layer in layers]
                off[0] = {**first, "b": [Fraction(-10**9) if j == i else b for j, b in enumerate(first["b"])]}
                base = forward(off, e["x"])[1][-1]
                col = [Fraction(row[i]) for row in layers[1]["W"]]
                kinks.append(-u)
                pieces.append((u, [y - Fraction(t) for y, t in zip(base, e["t"], strict=True)], col))
            ordered = sorted(set(kinks))

            def at(beta):
                moved = [{**layer} for layer in layers]
                moved[0] = {**first, "b": [beta if j == i else b for j, b in enumerate(first["b"])]}
                return loss(moved)

            candidates = list(ordered)
            bounds = list(zip(ordered, [*ordered[1:], None], strict=True))
            for low, high in bounds:  # beta in [low, high]: the examples with -u <= low are active
                active = [(u, d, col) for u, d, col in pieces if -u <= low]
                norm = sum((c * c for c in active[0][2]), Fraction(0))
                top = sum((sum((c * x for c, x in zip(col, d, strict=True)), Fraction(0)) + norm * u
                           for u, d, col in active), Fraction(0))
                vertex = -top / (len(active) * norm)
                candidates.append(max(low, vertex) if high is None else min(max(low, vertex), high))
            scored = sorted((at(beta), beta) for beta in candidates)
            value, beta = scored[0]
            alive = sum(1 for u, _, _ in pieces if u + beta > 0)
            return {"b": beta, "loss": value, "active_examples": alive}
        g = grads(layers)
        if question == "directional":
            return {"derivative": sum((g[name] * Fraction(d) for name, d in direction.items()), Fraction(0))}
        if question == "step_grad":
            after = grads(moved(layers, Fraction(lr), g))
            return {"rows": [{"param": name, "grad": after[name]} for name in wrt]}
        if question == "largest":
            best = max(wrt, key=lambda name: (abs(g[name]), -wrt.index(name)))
            return {"param": best, "grad": g[best]}
        # "exact_range": the loss along p + s is piecewise quadratic in s; S(h) is exact while p - h and
        # p + h stay on pieces of the quadratic of p's own piece
        kind, (head, tail) = param[0], param[1:].split("[", 1)
        at_k, at = int(head), [int(i) for i in tail.rstrip("]").split("][")]

        def along(e, s, sign):
            """(value, one-sided slope in s) of every pre-activation at p + sign * s."""
            a = [(Fraction(v), Fraction(0)) for v in e["x"]]
            out = []
            for k, layer in enumerate(layers, start=1):
                z = []
                for i, (row, b) in enumerate(zip(layer["W"], layer["b"], strict=True)):
                    value, slope = Fraction(b), Fraction(0)
                    if kind == "b" and (k, i) == (at_k, at[0]):
                        value, slope = value + sign * s, slope + sign
                    for j, (w, (v, dv)) in enumerate(zip(row, a, strict=True)):
                        w = Fraction(w)
                        if kind == "W" and (k, i, j) == (at_k, at[0], at[1]):
                            w += sign * s
                            slope += sign * v
                        value, slope = value + w * v, slope + w * dv
                    z.append((value, slope))
                out.append(z)
                if layer["activation"] == "relu":  # relu of (value, slope): on when rising through 0
                    a = [(v, dv) if v > 0 or (v == 0 and dv > 0) else (Fraction(0), Fraction(0))
                         for v, dv in z]
                else:
                    a = z
            return out

        def switches(sign):
            """The s > 0 at which some hidden pre-activation along p + sign * s reaches 0, in order."""
            s = Fraction(0)
            for _ in range(256):  # a pre-activation piecewise linear in s crosses 0 finitely often
                roots = [s - v / dv for e in batch for z in along(e, s, sign)[:-1] for v, dv in z
                         if v != 0 and dv != 0 and (v > 0) != (dv > 0)]
                if not roots:
                    return
                s = min(roots)
                yield s

        exact = g[param]

        def gap(h):
            return loss(shifted(layers, param, h)) - loss(shifted(layers, param, -h)) - 2 * h * exact

        from heapq import merge
        from itertools import chain

        top, low = None, Fraction(0)
        for high in chain(merge(switches(1), switches(-1)), [None]):  # h-intervals between the ends
            if high == low:
                continue
            inside = [low + k for k in (1, 2, 3)] if high is None else [low + (high - low) * k / 4
                                                                        for k in (1, 2, 3)]
            if any(gap(h) != 0 for h in inside):
                top = low
                break
            low = high
        if top is None:
            return {"grad": exact, "H": None, "side": None, "layer": None, "unit": None, "example": None}
        for side, sign in (("+", 1), ("-", -1)):
            for n, e in enumerate(batch):
                pre = forward(shifted(layers, param, sign * top), e["x"])[0]
                for k, i in ((m, i) for m in range(1, len(layers)) for i in range(len(pre[m - 1]))):
                    if pre[k - 1][i] == 0:
                        return {"grad": exact, "H": top, "side": side, "layer": k, "unit": i, "example": n}
        raise ValueError("no pre-activation is 0 at the end of the exact range")

    out = answer(network, batch, question, **given)
    return out if list(out) == ["rows"] else {"rows": [out]}


def network_text(inputs):
    return {"network": ("dict with the list of layers, see the conventions", inputs["network"]),
            "batch": ("list of examples {'x': input, 't': target}", inputs["batch"])}


def _layer(W, b, activation):
    return {"W": W, "b": b, "activation": activation}


API = api(CONVENTIONS)


# (input widths, hidden widths per layer, output widths, batch sizes) per level
SIZES = {
    1: ((2, 3), [(2, 3)], (1, 1), (1, 2)),
    2: ((2, 3), [(3, 4)], (1, 2), (1, 2)),
    3: ((3, 3), [(3, 4), (2, 3)], (1, 2), (1, 3)),
    4: ((3, 4), [(4, 5), (3, 4)], (1, 2), (2, 3)),
    5: ((4, 4), [(4, 6), (3, 5), (2, 4)], (1, 3), (2, 4)),
}


def odd_multiple(draw: Draw, bits: int, bound: int = 1) -> F:
    """An odd multiple of 2**-bits in (-bound, bound)."""
    half = bound * 2 ** (bits - 1)
    return F(2 * draw.integer(-half, half - 1) + 1, 2**bits)


def _network(draw: Draw, widths: list[int], batch: list[dict]) -> dict:
    """Affine layers between the given widths: ReLU on the hidden ones, identity on the last.

    Weights are multiples of 1/4 and inputs of 1/2, and layer k's biases are odd multiples of
    2**-(4k): W @ a is then a multiple of a coarser power of two than the bias, so no
    pre-activation is exactly 0 and no output equals its target (a multiple of 1/4). A hidden
    unit whose W @ a is negative on most examples has its row negated (W @ a becomes -W @ a),
    so every unit is active on at least half of the batch and dead ReLUs are rare by
    construction (the "dead" gradient variant kills one on purpose afterwards)."""
    layers = []
    activations = [[F(v) for v in e["x"]] for e in batch]
    for k, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        W = [[nonzero_dyadic(draw, -2, 2, 2) for _ in range(fan_in)] for _ in range(fan_out)]
        b = [odd_multiple(draw, 4 * (k + 1)) for _ in range(fan_out)]
        hidden = k < len(widths) - 2
        if hidden:
            for i, row in enumerate(W):
                dots = [sum((w * v for w, v in zip(row, a, strict=True)), F(0)) + b[i] for a in activations]
                if 2 * sum(1 for z in dots if z > 0) < len(dots):
                    W[i] = [-w for w in row]
            activations = [[max(sum((w * v for w, v in zip(row, a, strict=True)), F(0)) + bi, F(0))
                            for row, bi in zip(W, b, strict=True)] for a in activations]
            if any(not any(a) for a in activations):  # refused here, before any key is computed
                raise Reject("an example has every unit of a hidden layer dead")
        layers.append(_layer(W, b, "relu" if hidden else "identity"))
    return {"layers": layers}


def _batch(draw: Draw, size: int, d_in: int, d_out: int) -> list[dict]:
    return [{"x": [nonzero_dyadic(draw, -2, 2, 1) for _ in range(d_in)],
             "t": [draw.dyadic(-2, 2, 2) for _ in range(d_out)]} for _ in range(size)]


def _widths(draw: Draw, level: int, deep: bool = False, multi: bool = False) -> list[int]:
    d_in, hidden, d_out, _ = SIZES[level]
    hidden = [draw.integer(*h) for h in hidden]
    if deep and len(hidden) < 2:
        hidden.append(draw.integer(2, 3))
    out = draw.integer(max(2 if multi else 1, d_out[0]), max(2 if multi else 1, d_out[1]))
    return [draw.integer(*d_in), *hidden, out]


STEP = ("One gradient-descent step with learning rate lr replaces every weight and bias p (all layers) by "
        "p - lr * dL/dp, with L the batch-mean loss and the gradient taken at the current weights. ")


QUESTIONS = {
    "active": ("For every example of `batch`, give how many hidden units (ReLU units of every layer but the "
               "last) have a positive pre-activation, the network output, and the example's loss.",
               '{"rows": [{"active_units": int, "output": [Fraction, ...], "loss": Fraction}, ...]}  '
               "(one row per example, in batch order)"),
    "step_loss": (STEP + "Give the batch-mean loss after one such step with the learning rate `lr`.",
                  '{"loss_after": Fraction}'),
    "best_lr": (STEP + "Of the learning rates in `candidates`, which one gives the lowest batch-mean loss "
                       "after "
                "one step (each candidate tried from the same starting weights)? On a tie, the smallest "
                "learning rate. Give it and that loss.", '{"lr": Fraction, "loss_after": Fraction}'),
    "free_bias": ("Keep every weight and every bias fixed except `param`, a bias of the first layer, which "
                  "may take any real value (so the pre-activation of its unit may be 0 for some example; "
                  "relu(0) = 0). Give the value of `param` that minimises the batch-mean loss (on a tie, the "
                  "smallest such value), that minimum loss, and for how many examples of the batch the unit "
                  "of `param` then has a positive pre-activation.",
                  '{"b": Fraction, "loss": Fraction, "active_examples": int}'),
    "directional": ("Moving the parameters along the direction `direction` (a dict from parameter name to "
                    "its component; parameters not named do not move), at what rate does the batch-mean loss "
                    "change at the current weights? That is d/ds L(theta + s * direction) at s = 0.",
                    '{"derivative": Fraction}'),
    "step_grad": (STEP + "After one step with the learning rate `lr`, give the gradient of the batch-mean "
                         "loss "
                  "with respect to each name in `wrt`, at the new weights.",
                  '{"rows": [{"param": name, "grad": Fraction}, ...]}  '
                  "(one row per name in `wrt`, in order)"),
    "largest": ("Of the parameters named in `wrt`, which has the gradient of largest absolute value (the "
                "gradient of the batch-mean loss at the current weights)? On a tie, the one listed first. "
                "Give its name and its gradient.", '{"param": name, "grad": Fraction}'),
    "exact_range": ("A gradient check estimates dL/dp for the parameter `param` by the symmetric "
                    "difference S(h) = (L(p + h) - L(p - h)) / (2 h), every other parameter fixed, L the "
                    "batch-mean loss (a pre-activation at p + h or p - h may be exactly 0; relu(0) = 0). "
                    "Give the exact derivative dL/dp at the current weights; the largest H such that "
                    "S(h) equals dL/dp exactly for every step h with 0 < h <= H; and the hidden unit whose "
                    "pre-activation is exactly 0 at the end of that range: the side ('+' if at p + H, '-' if "
                    "at p - H), its layer (counted from 1) and unit index (from 0), and the index of the "
                    "example of `batch` (from 0) on which it is 0 (in these tasks exactly one hidden "
                    "pre-activation of one example is 0 at p + H or p - H).",
                    '{"grad": Fraction, "H": Fraction, "side": "+" or "-", "layer": int, "unit": int, '
                    '"example": int}'),
}


GIVEN = {"lr": "learning rate", "candidates": "list of candidate learning rates",
          "wrt": "list of names 'W<k>[i][j]' or "
                 "'b<k>[i]'", "direction": "dict from parameter name to Fraction",
          "param": "the parameter name"}


def question_prompt(inputs):
    question, shape = QUESTIONS[inputs["question"]]
    given = {k: (description, inputs[k]) for k, description in GIVEN.items() if k in inputs}
    return prompt(question, {**network_text(inputs), **given,
                             "question": ("the question asked, as a word", inputs["question"])},
                  single_row(shape),
                  "the network's own units; loss in squared output units; learning rates and steps in "
                  "parameter units per gradient unit" if inputs["question"] in ("step_loss", "best_lr")
                  else "the network's own units")


CANDIDATE_RATES = tuple(F(k, 64) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))


def question_builder(task_id, inputs):
    meta = {"network": inputs["network"], "batch": inputs["batch"], "mlp_question": inputs["question"]}
    return TaskDef(task_id, "backprop", inputs, mlp_question_rows, question_prompt, API, POLICY,
                   tags=("forward" if inputs["question"] in ("active", "step_loss", "best_lr", "free_bias")
                         else "gradient", inputs["question"]), meta=meta)


def by_level(first, upper):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper(draw, level)

    return sample


UPPER = {level: question_builder for level in (2, 3, 4, 5)}
