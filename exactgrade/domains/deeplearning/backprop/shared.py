"""What two or more backprop families use (written once)."""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning._family import nonzero_dyadic, single_row
from exactgrade.domains.deeplearning.common import POLICY, api, prompt
from exactgrade.family import Builder, Draw, Reject
from exactgrade.task import TaskDef, uses

CONVENTIONS = (
    "Network conventions. A network is {'layers': [layer_1, layer_2, ...]}; each layer is "
    "{'W': list of rows, 'b': list, 'activation': 'relu' or 'identity'} and computes "
    "z = W @ a_prev + b, a = relu(z) (max(z, 0)) or a = z; a_0 is the input x. Layer k's weight W[i][j] "
    "connects input j to unit i. For one example {'x': input list, 't': target list} the loss is the "
    "squared error L = 1/2 * sum_k (y_k - t_k)**2 with y the last layer's output; for a batch it is the "
    "mean of the per-example losses. Parameters are named 'W<k>[i][j]' and 'b<k>[i]' (layers counted from "
    "1, indices from 0); 'x[j]' names input j (input gradients are asked only for one-example batches). "
    "Unless a question says otherwise, no pre-activation is exactly 0, so every ReLU derivative is "
    "defined (1 if z > 0, else 0). All weights, inputs and targets are fractions.Fraction or int; all "
    "results are exact."
)


# The helpers of the levels 2-5 references, written once: each is self-contained (a reference
# that calls one names it with ``uses``, and its program defines it), so it runs in the sandbox.
def forward_pass(layers, x):
    """(pre-activations per layer, activations per layer with the input first) of one example."""
    from fractions import Fraction

    a, pre, acts = [Fraction(v) for v in x], [], []
    acts.append(a)
    for layer in layers:
        z = [sum((Fraction(w) * v for w, v in zip(row, a, strict=True)), Fraction(0)) + Fraction(b)
             for row, b in zip(layer["W"], layer["b"], strict=True)]
        pre.append(z)
        a = [max(v, Fraction(0)) for v in z] if layer["activation"] == "relu" else z
        acts.append(a)
    return pre, acts


@uses(forward_pass)
def batch_loss(layers, batch):
    """The batch-mean squared-error loss."""
    from fractions import Fraction

    total = Fraction(0)
    for e in batch:
        y = forward_pass(layers, e["x"])[1][-1]
        pairs = zip(y, e["t"], strict=True)
        total += sum(((yi - Fraction(t)) ** 2 for yi, t in pairs), Fraction(0)) / 2
    return total / len(batch)


@uses(forward_pass)
def batch_gradients(layers, batch):
    """The gradient of the batch-mean loss by backprop: {parameter name: Fraction}."""
    from fractions import Fraction

    total = {}
    for e in batch:
        pre, acts = forward_pass(layers, e["x"])
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


def descended(layers, step, g):
    """The layers after one gradient-descent step of size ``step`` along the gradient ``g``."""
    from fractions import Fraction

    return [{"W": [[Fraction(w) - step * g[f"W{k}[{i}][{j}]"] for j, w in enumerate(row)]
                   for i, row in enumerate(layer["W"])],
             "b": [Fraction(b) - step * g[f"b{k}[{i}]"] for i, b in enumerate(layer["b"])],
             "activation": layer["activation"]} for k, layer in enumerate(layers, start=1)]


def shifted(layers, name, h):
    """The layers with the parameter ``name`` moved by ``h``."""
    from fractions import Fraction

    new = [{"W": [list(r) for r in layer["W"]], "b": list(layer["b"]), "activation": layer["activation"]}
           for layer in layers]
    kind, rest = name[0], name[1:]
    head, tail = rest.split("[", 1)
    k, idx = int(head), [int(i) for i in tail.rstrip("]").split("][")]
    if kind == "W":
        new[k - 1]["W"][idx[0]][idx[1]] = Fraction(new[k - 1]["W"][idx[0]][idx[1]]) + h
    else:
        new[k - 1]["b"][idx[0]] = Fraction(new[k - 1]["b"][idx[0]]) + h
    return new


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


GIVEN = {"lr": "learning rate", "candidates": "list of candidate learning rates",
          "wrt": "list of names 'W<k>[i][j]' or "
                 "'b<k>[i]'", "direction": "dict from parameter name to Fraction",
          "param": "the parameter name"}


CANDIDATE_RATES = tuple(F(k, 64) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64))


NETWORK_UNITS = "the network's own units"
STEP_UNITS = (NETWORK_UNITS + "; loss in squared output units; learning rates and steps in parameter units "
              "per gradient unit")


def question_level(word: str, tag: str, reference, independent, question: str, shape: str,
                   units: str = NETWORK_UNITS) -> Builder:
    """The builder of one levels 2-5 question: its text, answer shape and units, its reference and
    its independent check (``meta["independent"]``); the inputs carry the question's ``word``,
    which the prompt shows, and the task is tagged (``tag``, word)."""

    def render(inputs):
        given = {k: (description, inputs[k]) for k, description in GIVEN.items() if k in inputs}
        return prompt(question, {**network_text(inputs), **given,
                                 "question": ("the question asked, as a word", word)},
                      single_row(shape), units)

    def build(task_id, inputs):
        if inputs.get("question") != word:
            raise ValueError(f"this level asks {word!r}; the inputs say {inputs.get('question')!r}")
        return TaskDef(task_id, "backprop", inputs, reference, render, API, POLICY, tags=(tag, word),
                       meta={"independent": independent})

    return build


def stepped(network, g, step: F) -> dict:
    """The network after one gradient-descent step (for the checks, with exactgrade.rational's ``g``)."""
    return {"layers": [{"W": [[F(w) - step * g[f"W{k}[{i}][{j}]"] for j, w in enumerate(row)]
                              for i, row in enumerate(layer["W"])],
                        "b": [F(b) - step * g[f"b{k}[{i}]"] for i, b in enumerate(layer["b"])],
                        "activation": layer["activation"]}
                       for k, layer in enumerate(network["layers"], start=1)]}
