"""The mlp_forward family of backprop: everything it needs, its five levels in level order."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade import rational
from exactgrade.domains.deeplearning._family import answer_field, dl_family
from exactgrade.domains.deeplearning.backprop.shared import (
    API,
    CANDIDATE_RATES,
    SIZES,
    UPPER,
    _batch,
    _network,
    _widths,
    by_level,
    mlp_question_rows,
    network_text,
)
from exactgrade.domains.deeplearning.common import POLICY, prompt
from exactgrade.family import Branch, Draw, Reject
from exactgrade.task import TaskDef


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


def sample_forward_question(draw: Draw, level: int) -> dict:
    base = sample_forward(draw, level)
    if level == 5:
        return sample_free_bias(draw)
    question = {2: "active", 3: "step_loss", 4: "best_lr"}[level]
    extra: dict = {}
    if question == "step_loss":
        extra = {"lr": draw.choice(CANDIDATE_RATES[:8])}
    if question == "best_lr":
        extra = {"candidates": sorted(draw.sample(CANDIDATE_RATES, draw.integer(4, 6)))}
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


def build_forward(task_id, inputs):
    network, batch = inputs["network"], inputs["batch"]
    return TaskDef(task_id, "backprop", inputs, mlp_forward_rows, _forward_prompt, API, POLICY,
                   tags=("forward",), meta={"network": network, "batch": batch, "forward": True})

MLP_FORWARD = dl_family(
    "mlp_forward", build_forward, by_level(sample_forward, sample_forward_question),
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
    reject=_collapsed_output, upper=UPPER,
    branches=(Branch("the optimal bias sits on a kink", _bias_on_kink, F(1, 10), (5,)),))
