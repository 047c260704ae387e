"""Backprop tasks (dl-009..dl-016): exact forward passes and gradients of small ReLU networks.

Every network is piecewise linear (affine layers, ReLU, squared error) with rational weights,
so activations, losses and gradients are exact Fractions. verify cross-checks every gradient
against an exact symmetric finite difference (exactgrade.rational.finite_difference), which
refuses to straddle a ReLU kink.

Families: mlp_forward (dl-009) and mlp_gradient (dl-010..016). The gradient sampler draws one
variant per instance (plain, dead unit, input gradient, batch mean, deep, multi-output,
identical units) on a network whose width, depth and batch grow with the level; weights are
multiples of 1/4, inputs of 1/2, targets of 1/4, so every pre-activation is a multiple of 1/32
or coarser and a finite-difference step of 1/1024 keeps far from every kink (the check refuses
the instance otherwise). Tags, zero_reason and the identical-unit pairs are derived from the
inputs by the builder, so a canonical task and a generated one are described alike.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field, dl_family, nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Branch, Draw, Reject
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


def mlp_forward_rows(network, batch):
    from fractions import Fraction

    rows = []
    for example in batch:
        a = [Fraction(v) for v in example["x"]]
        pre_activations = []
        for layer in network["layers"]:
            z = [sum((Fraction(w) * v for w, v in zip(row, a, strict=True)), Fraction(0)) + Fraction(b)
                 for row, b in zip(layer["W"], layer["b"], strict=True)]
            pre_activations.append(z)
            a = [max(v, Fraction(0)) for v in z] if layer["activation"] == "relu" else z
        loss = sum(((y - Fraction(t)) ** 2 for y, t in zip(a, example["t"], strict=True)), Fraction(0)) / 2
        rows.append({"pre_activations": pre_activations, "output": a, "loss": loss})
    return {"rows": rows}


def mlp_gradient_rows(network, batch, wrt):
    from fractions import Fraction

    layers = network["layers"]
    total = {}
    for example in batch:
        activations = [[Fraction(v) for v in example["x"]]]
        pre_activations = []
        for layer in layers:
            z = [sum((Fraction(w) * v for w, v in zip(row, activations[-1], strict=True)), Fraction(0))
                 + Fraction(b) for row, b in zip(layer["W"], layer["b"], strict=True)]
            pre_activations.append(z)
            activations.append([max(v, Fraction(0)) for v in z] if layer["activation"] == "relu" else z)
        # dL/da for the output layer, then walk back: delta = dL/dz, upstream = dL/da_prev.
        upstream = [y - Fraction(t) for y, t in zip(activations[-1], example["t"], strict=True)]
        for k in range(len(layers), 0, -1):
            layer, z = layers[k - 1], pre_activations[k - 1]
            if layer["activation"] == "relu":
                delta = [g if v > 0 else Fraction(0) for g, v in zip(upstream, z, strict=True)]
            else:
                delta = upstream
            a_prev = activations[k - 1]
            for i, d in enumerate(delta):
                total[f"b{k}[{i}]"] = total.get(f"b{k}[{i}]", Fraction(0)) + d
                for j, v in enumerate(a_prev):
                    total[f"W{k}[{i}][{j}]"] = total.get(f"W{k}[{i}][{j}]", Fraction(0)) + d * v
            upstream = [sum((Fraction(layer["W"][i][j]) * delta[i] for i in range(len(delta))), Fraction(0))
                        for j in range(len(a_prev))]
        for j, g in enumerate(upstream):
            total[f"x[{j}]"] = total.get(f"x[{j}]", Fraction(0)) + g
    return {"rows": [{"param": name, "grad": total[name] / len(batch)} for name in wrt]}


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


def _network_text(inputs):
    return {"network": ("dict with the list of layers, see the conventions", inputs["network"]),
            "batch": ("list of examples {'x': input, 't': target}", inputs["batch"])}


def _forward_prompt(inputs):
    return prompt(
        "Run the forward pass of `network` on every example of `batch`. For each example give every "
        "layer's pre-activation vector z (in layer order), the network output y, and the squared-error "
        "loss L = 1/2 * sum_k (y_k - t_k)**2 of that example.",
        _network_text(inputs),
        '{"rows": [{"pre_activations": [[Fraction, ...] per layer], "output": [Fraction, ...], '
        '"loss": Fraction}, ...]}  (one row per example, in batch order)',
        "the network's own units (pre-activations and outputs); loss in squared output units",
    )


def _gradient_prompt(inputs):
    return prompt(
        "Compute the exact gradient of the loss (the mean over `batch` of 1/2 * ||y - t||**2) with respect "
        "to each parameter or input named in `wrt`, at the given weights.",
        {**_network_text(inputs),
         "wrt": ("list of names 'W<k>[i][j]', 'b<k>[i]' or 'x[j]'", inputs["wrt"])},
        '{"rows": [{"param": name, "grad": Fraction}, ...]}  (one row per name in `wrt`, in that order)',
        "dL/dparameter: loss units per unit of the parameter",
    )


def _layer(W, b, activation):
    return {"W": W, "b": b, "activation": activation}


def _all_names(network, with_inputs=False):
    names = []
    for k, layer in enumerate(network["layers"], start=1):
        for i, row in enumerate(layer["W"]):
            names += [f"W{k}[{i}][{j}]" for j in range(len(row))]
        names += [f"b{k}[{i}]" for i in range(len(layer["b"]))]
    if with_inputs:
        names += [f"x[{j}]" for j in range(len(network["layers"][0]["W"][0]))]
    return names


FD_STEP = F(1, 1024)
_API = api(CONVENTIONS)

# ---------------------------------------------------------------------------- samplers

# (input widths, hidden widths per layer, output widths, batch sizes) per level
_SIZES = {
    1: ((2, 3), [(2, 3)], (1, 1), (1, 2)),
    2: ((2, 3), [(3, 4)], (1, 2), (1, 2)),
    3: ((3, 3), [(3, 4), (2, 3)], (1, 2), (1, 3)),
    4: ((3, 4), [(4, 5), (3, 4)], (1, 2), (2, 3)),
    5: ((4, 4), [(4, 6), (3, 5), (2, 4)], (1, 3), (2, 4)),
}


def _odd_multiple(draw: Draw, bits: int, bound: int = 1) -> F:
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
        b = [_odd_multiple(draw, 4 * (k + 1)) for _ in range(fan_out)]
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
    d_in, hidden, d_out, _ = _SIZES[level]
    hidden = [draw.integer(*h) for h in hidden]
    if deep and len(hidden) < 2:
        hidden.append(draw.integer(2, 3))
    out = draw.integer(max(2 if multi else 1, d_out[0]), max(2 if multi else 1, d_out[1]))
    return [draw.integer(*d_in), *hidden, out]


def sample_forward(draw: Draw, level: int) -> dict:
    widths = _widths(draw, level)
    low, high = _SIZES[level][3]
    batch = _batch(draw, draw.integer(low + 1, high + 1), widths[0], widths[-1])
    return {"network": _network(draw, widths, batch), "batch": batch}


GRADIENT_VARIANTS = ("plain", "dead", "input", "batch", "deep", "multi", "identical")


def sample_gradient(draw: Draw, level: int) -> dict:
    """One of GRADIENT_VARIANTS on a network of the level's size; wrt holds 4 + 2 * level names
    (all of them when there are fewer), always the dead unit's or both identical units'."""
    variant = draw.choice(GRADIENT_VARIANTS)
    widths = _widths(draw, level, deep=variant == "deep", multi=variant == "multi")
    low, high = _SIZES[level][3]
    size = 1 if variant == "input" else draw.integer(max(low, 2 if variant == "batch" else 1), max(high, 2))
    batch = _batch(draw, size, widths[0], widths[-1])
    network = _network(draw, widths, batch)
    first = network["layers"][0]
    must = []
    if variant == "dead":  # push unit i of layer 1 below zero on every example
        i = draw.below(len(first["b"]))
        reach = max(sum((w * x for w, x in zip(first["W"][i], e["x"], strict=True)), F(0)) for e in batch)
        first["b"][i] = -reach - abs(_odd_multiple(draw, 4))
        must = [f"W1[{i}][{j}]" for j in range(widths[0])] + [f"b1[{i}]", f"W2[0][{i}]"]
    if variant == "identical":  # unit i' copies unit i, in and out
        i, twin = draw.sample(range(len(first["b"])), 2)
        first["W"][twin], first["b"][twin] = list(first["W"][i]), first["b"][i]
        for row in network["layers"][1]["W"]:
            row[twin] = row[i]
        must = [name for j in range(widths[0]) for name in (f"W1[{i}][{j}]", f"W1[{twin}][{j}]")]
        must += [f"b1[{i}]", f"b1[{twin}]", f"W2[0][{i}]", f"W2[0][{twin}]"]
    if variant == "input":
        wrt = [f"x[{j}]" for j in range(widths[0])]
    else:
        names = _all_names(network)
        count = min(len(names), max(4 + 2 * level, 2 * len(must) + 1))
        chosen = set(must) | set(draw.sample([n for n in names if n not in must], max(0, count - len(must))))
        wrt = [n for n in names if n in chosen]
    return {"network": network, "batch": batch, "wrt": wrt}


# ---------------------------------------------------------------------------- levels 2-5

STEP = ("One gradient-descent step with learning rate lr replaces every weight and bias p (all layers) by "
        "p - lr * dL/dp, with L the batch-mean loss and the gradient taken at the current weights. ")
_QUESTIONS = {
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
_GIVEN = {"lr": "learning rate", "candidates": "list of candidate learning rates",
          "wrt": "list of names 'W<k>[i][j]' or "
                 "'b<k>[i]'", "direction": "dict from parameter name to Fraction",
          "param": "the parameter name"}


def _question_prompt(inputs):
    question, shape = _QUESTIONS[inputs["question"]]
    given = {k: (description, inputs[k]) for k, description in _GIVEN.items() if k in inputs}
    return prompt(question, {**_network_text(inputs), **given,
                             "question": ("the question asked, as a word", inputs["question"])},
                  single_row(shape),
                  "the network's own units; loss in squared output units; learning rates and steps in "
                  "parameter units per gradient unit" if inputs["question"] in ("step_loss", "best_lr")
                  else "the network's own units")


_CANDIDATE_RATES = tuple(F(k, 64) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))


def sample_forward_question(draw: Draw, level: int) -> dict:
    base = sample_forward(draw, level)
    if level == 5:
        return sample_free_bias(draw)
    question = {2: "active", 3: "step_loss", 4: "best_lr"}[level]
    extra: dict = {}
    if question == "step_loss":
        extra = {"lr": draw.choice(_CANDIDATE_RATES[:8])}
    if question == "best_lr":
        extra = {"candidates": sorted(draw.sample(_CANDIDATE_RATES, draw.integer(4, 6)))}
    return {**base, "question": question, **extra}


def free_bias_mistakes(inputs) -> dict[str, F]:
    """mlp_forward L5's named mistakes: the vertex of the quadratic with every example active (the
    ReLU ignored), and the vertex within the piece of the current bias only (a local minimum)."""
    network, batch, name = inputs["network"], inputs["batch"], inputs["param"]
    net = rational.piecewise.layers(network)
    i = int(name[3:-1])
    current = F(network["layers"][0]["b"][i])

    def loss_at(beta):
        return rational.loss(rational.piecewise.perturb(network, batch, name, beta - current)[0], batch)

    def vertex(points):  # the quadratic through three losses of one piece
        (x0, y0), (x1, y1), (x2, y2) = points
        a = ((y2 - y0) / (x2 - x0) - (y1 - y0) / (x1 - x0)) / (x2 - x1)
        b = (y1 - y0) / (x1 - x0) - a * (x0 + x1)
        return -b / (2 * a)

    kinks = sorted({-(rational.forward(net, [F(v) for v in e["x"]]).pre[0][i] - current) for e in batch})
    right = max(kinks) + 1
    everyone = vertex([(right + k, loss_at(right + k)) for k in range(3)])
    low = max((k for k in kinks if k < current), default=None)
    high = min((k for k in kinks if k > current), default=None)
    span = [current + F(k, 8) * ((high - current) if high is not None else 1) for k in (1, 2, 3)] \
        if low is None or high is None else [low + (high - low) * F(k, 4) for k in (1, 2, 3)]
    local = vertex([(x, loss_at(x)) for x in span]) if low is not None else current
    if low is not None:
        local = max(low, local) if high is None else min(max(low, local), high)
    return {"every example active": everyone, "the current piece only": local}


def sample_free_bias(draw: Draw) -> dict:
    """One hidden layer of 3-4 units, 4-6 examples, 1-2 outputs; `param` a first-layer bias whose
    loss is not flat at its minimum (the unit dead on every example must not be optimal)."""
    widths = [draw.integer(2, 3), draw.integer(3, 4), draw.integer(1, 2)]
    batch = _batch(draw, draw.integer(4, 6), widths[0], widths[-1])
    network = _network(draw, widths, batch)
    inputs = {"network": network, "batch": batch, "question": "free_bias",
              "param": f"b1[{draw.below(widths[1])}]"}
    key = mlp_question_rows(**inputs)["rows"][0]
    dead = rational.loss(rational.piecewise.perturb(network, batch, inputs["param"], F(-10**6))[0], batch)
    if key["loss"] >= dead:
        raise Reject("the unit dead on every example is optimal (the minimiser is not unique)")
    if any(wrong == key["b"] for wrong in free_bias_mistakes(inputs).values()):
        raise Reject("a named mistake gives the optimal bias")
    return inputs


def sample_gradient_question(draw: Draw, level: int) -> dict:
    base = sample_gradient(draw, min(level, 4))  # L5 on L4's two hidden layers: exact Fractions stay small
    if any(name.startswith("x[") for name in base["wrt"]):
        base["wrt"] = _all_names(base["network"])[:4 + 2 * level]
    question = {2: "directional", 3: "step_grad", 4: "largest", 5: "exact_range"}[level]
    names = _all_names(base["network"])
    if question == "directional":
        chosen = draw.sample(names, min(len(names), draw.integer(3, 6)))
        return {"network": base["network"], "batch": base["batch"], "question": question,
                "direction": {n: nonzero_dyadic(draw, -2, 2, 1) for n in names if n in chosen}}
    if question == "step_grad":
        return {**base, "question": question, "lr": draw.choice(_CANDIDATE_RATES[:6])}
    if question == "largest":
        return {**base, "question": question}
    network, batch = base["network"], base["batch"]
    param = draw.choice([n for n in names if n[1:].startswith("1[")])  # a first-layer one: units behind it
    inputs = {"network": network, "batch": batch, "question": question, "param": param}
    key = mlp_question_rows(**inputs)["rows"][0]
    if key["H"] is None:
        raise Reject("the symmetric difference is exact for every step")
    problems = exact_range_problems(inputs, key)
    if problems:
        raise Reject(problems[0])
    return inputs  # a deeper unit ends the range in about half of them, the parameter's own in the rest


def _layer_of(name):
    return _unit_of(name)[0]


def _unit_of(name):
    """(layer, unit, input index or None for a bias) of a parameter name."""
    k, rest = name[1:].split("[", 1)
    indices = [int(i) for i in rest.rstrip("]").split("][")]
    return int(k), indices[0], indices[1] if name[0] == "W" else None


def own_unit_range(inputs) -> F | None:
    """mlp_gradient L5's named mistake: the range ends where the parameter's own unit first reaches 0
    on some example (its pre-activation moves linearly with p; deeper units ignored)."""
    network, batch = inputs["network"], inputs["batch"]
    k, unit, j = _unit_of(inputs["param"])
    net = rational.piecewise.layers(network)
    ends = []
    for e in batch:
        trace = rational.forward(net, [F(v) for v in e["x"]])
        reads = F(1) if j is None else (trace.post[k - 2] if k > 1 else trace.x)[j]
        if reads != 0:
            ends.append(abs(trace.pre[k - 1][unit] / reads))
    return min(ends, default=None)


def _power_of_two(x: F) -> bool:
    return x > 0 and (x.numerator == 1 or x.denominator == 1) and \
        x.numerator & (x.numerator - 1) == 0 and x.denominator & (x.denominator - 1) == 0


def exact_range_problems(inputs, key) -> list[str]:
    """Why an exact_range key cannot be posed: not exactly one hidden pre-activation at 0 at p + H
    and p - H (the asked unit would be ambiguous), or H a power of two (round 1's grid of steps
    2**-k would find it)."""
    network, batch, param = inputs["network"], inputs["batch"], inputs["param"]
    H = F(key["H"])
    zeros = 0
    for sign in (1, -1):
        moved = rational.piecewise.layers(rational.piecewise.perturb(network, batch, param, sign * H)[0])
        for e in batch:
            trace = rational.forward(moved, [F(v) for v in e["x"]])
            zeros += sum(1 for z in trace.pre[:-1] for v in z if v == 0)
    problems = []
    if zeros != 1:
        problems.append(f"{zeros} hidden pre-activations are 0 at p + H or p - H, not one")
    if _power_of_two(H):
        problems.append("H is a power of two (round 1's grid of steps 2**-k finds it)")
    return problems


def _question_builder(task_id, inputs):
    meta = {"network": inputs["network"], "batch": inputs["batch"], "mlp_question": inputs["question"]}
    return TaskDef(task_id, "backprop", inputs, mlp_question_rows, _question_prompt, _API, POLICY,
                   tags=("forward" if inputs["question"] in ("active", "step_loss", "best_lr", "free_bias")
                         else "gradient", inputs["question"]), meta=meta)


def _too_many_zero_gradients(task):
    """Half or more of the asked gradients exactly zero (dead units answer a constant)."""
    rows = task.expected.get("rows", []) if isinstance(task.expected, dict) else []
    grads = [row["grad"] for row in rows if "grad" in row]
    if grads and 2 * sum(1 for g in grads if g == 0) >= len(grads):
        return f"{sum(1 for g in grads if g == 0)} of {len(grads)} gradients are exactly zero"
    return None


def _collapsed_output(task):
    """An example whose output equals the last layer's bias (every unit feeding it dead)."""
    layers = task.inputs["network"]["layers"]
    bias = [F(b) for b in layers[-1]["b"]]
    for example in task.inputs["batch"]:
        net = rational.piecewise.layers(task.inputs["network"])
        trace = rational.forward(net, [F(v) for v in example["x"]])
        if list(trace.output) == bias or all(v <= 0 for v in trace.pre[-2] if len(layers) > 1):
            return "an example's output is the last layer's bias (every hidden unit of the last layer dead)"
    return None


