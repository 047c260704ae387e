"""The mlp_forward family of backprop: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field, deeplearning_family, key_agrees
from exactgrade.domains.deeplearning.backprop.shared import (
    API,
    CANDIDATE_RATES,
    SIZES,
    STEP,
    STEP_UNITS,
    _batch,
    _network,
    _widths,
    batch_gradients,
    batch_loss,
    descended,
    forward_pass,
    network_text,
    question_level,
    stepped,
)
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.family import Branch, Degenerate, Draw, Level, Reject
from exactgrade.task import TaskDef, uses


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


def _forward_prompt(inputs):
    return prompt(
        "Run the forward pass of `network` on every example of `batch`. For each example give every "
        "layer's pre-activation vector z (in layer order), the network output y, and the squared-error "
        "loss L = 1/2 * sum_k (y_k - t_k)**2 of that example.",
        network_text(inputs),
        '{"rows": [{"pre_activations": [[Fraction, ...] per layer], "output": [Fraction, ...], '
        '"loss": Fraction}, ...]}  (one row per example, in batch order)',
        "the network's own units (pre-activations and outputs); loss in squared output units",
    )


def sample_forward(draw: Draw, level: int) -> dict:
    widths = _widths(draw, level)
    low, high = SIZES[level][3]
    batch = _batch(draw, draw.integer(low + 1, high + 1), widths[0], widths[-1])
    return {"network": _network(draw, widths, batch), "batch": batch}


def _check_forward(task):
    """Every pre-activation, output and loss by exactgrade.rational's forward pass and loss (the
    network and batch the check reads are meta's, which check() holds equal to the inputs)."""
    net = rational.piecewise.layers(task.meta["network"])
    batch = task.meta["batch"]
    rows = task.expected["rows"]
    if len(rows) != len(batch):
        return [f"{len(rows)} rows for a batch of {len(batch)} examples"]
    problems = []
    for i, (row, example) in enumerate(zip(rows, batch, strict=True)):
        trace = rational.forward(net, [F(x) for x in example["x"]])
        loss = rational.loss(task.meta["network"], [example])
        if [list(z) for z in trace.pre] != row["pre_activations"] or list(trace.output) != row["output"]:
            problems.append(f"rows[{i}]: the expected activations differ from exactgrade.rational.forward")
        if row["loss"] != loss:
            problems.append(f"rows[{i}]['loss'] is {row['loss']} but exactgrade.rational gives {loss}")
    return problems


def build_forward(task_id, inputs):
    network, batch = inputs["network"], inputs["batch"]
    return TaskDef(task_id, "backprop", inputs, mlp_forward_rows, _forward_prompt, API, POLICY,
                   tags=("forward",), meta={"network": network, "batch": batch,
                                                     "independent": _check_forward})


LEVEL_1 = Level(build_forward, sample_forward)


# L2 (derive): the active hidden units, outputs and loss of each example
@uses(forward_pass)
def active_units_rows(network, batch, question=None):
    from fractions import Fraction

    rows = []
    for e in batch:
        pre, acts = forward_pass(network["layers"], e["x"])
        active = sum(1 for z in pre[:-1] for v in z if v > 0)
        pairs = zip(acts[-1], e["t"], strict=True)
        own = sum(((y - Fraction(t)) ** 2 for y, t in pairs), Fraction(0)) / 2
        rows.append({"active_units": active, "output": acts[-1], "loss": own})
    return {"rows": rows}


def _check_active_units(task):
    net, network = rational.piecewise.layers(task.inputs["network"]), task.inputs["network"]
    rows = []
    for e in task.inputs["batch"]:
        trace = rational.forward(net, [F(v) for v in e["x"]])
        rows.append({"active_units": sum(1 for z in trace.pre[:-1] for v in z if v > 0),
                     "output": list(trace.output), "loss": rational.loss(network, [e])})
    return key_agrees(task, {"rows": rows})


def sample_active_units(draw: Draw, level: int) -> dict:
    return {**sample_forward(draw, level), "question": "active"}


LEVEL_2 = Level(question_level(
    "active", "forward", active_units_rows, _check_active_units,
    "For every example of `batch`, give how many hidden units (ReLU units of every layer but the last) "
    "have a positive pre-activation, the network output, and the example's loss.",
    '{"rows": [{"active_units": int, "output": [Fraction, ...], "loss": Fraction}, ...]}  '
    "(one row per example, in batch order)"), sample_active_units)


