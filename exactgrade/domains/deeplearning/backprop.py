"""Backprop tasks (dl-009..dl-016): exact forward passes and gradients of small ReLU networks.

Every network is piecewise linear (affine layers, ReLU, squared error) with rational weights,
so activations, losses and gradients are exact Fractions. verify cross-checks every gradient
against an exact symmetric finite difference (exactgrade.rational.finite_difference), which
refuses to straddle a ReLU kink.
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.common import POLICY, api, prompt
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

FD_STEP = F(1, 1024)
_API = api(CONVENTIONS)


def _gradient_task(task_id, network, batch, wrt, tags, zero_reason=None):
    return TaskDef(task_id, "backprop", {"network": network, "batch": batch, "wrt": wrt}, mlp_gradient_rows,
                   _gradient_prompt, _API, POLICY, tags=tags, zero_reason=zero_reason,
                   meta={"network": network, "batch": batch, "gradients_at": wrt, "fd_step": FD_STEP})


TASKS = (
    TaskDef("dl-009", "backprop", {"network": _NET_231, "batch": _BATCH_231}, mlp_forward_rows,
            _forward_prompt, _API, POLICY, tags=("forward",),
            meta={"network": _NET_231, "batch": _BATCH_231, "forward": True}),
    _gradient_task("dl-010", _NET_221, _BATCH_221, _all_names(_NET_221), ("gradient",)),
    _gradient_task("dl-011", _NET_DEAD, _BATCH_DEAD, _all_names(_NET_DEAD), ("gradient", "dead-relu"),
                   zero_reason="hidden unit 1 is inactive on this input (pre-activation -3/4 < 0), so the "
                               "gradients of W1[1][*], b1[1] and W2[0][1] are exactly 0: that is the point "
                               "of the task (a dead ReLU unit learns nothing from this example)."),
    _gradient_task("dl-012", _NET_321, _BATCH_321, ["x[0]", "x[1]", "x[2]"], ("gradient", "input-gradient")),
    _gradient_task("dl-013", _NET_BATCH, _BATCH_THREE,
                   ["W1[0][0]", "W1[0][1]", "W1[1][0]", "W1[1][1]", "b1[0]", "b1[1]", "W2[0][0]", "W2[0][1]"],
                   ("gradient", "batch-mean")),
    _gradient_task("dl-014", _NET_DEEP, _BATCH_DEEP,
                   ["W1[0][0]", "W1[0][1]", "W1[1][0]", "W1[1][1]", "W1[2][0]", "W1[2][1]", "b1[0]", "b1[2]"],
                   ("gradient", "deep")),
    _gradient_task("dl-015", _NET_TWO_OUT, _BATCH_TWO_OUT,
                   ["W2[0][0]", "W2[0][1]", "W2[1][0]", "W2[1][1]", "b2[0]", "b2[1]", "W1[0][0]", "W1[1][1]"],
                   ("gradient", "multi-output")),
    _gradient_task("dl-016", _NET_SYMMETRIC, _BATCH_SYMMETRIC,
                   ["W1[0][0]", "W1[1][0]", "W1[0][1]", "W1[1][1]", "b1[0]", "b1[1]", "W2[0][0]", "W2[0][1]"],
                   ("gradient", "symmetry")),
)