def _bias_on_kink(task):
    """mlp_forward L5's optimum makes some example's pre-activation exactly 0 (not a vertex)."""
    if task.inputs.get("question") != "free_bias":
        return False
    net = rational.piecewise.layers(task.inputs["network"])
    i = int(task.inputs["param"][3:-1])
    moved = F(answer_field(task, "b")) - F(task.inputs["network"]["layers"][0]["b"][i])
    return any(rational.forward(net, [F(v) for v in e["x"]]).pre[0][i] + moved == 0
               for e in task.inputs["batch"])


def _deeper_unit_ends(task):
    """mlp_gradient L5: a unit of a later layer than the parameter's ends the exact range."""
    return task.inputs.get("question") == "exact_range" and answer_field(task, "layer") > _layer_of(
        task.inputs["param"])


def _ends_below(task):
    return task.inputs.get("question") == "exact_range" and answer_field(task, "side") == "-"


def _own_unit_ends(task):
    return task.inputs.get("question") == "exact_range" and answer_field(task, "layer") == _layer_of(
        task.inputs["param"])


# ---------------------------------------------------------------------------- builders


def _dead_units(network, batch):
    """(layer, unit) of every ReLU unit whose pre-activation is < 0 on every example."""
    net = rational.piecewise.layers(network)
    traces = [rational.forward(net, [F(v) for v in e["x"]]) for e in batch]
    return {(k, i) for k, layer in enumerate(net, start=1) if layer.activation == "relu"
            for i in range(len(layer.b)) if all(t.pre[k - 1][i] < 0 for t in traces)}