# L3 (compose): the batch loss after one gradient-descent step
@uses(batch_loss, batch_gradients, descended)
def loss_after_step(network, batch, lr, question=None):
    from fractions import Fraction

    layers = network["layers"]
    after = descended(layers, Fraction(lr), batch_gradients(layers, batch))
    return {"rows": [{"loss_after": batch_loss(after, batch)}]}


def _check_loss_after_step(task):
    network, batch = task.inputs["network"], task.inputs["batch"]
    g = rational.gradients(network, batch)
    return key_agrees(task, {"loss_after": rational.loss(stepped(network, g, F(task.inputs["lr"])), batch)})


def sample_step_loss(draw: Draw, level: int) -> dict:
    return {**sample_forward(draw, level), "question": "step_loss", "lr": draw.choice(CANDIDATE_RATES[:8])}


LEVEL_3 = Level(question_level(
    "step_loss", "forward", loss_after_step, _check_loss_after_step,
    STEP + "Give the batch-mean loss after one such step with the learning rate `lr`.",
    '{"loss_after": Fraction}', STEP_UNITS), sample_step_loss)


# L4 (search): the best of several learning rates for one step
@uses(batch_loss, batch_gradients, descended)
def best_learning_rate(network, batch, candidates, question=None):
    from fractions import Fraction

    layers = network["layers"]
    g = batch_gradients(layers, batch)
    scored = [(batch_loss(descended(layers, Fraction(c), g), batch), Fraction(c)) for c in candidates]
    best = min(scored)
    return {"rows": [{"lr": best[1], "loss_after": best[0]}]}


def _check_best_learning_rate(task):
    network, batch = task.inputs["network"], task.inputs["batch"]
    g = rational.gradients(network, batch)
    scored = sorted((rational.loss(stepped(network, g, F(c)), batch), F(c))
                    for c in task.inputs["candidates"])
    return key_agrees(task, {"lr": scored[0][1], "loss_after": scored[0][0]})


def sample_best_lr(draw: Draw, level: int) -> dict:
    return {**sample_forward(draw, level), "question": "best_lr",
            "candidates": sorted(draw.sample(CANDIDATE_RATES, draw.integer(4, 6)))}


LEVEL_4 = Level(question_level(
    "best_lr", "forward", best_learning_rate, _check_best_learning_rate,
    STEP + "Of the learning rates in `candidates`, which one gives the lowest batch-mean loss after one "
    "step (each candidate tried from the same starting weights)? On a tie, the smallest learning rate. Give "
    "it and that loss.", '{"lr": Fraction, "loss_after": Fraction}', STEP_UNITS), sample_best_lr)


# L5 (regimes): the first-layer bias that minimises the batch loss, the rest fixed
@uses(forward_pass, batch_loss)
def best_free_bias(network, batch, param, question=None):
    """The batch loss as b1[i] = beta varies is piecewise quadratic in beta: each piece's vertex,
    clipped to the piece, and the kinks are the candidates."""
    from fractions import Fraction

    layers = network["layers"]
    i = int(param[3:-1])
    first = layers[0]
    kinks, pieces = [], []
    for e in batch:  # unit i's pre-activation is u + beta; the output is base + col * relu(u + beta)
        u = sum((Fraction(w) * Fraction(v) for w, v in zip(first["W"][i], e["x"], strict=True)), Fraction(0))
        off = [{**layer} for layer in layers]
        off[0] = {**first, "b": [Fraction(-10**9) if j == i else b for j, b in enumerate(first["b"])]}
        base = forward_pass(off, e["x"])[1][-1]
        col = [Fraction(row[i]) for row in layers[1]["W"]]
        kinks.append(-u)
        pieces.append((u, [y - Fraction(t) for y, t in zip(base, e["t"], strict=True)], col))
    ordered = sorted(set(kinks))

    def at(beta):
        moved = [{**layer} for layer in layers]
        moved[0] = {**first, "b": [beta if j == i else b for j, b in enumerate(first["b"])]}
        return batch_loss(moved, batch)

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
    return {"rows": [{"b": beta, "loss": value, "active_examples": alive}]}


