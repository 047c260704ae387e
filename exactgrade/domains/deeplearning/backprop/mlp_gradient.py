"""The mlp_gradient family of backprop: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

from exactgrade import rational
from exactgrade.domains.deeplearning._family import (
    answer_field,
    deeplearning_family,
    key_agrees,
    nonzero_dyadic,
)
from exactgrade.domains.deeplearning.backprop.shared import (
    API,
    CANDIDATE_RATES,
    SIZES,
    STEP,
    _batch,
    _network,
    _widths,
    batch_gradients,
    batch_loss,
    descended,
    forward_pass,
    network_text,
    odd_multiple,
    question_level,
    shifted,
    stepped,
)
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


def _check_gradients(task):
    """Every gradient equals its exact symmetric finite difference (exactgrade.rational, which refuses
    a step across a ReLU kink), and identical units get identical gradients."""
    meta, rows = task.meta, task.expected["rows"]
    names = [row["param"] for row in rows]
    if names != list(meta["gradients_at"]):
        return [f"the expected rows name {names} but meta['gradients_at'] is {list(meta['gradients_at'])}"]
    problems = []
    for i, row in enumerate(rows):
        try:
            exact = rational.finite_difference(meta["network"], meta["batch"], row["param"], meta["fd_step"])
        except rational.RationalError as error:
            refused = f"rows[{i}] ({row['param']}): finite difference refused: {error}"
            problems.append(Degenerate(refused) if isinstance(error, rational.KinkError) else refused)
            continue
        if row["grad"] != exact:
            problems.append(f"rows[{i}]['grad'] for {row['param']} is {row['grad']} but the exact symmetric "
                            f"finite difference (h = {meta['fd_step']}) is {exact}")
    grads = {row["param"]: row["grad"] for row in rows}
    problems += [f"{a} and {b} belong to identical units but their gradients {grads[a]} and {grads[b]} differ"
                 for a, b in meta.get("equal_gradients", ()) if grads[a] != grads[b]]
    return problems


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


def _gradient_prompt(inputs):
    return prompt(
        "Compute the exact gradient of the loss (the mean over `batch` of 1/2 * ||y - t||**2) with respect "
        "to each parameter or input named in `wrt`, at the given weights.",
        {**network_text(inputs),
         "wrt": ("list of names 'W<k>[i][j]', 'b<k>[i]' or 'x[j]'", inputs["wrt"])},
        '{"rows": [{"param": name, "grad": Fraction}, ...]}  (one row per name in `wrt`, in that order)',
        "dL/dparameter: loss units per unit of the parameter",
    )


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


GRADIENT_VARIANTS = ("plain", "dead", "input", "batch", "deep", "multi", "identical")


def sample_gradient(draw: Draw, level: int) -> dict:
    """One of GRADIENT_VARIANTS on a network of the level's size; wrt holds 4 + 2 * level names
    (all of them when there are fewer), always the dead unit's or both identical units'."""
    variant = draw.choice(GRADIENT_VARIANTS)
    widths = _widths(draw, level, deep=variant == "deep", multi=variant == "multi")
    low, high = SIZES[level][3]
    size = 1 if variant == "input" else draw.integer(max(low, 2 if variant == "batch" else 1), max(high, 2))
    batch = _batch(draw, size, widths[0], widths[-1])
    network = _network(draw, widths, batch)
    first = network["layers"][0]
    must = []
    if variant == "dead":  # push unit i of layer 1 below zero on every example
        i = draw.below(len(first["b"]))
        reach = max(sum((w * x for w, x in zip(first["W"][i], e["x"], strict=True)), F(0)) for e in batch)
        first["b"][i] = -reach - abs(odd_multiple(draw, 4))
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
    meta = {"network": network, "batch": batch, "gradients_at": wrt, "fd_step": FD_STEP,
            "independent": _check_gradients}
    if pairs:
        meta["equal_gradients"] = pairs
    return TaskDef(task_id, "backprop", inputs, mlp_gradient_rows, _gradient_prompt, API, POLICY,
                   tags=("gradient", *([flavour] if flavour else [])), zero_reason=zero_reason, meta=meta)

LEVEL_1 = Level(build_gradient, sample_gradient)


def sample_question_network(draw: Draw, level: int) -> dict:
    """A level-1 draw of at most level 4's size (level 5 stays on two hidden layers: exact Fractions
    stay small) whose wrt names no input."""
    base = sample_gradient(draw, min(level, 4))
    if any(name.startswith("x[") for name in base["wrt"]):
        base["wrt"] = _all_names(base["network"])[:4 + 2 * level]
    return base


# L2 (derive): the directional derivative of the loss
@uses(batch_gradients)
def directional_derivative(network, batch, direction, question=None):
    from fractions import Fraction

    g = batch_gradients(network["layers"], batch)
    return {"rows": [{"derivative": sum((g[name] * Fraction(d) for name, d in direction.items()),
                                        Fraction(0))}]}


def _check_directional_derivative(task):
    g = rational.gradients(task.inputs["network"], task.inputs["batch"])
    return key_agrees(task, {"derivative": sum((g[n] * F(d) for n, d in task.inputs["direction"].items()),
                                               F(0))})


def sample_direction(draw: Draw, level: int) -> dict:
    base = sample_question_network(draw, level)
    names = _all_names(base["network"])
    chosen = draw.sample(names, min(len(names), draw.integer(3, 6)))
    return {"network": base["network"], "batch": base["batch"], "question": "directional",
            "direction": {n: nonzero_dyadic(draw, -2, 2, 1) for n in names if n in chosen}}


LEVEL_2 = Level(question_level(
    "directional", "gradient", directional_derivative, _check_directional_derivative,
    "Moving the parameters along the direction `direction` (a dict from parameter name to its component; "
    "parameters not named do not move), at what rate does the batch-mean loss change at the current weights? "
    "That is d/ds L(theta + s * direction) at s = 0.", '{"derivative": Fraction}'), sample_direction)


# L3 (compose): the gradients after one gradient-descent step
@uses(batch_gradients, descended)
def gradients_after_step(network, batch, wrt, lr, question=None):
    from fractions import Fraction

    layers = network["layers"]
    after = batch_gradients(descended(layers, Fraction(lr), batch_gradients(layers, batch)), batch)
    return {"rows": [{"param": name, "grad": after[name]} for name in wrt]}


def _check_gradients_after_step(task):
    network, batch = task.inputs["network"], task.inputs["batch"]
    moved = stepped(network, rational.gradients(network, batch), F(task.inputs["lr"]))
    after = rational.gradients(moved, batch)
    return key_agrees(task, {"rows": [{"param": n, "grad": after[n]} for n in task.inputs["wrt"]]})


def sample_step_gradients(draw: Draw, level: int) -> dict:
    return {**sample_question_network(draw, level), "question": "step_grad",
            "lr": draw.choice(CANDIDATE_RATES[:6])}


LEVEL_3 = Level(question_level(
    "step_grad", "gradient", gradients_after_step, _check_gradients_after_step,
    STEP + "After one step with the learning rate `lr`, give the gradient of the batch-mean loss with "
    "respect to each name in `wrt`, at the new weights.",
    '{"rows": [{"param": name, "grad": Fraction}, ...]}  (one row per name in `wrt`, in order)'),
    sample_step_gradients)


# L4 (search): the parameter of largest |gradient|
@uses(batch_gradients)
def largest_gradient(network, batch, wrt, question=None):
    g = batch_gradients(network["layers"], batch)
    best = max(wrt, key=lambda name: (abs(g[name]), -wrt.index(name)))
    return {"rows": [{"param": best, "grad": g[best]}]}


def _check_largest_gradient(task):
    g, wrt = rational.gradients(task.inputs["network"], task.inputs["batch"]), task.inputs["wrt"]
    top = max(abs(g[n]) for n in wrt)
    first = next(n for n in wrt if abs(g[n]) == top)
    return key_agrees(task, {"param": first, "grad": g[first]})


def sample_largest_gradient(draw: Draw, level: int) -> dict:
    return {**sample_question_network(draw, level), "question": "largest"}


LEVEL_4 = Level(question_level(
    "largest", "gradient", largest_gradient, _check_largest_gradient,
    "Of the parameters named in `wrt`, which has the gradient of largest absolute value (the gradient of "
    "the batch-mean loss at the current weights)? On a tie, the one listed first. Give its name and its "
    "gradient.",
    '{"param": name, "grad": Fraction}'), sample_largest_gradient)


# L5 (regimes of a gradient check): the exact range of the symmetric difference
@uses(forward_pass, batch_loss, batch_gradients, shifted)
def exact_difference_range(network, batch, param, question=None):
    """The loss along p + s is piecewise quadratic in s; S(h) is exact while p - h and p + h stay on
    pieces of the quadratic of p's own piece."""
    from fractions import Fraction
    from heapq import merge
    from itertools import chain

    layers = network["layers"]
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
                a = [(v, dv) if v > 0 or (v == 0 and dv > 0) else (Fraction(0), Fraction(0)) for v, dv in z]
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

    exact = batch_gradients(layers, batch)[param]

    def gap(h):
        return (batch_loss(shifted(layers, param, h), batch) - batch_loss(shifted(layers, param, -h), batch)
                - 2 * h * exact)

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
        return {"rows": [{"grad": exact, "H": None, "side": None, "layer": None, "unit": None,
                          "example": None}]}
    for side, sign in (("+", 1), ("-", -1)):
        for n, e in enumerate(batch):
            pre = forward_pass(shifted(layers, param, sign * top), e["x"])[0]
            for k, i in ((m, i) for m in range(1, len(layers)) for i in range(len(pre[m - 1]))):
                if pre[k - 1][i] == 0:
                    return {"rows": [{"grad": exact, "H": top, "side": side, "layer": k, "unit": i,
                                      "example": n}]}
    raise ValueError("no pre-activation is 0 at the end of the exact range")


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
    and p - H (the asked unit would be ambiguous), or H a power of two (a grid of steps 2**-k
    would find it)."""
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


EXACT_INSIDE = (F(1), F(3, 4), F(1, 2), F(3, 8), F(1, 4), F(1, 8), F(1, 1024))
"""Steps, as fractions of H, at which the symmetric difference must be exact."""
INEXACT_BEYOND = tuple(1 + F(1, 2**k) for k in range(2, 13))
"""Steps just past H, as multiples of it, at least one of which must make it inexact."""


def _check_exact_difference_range(task):
    """Another way, with exactgrade.rational instead of the key's traced pieces: the gradient by
    backprop; the symmetric difference exact at 7 steps in (0, H] and inexact at one of 11 steps
    just past H; exactly one hidden pre-activation at 0 at p + H or p - H, the key's unit on the
    key's side and example; and the named mistake (the parameter's own unit only) not giving H
    where a deeper unit ends the range."""
    from exactgrade.rational.piecewise import forward, layers, loss, perturb

    inputs, row = task.inputs, task.expected["rows"][0]
    network, batch, param, H = inputs["network"], inputs["batch"], inputs["param"], row["H"]
    exact = rational.gradients(network, batch)[param]
    if row["grad"] != exact:
        return [f"grad is {row['grad']} but exactgrade.rational's backprop gives {exact}"]
    if not isinstance(H, F) or H <= 0:
        return [f"H is {H!r}, not a positive Fraction"]

    def nudged(h: F) -> dict[str, Any]:
        return perturb(network, batch, param, h)[0]

    def estimate(h: F) -> F:
        return (loss(nudged(h), batch) - loss(nudged(-h), batch)) / (2 * h)

    problems = [f"the symmetric difference at h = {H * k} is {estimate(H * k)}, not dL/dp = {exact}"
                for k in EXACT_INSIDE if estimate(H * k) != exact][:1]
    if all(estimate(H * k) == exact for k in INEXACT_BEYOND):
        problems.append(f"the symmetric difference stays exact just past H = {H}")
    moved = layers(nudged(H if row["side"] == "+" else -H))
    pre = forward(moved, [F(v) for v in batch[row["example"]]["x"]]).pre
    if not 1 <= row["layer"] < len(pre) or pre[row["layer"] - 1][row["unit"]] != 0:
        problems.append(f"unit {row['unit']} of layer {row['layer']} is not at 0 on example {row['example']} "
                        f"at p {row['side']} H")
    problems += exact_range_problems(inputs, row)
    if row["layer"] > int(param[1:].split("[", 1)[0]) and own_unit_range(inputs) == H:
        problems.append(Degenerate("the named mistake (the parameter's own unit only) gives H"))
    return problems


def sample_gradient_check(draw: Draw, level: int) -> dict:
    base = sample_question_network(draw, level)
    names = _all_names(base["network"])
    param = draw.choice([n for n in names if n[1:].startswith("1[")])  # a first-layer one: units behind it
    inputs = {"network": base["network"], "batch": base["batch"], "question": "exact_range", "param": param}
    key = exact_difference_range(**inputs)["rows"][0]
    if key["H"] is None:
        raise Reject("the symmetric difference is exact for every step")
    problems = exact_range_problems(inputs, key)
    if problems:
        raise Reject(problems[0])
    return inputs  # a deeper unit ends the range in about half of them, the parameter's own in the rest


LEVEL_5 = Level(question_level(
    "exact_range", "gradient", exact_difference_range, _check_exact_difference_range,
    "A gradient check estimates dL/dp for the parameter `param` by the symmetric difference "
    "S(h) = (L(p + h) - L(p - h)) / (2 h), every other parameter fixed, L the batch-mean loss (a "
    "pre-activation at p + h or p - h may be exactly 0; relu(0) = 0). Give the exact derivative dL/dp at "
    "the current weights; the largest H such that S(h) equals dL/dp exactly for every step h with "
    "0 < h <= H; and the hidden unit whose pre-activation is exactly 0 at the end of that range: the side "
    "('+' if at p + H, '-' if at p - H), its layer (counted from 1) and unit index (from 0), and the index "
    "of the example of `batch` (from 0) on which it is 0 (in these tasks exactly one hidden pre-activation "
    "of one example is 0 at p + H or p - H).",
    '{"grad": Fraction, "H": Fraction, "side": "+" or "-", "layer": int, "unit": int, "example": int}'),
    sample_gradient_check)


def _too_many_zero_gradients(task):
    """Half or more of the asked gradients exactly zero (dead units answer a constant)."""
    rows = task.expected.get("rows", []) if isinstance(task.expected, dict) else []
    grads = [row["grad"] for row in rows if "grad" in row]
    if grads and 2 * sum(1 for g in grads if g == 0) >= len(grads):
        return f"{sum(1 for g in grads if g == 0)} of {len(grads)} gradients are exactly zero"
    return None


def _deeper_unit_ends(task):
    """mlp_gradient L5: a unit of a later layer than the parameter's ends the exact range."""
    return task.level == 5 and answer_field(task, "layer") > _layer_of(
        task.inputs["param"])


def _ends_below(task):
    return task.level == 5 and answer_field(task, "side") == "-"


def _own_unit_ends(task):
    return task.level == 5 and answer_field(task, "layer") == _layer_of(
        task.inputs["param"])


MLP_GRADIENT = deeplearning_family(
    "mlp_gradient", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
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
    "gradients are ever exactly zero."),
    reject=_too_many_zero_gradients,
    branches=(Branch("a deeper unit ends the exact range", _deeper_unit_ends, F(1, 3), (5,)),
              Branch("the parameter's own unit ends the exact range", _own_unit_ends, F(1, 5), (5,)),
              Branch("the exact range ends below p", _ends_below, F(1, 5), (5,))))