def _reads_dead_unit(name, dead):
    """The parameter belongs to a dead unit or reads a dead unit's (zero) output."""
    if name.startswith("x["):
        return False
    layer, rest = name[1:].split("[", 1)
    indices = [int(n) for n in rest.rstrip("]").split("][")]
    k = int(layer)
    return (k, indices[0]) in dead or (name[0] == "W" and (k - 1, indices[1]) in dead)


def _identical_pairs(network, wrt):
    """[name, name] pairs whose gradients must be equal: units of a hidden layer with the same
    incoming row, bias and outgoing column."""
    layers = network["layers"]
    pairs = []
    for k in range(1, len(layers)):
        W, b, following = layers[k - 1]["W"], layers[k - 1]["b"], layers[k]["W"]
        for i in range(len(b)):
            for twin in range(i + 1, len(b)):
                if W[i] == W[twin] and b[i] == b[twin] and all(row[i] == row[twin] for row in following):
                    names = [(f"W{k}[{i}][{j}]", f"W{k}[{twin}][{j}]") for j in range(len(W[i]))]
                    names += [(f"b{k}[{i}]", f"b{k}[{twin}]")]
                    names += [(f"W{k + 1}[{r}][{i}]", f"W{k + 1}[{r}][{twin}]")
                              for r in range(len(following))]
                    pairs += [[x, y] for x, y in names if x in wrt and y in wrt]
    return pairs