def _check_best_free_bias(task):
    """Another way: the loss as a function of the free bias is quadratic between consecutive kinks
    (where an example's pre-activation of the unit is 0); on each piece the quadratic is fitted
    through three exact losses (exactgrade.rational, no coefficients derived) and its vertex clipped
    to the piece, beyond the last kink likewise; the smallest loss of those candidates and the kinks
    must be the key's, and the named mistakes must give other values."""
    from exactgrade.rational.piecewise import forward, layers, loss, perturb

    inputs = task.inputs
    network, batch, name = inputs["network"], inputs["batch"], inputs["param"]
    i = int(name[3:-1])
    current = F(network["layers"][0]["b"][i])
    net = layers(network)
    shift = [forward(net, [F(v) for v in e["x"]]).pre[0][i] - current for e in batch]
    kinks = sorted(set(-u for u in shift))

    def at(beta: F) -> F:
        return loss(perturb(network, batch, name, beta - current)[0], batch)

    candidates = list(kinks)
    for low, high in zip(kinks, [*kinks[1:], None], strict=True):
        width = (high - low) if high is not None else F(1)
        xs = [low + width * F(k, 4) for k in (1, 2, 3)]
        ys = [at(x) for x in xs]
        curve = (ys[2] - 2 * ys[1] + ys[0]) / (xs[1] - xs[0]) ** 2
        slope = (ys[2] - ys[0]) / (xs[2] - xs[0]) - curve * xs[1]
        vertex = -slope / curve
        candidates.append(max(low, vertex) if high is None else min(max(low, vertex), high))
    best = min(candidates, key=lambda beta: (at(beta), beta))
    want = {"b": best, "loss": at(best), "active_examples": sum(1 for u in shift if u + best > 0)}
    row = task.expected["rows"][0]
    problems = [] if row == want else [f"the key {row} differs from the piecewise fit, which gives {want}"]
    problems += [Degenerate(f"the named mistake ({m}) gives the key")
                 for m, v in free_bias_mistakes(inputs).items() if v == row["b"]]
    return problems


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


def sample_free_bias(draw: Draw, level: int) -> dict:
    """One hidden layer of 3-4 units, 4-6 examples, 1-2 outputs; `param` a first-layer bias whose
    loss is not flat at its minimum (the unit dead on every example must not be optimal). The
    inputs of a level-4 forward pass are drawn first and dropped: the stream stays the one it was."""
    sample_forward(draw, level)
    widths = [draw.integer(2, 3), draw.integer(3, 4), draw.integer(1, 2)]
    batch = _batch(draw, draw.integer(4, 6), widths[0], widths[-1])
    network = _network(draw, widths, batch)
    inputs = {"network": network, "batch": batch, "question": "free_bias",
              "param": f"b1[{draw.below(widths[1])}]"}
    key = best_free_bias(**inputs)["rows"][0]
    dead = rational.loss(rational.piecewise.perturb(network, batch, inputs["param"], F(-10**6))[0], batch)
    if key["loss"] >= dead:
        raise Reject("the unit dead on every example is optimal (the minimiser is not unique)")
    if any(wrong == key["b"] for wrong in free_bias_mistakes(inputs).values()):
        raise Reject("a named mistake gives the optimal bias")
    return inputs

LEVEL_5 = Level(question_level(
    "free_bias", "forward", best_free_bias, _check_best_free_bias,
    "Keep every weight and every bias fixed except `param`, a bias of the first layer, which may take any "
    "real value (so the pre-activation of its unit may be 0 for some example; relu(0) = 0). Give the value "
    "of `param` that minimises the batch-mean loss (on a tie, the smallest such value), that minimum loss, "
    "and for how many examples of the batch the unit of `param` then has a positive pre-activation.",
    '{"b": Fraction, "loss": Fraction, "active_examples": int}'), sample_free_bias)


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
    if task.level != 5:
        return False
    net = rational.piecewise.layers(task.inputs["network"])
    i = int(task.inputs["param"][3:-1])
    moved = F(answer_field(task, "b")) - F(task.inputs["network"]["layers"][0]["b"][i])
    return any(rational.forward(net, [F(v) for v in e["x"]]).pre[0][i] + moved == 0
               for e in task.inputs["batch"])


MLP_FORWARD = deeplearning_family(
    "mlp_forward", (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about=(
    "L1: every pre-activation, output and loss of a stated forward pass. L2: how many hidden units are "
    "active "
    "per example, the outputs and the batch loss. L3 (compose): the batch loss after one gradient-descent "
    "step "
    "(forward, backward, update, forward). L4 (search): the best of 4-6 learning rates for one step, ties to "
    "the smallest. L5 (regimes): the first-layer bias that minimises the batch loss with the rest fixed "
    "(piecewise quadratic: each example switches its ReLU at its own kink, the optimum may sit on one), "
    "the minimum and how many examples keep the unit active; ignoring the ReLU or minimising within the "
    "current piece never gives the key. "
    "Networks grow from 2-3 hidden units to three hidden layers; no example's output is the last bias."),
    reject=_collapsed_output,
    branches=(Branch("the optimal bias sits on a kink", _bias_on_kink, F(1, 10), (5,)),))