_ZERO_REASONS = {
    "dl-011": "hidden unit 1 is inactive on this input (pre-activation -3/4 < 0), so the "
              "gradients of W1[1][*], b1[1] and W2[0][1] are exactly 0: that is the point "
              "of the task (a dead ReLU unit learns nothing from this example).",
}


def _gradient_zero_reason(task_id, network, batch, wrt):
    """Why some gradients are exactly 0, when each one is explained by a unit inactive on every
    example (None otherwise: an unexplained zero is refused as an instance)."""
    if task_id in _ZERO_REASONS:
        return _ZERO_REASONS[task_id]
    try:
        grads = rational.gradients(network, batch)
        dead = _dead_units(network, batch)
    except rational.RationalError:
        return None  # at a kink: the check refuses the instance
    zeros = [name for name in wrt if grads.get(name) == 0]
    if not zeros or not all(_reads_dead_unit(name, dead) for name in zeros):
        return None
    units = ", ".join(f"layer {k} unit {i}" for k, i in sorted(dead))
    return (f"ReLU {units} has a negative pre-activation on every example, so the gradients of "
            f"{', '.join(zeros)} (which belong to or read from it) are exactly 0: a dead unit learns "
            "nothing.")


def build_forward(task_id, inputs):
    network, batch = inputs["network"], inputs["batch"]
    return TaskDef(task_id, "backprop", inputs, mlp_forward_rows, _forward_prompt, _API, POLICY,
                   tags=("forward",), meta={"network": network, "batch": batch, "forward": True})


def build_gradient(task_id, inputs):
    """Tags: 'gradient' and the first of input-gradient, symmetry, dead-relu, deep, multi-output,
    batch-mean that applies."""
    network, batch, wrt = inputs["network"], inputs["batch"], inputs["wrt"]
    pairs = _identical_pairs(network, wrt)
    zero_reason = _gradient_zero_reason(task_id, network, batch, wrt)
    flavours = (("input-gradient", any(n.startswith("x[") for n in wrt)), ("symmetry", bool(pairs)),
                ("dead-relu", zero_reason is not None), ("deep", len(network["layers"]) > 2),
                ("multi-output", len(network["layers"][-1]["b"]) > 1), ("batch-mean", len(batch) > 1))
    flavour = next((name for name, applies in flavours if applies), None)
    meta = {"network": network, "batch": batch, "gradients_at": wrt, "fd_step": FD_STEP}
    if pairs:
        meta["equal_gradients"] = pairs
    return TaskDef(task_id, "backprop", inputs, mlp_gradient_rows, _gradient_prompt, _API, POLICY,
                   tags=("gradient", *([flavour] if flavour else [])), zero_reason=zero_reason, meta=meta)


def _by_level(first, upper):
    def sample(draw: Draw, level: int) -> dict:
        return first(draw, level) if level == 1 else upper(draw, level)

    return sample


_UPPER = {level: _question_builder for level in (2, 3, 4, 5)}

MLP_FORWARD = dl_family(
    "mlp_forward", build_forward, _by_level(sample_forward, sample_forward_question),
    "L1: every pre-activation, output and loss of a stated forward pass. L2: how many hidden units are "
    "active "
    "per example, the outputs and the batch loss. L3 (compose): the batch loss after one gradient-descent "
    "step "
    "(forward, backward, update, forward). L4 (search): the best of 4-6 learning rates for one step, ties to "
    "the smallest. L5 (regimes): the first-layer bias that minimises the batch loss with the rest fixed "
    "(piecewise quadratic: each example switches its ReLU at its own kink, the optimum may sit on one), "
    "the minimum and how many examples keep the unit active; ignoring the ReLU or minimising within the "
    "current piece never gives the key. "
    "Networks grow from 2-3 hidden units to three hidden layers; no example's output is the last bias.",
    reject=_collapsed_output, upper=_UPPER,
    branches=(Branch("the optimal bias sits on a kink", _bias_on_kink, F(1, 10), (5,)),))
MLP_GRADIENT = dl_family(
    "mlp_gradient", build_gradient, _by_level(sample_gradient, sample_gradient_question),
    "L1: the gradients of named parameters (variants plain/dead unit/input/batch/deep/multi-output/identical "
    "units). L2: the directional derivative of the loss along a stated direction. L3 (compose): the "
    "gradients "
    "after one gradient-descent step. L4 (search): the parameter of largest |gradient|, ties to the first "
    "listed. L5 (regimes of a gradient check): the exact gradient, the largest H for which the symmetric "
    "difference is exact for every step up to H (a continuous range, not a grid of steps: the loss along "
    "the parameter is piecewise quadratic, so H is where p + H or p - H first reaches a piece of another "
    "quadratic: a rational at a piece boundary, derived by tracing every pre-activation along the "
    "parameter, which no grid of steps hits), and "
    "which hidden unit, side and example reach 0 there, for a first-layer parameter of a network with two "
    "hidden layers; in about half the instances a second-layer unit (whose pre-activation is only "
    "piecewise linear in the parameter) ends the range before the parameter's own unit, so the own unit's "
    "kinks never give the key there. Fewer than half of the asked "
    "gradients are ever exactly zero.",
    reject=_too_many_zero_gradients, upper=_UPPER,
    branches=(Branch("a deeper unit ends the exact range", _deeper_unit_ends, F(1, 3), (5,)),
              Branch("the parameter's own unit ends the exact range", _own_unit_ends, F(1, 5), (5,)),
              Branch("the exact range ends below p", _ends_below, F(1, 5), (5,))))

FAMILIES = (MLP_FORWARD, MLP_GRADIENT)

# ---------------------------------------------------------------------------- canonical tasks

# 2-3-1, one hidden unit negative on the first example, a different one on the second.
_NET_231 = {"layers": [_layer([[1, -1], [F(1, 2), 2], [-1, F(1, 4)]], [F(1, 4), F(-1, 2), F(1, 8)], "relu"),
                       _layer([[2, -1, F(1, 2)]], [F(1, 4)], "identity")]}
_BATCH_231 = [{"x": [1, F(1, 2)], "t": [1]}, {"x": [F(-1, 2), 1], "t": [F(1, 2)]}]

_NET_221 = {"layers": [_layer([[1, -1], [F(1, 2), 1]], [0, F(-1, 4)], "relu"),
                       _layer([[2, -1]], [F(1, 8)], "identity")]}
_BATCH_221 = [{"x": [1, F(1, 2)], "t": [1]}]

# Hidden unit 1 has z = -3/4 < 0 on this input: every gradient through it is exactly 0.
_NET_DEAD = {"layers": [_layer([[1, F(1, 2)], [-1, F(-1, 4)]], [F(1, 4), F(1, 2)], "relu"),
                        _layer([[F(3, 2), 2]], [0], "identity")]}
_BATCH_DEAD = [{"x": [1, 1], "t": [F(1, 2)]}]

_NET_321 = {"layers": [_layer([[1, 0, -1], [F(1, 2), -1, 1]], [F(1, 8), 0], "relu"),
                       _layer([[F(3, 4), -2]], [F(-1, 4)], "identity")]}
_BATCH_321 = [{"x": [2, F(-1, 2), F(1, 2)], "t": [F(1, 4)]}]

_NET_BATCH = {"layers": [_layer([[1, -2], [-1, 1]], [F(1, 4), F(1, 4)], "relu"),
                         _layer([[1, 2]], [0], "identity")]}
_BATCH_THREE = [{"x": [1, F(1, 4)], "t": [1]}, {"x": [0, 1], "t": [0]}, {"x": [F(1, 2), F(1, 2)], "t": [2]}]

_NET_DEEP = {"layers": [_layer([[1, -1], [F(1, 2), F(1, 2)], [-1, 2]], [0, F(1, 4), F(1, 4)], "relu"),
                        _layer([[1, -1, F(1, 2)], [F(-1, 2), 1, 1]], [F(1, 8), 0], "relu"),
                        _layer([[2, -1]], [F(1, 2)], "identity")]}
_BATCH_DEEP = [{"x": [1, F(1, 2)], "t": [-1]}]

_NET_TWO_OUT = {"layers": [_layer([[1, 1], [1, -1]], [0, F(1, 2)], "relu"),
                           _layer([[1, F(-1, 2)], [F(1, 4), 1]], [F(1, 2), -1], "identity")]}
_BATCH_TWO_OUT = [{"x": [F(1, 2), F(1, 4)], "t": [1, F(-1, 2)]}]

# Two hidden units with identical incoming and outgoing weights: identical gradients, forever.
_NET_SYMMETRIC = {"layers": [_layer([[F(1, 2), F(1, 4)], [F(1, 2), F(1, 4)]], [F(1, 8), F(1, 8)], "relu"),
                             _layer([[F(3, 4), F(3, 4)]], [0], "identity")]}
_BATCH_SYMMETRIC = [{"x": [1, 2], "t": [2]}, {"x": [2, -1], "t": [-1]}]


def _gradient_task(task_id, network, batch, wrt):
    return MLP_GRADIENT.task(task_id, {"network": network, "batch": batch, "wrt": wrt})


def _names(text):
    return text.split()


TASKS = (
    MLP_FORWARD.task("dl-009", {"network": _NET_231, "batch": _BATCH_231}),
    _gradient_task("dl-010", _NET_221, _BATCH_221, _all_names(_NET_221)),
    _gradient_task("dl-011", _NET_DEAD, _BATCH_DEAD, _all_names(_NET_DEAD)),
    _gradient_task("dl-012", _NET_321, _BATCH_321, ["x[0]", "x[1]", "x[2]"]),
    _gradient_task("dl-013", _NET_BATCH, _BATCH_THREE,
                   _names("W1[0][0] W1[0][1] W1[1][0] W1[1][1] b1[0] b1[1] W2[0][0] W2[0][1]")),
    _gradient_task("dl-014", _NET_DEEP, _BATCH_DEEP,
                   _names("W1[0][0] W1[0][1] W1[1][0] W1[1][1] W1[2][0] W1[2][1] b1[0] b1[2]")),
    _gradient_task("dl-015", _NET_TWO_OUT, _BATCH_TWO_OUT,
                   _names("W2[0][0] W2[0][1] W2[1][0] W2[1][1] b2[0] b2[1] W1[0][0] W1[1][1]")),
    _gradient_task("dl-016", _NET_SYMMETRIC, _BATCH_SYMMETRIC,
                   _names("W1[0][0] W1[1][0] W1[0][1] W1[1][1] b1[0] b1[1] W2[0][0] W2[0][1]")),
)
