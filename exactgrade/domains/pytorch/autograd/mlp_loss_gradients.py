"""The mlp_loss_gradients family of autograd: everything it needs, its five levels in level order."""

from __future__ import annotations

import functools
from fractions import Fraction

import mpmath

from exactgrade.domains.pytorch.common import PY_INT, Inputs, f32, pytorch_level
from exactgrade.domains.pytorch.exact import ExactTensor, hp, softmax, transpose, values
from exactgrade.domains.pytorch.sampling import dyadic_tensor, int_tensor, shape_text
from exactgrade.domains.pytorch.shared import dims
from exactgrade.family import Branch, Draw, five_levels


# chain: a loss through a small model and its gradients --------------------------------------------
def mlp_loss_gradients(x, target, w1, b1, w2, b2):
    import torch
    import torch.nn.functional as F

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    hidden = torch.relu(F.linear(x, params[0], params[1]))
    loss = F.cross_entropy(F.linear(hidden, params[2], params[3]), target)
    loss.backward()
    return {
        "rows": [
            {
                "loss": loss.detach(),
                "grad_w1": params[0].grad,
                "grad_b1": params[1].grad,
                "grad_w2": params[2].grad,
                "grad_b2": params[3].grad,
            }
        ]
    }


def _hidden_pre_activations(x, w1, b1):
    return [
        [
            sum((a * b for a, b in zip(row, unit, strict=True)), Fraction(0)) + c
            for unit, c in zip(values(w1), values(b1), strict=True)
        ]
        for row in values(x)
    ]


def _mlp_loss_gradients(x, target, w1, b1, w2, b2):
    pre = _hidden_pre_activations(x, w1, b1)
    hidden = [[max(h, Fraction(0)) for h in row] for row in pre]
    logits = [
        [
            sum((a * b for a, b in zip(row, unit, strict=True)), Fraction(0)) + c
            for unit, c in zip(values(w2), values(b2), strict=True)
        ]
        for row in hidden
    ]
    n = len(logits)
    probabilities = [softmax(row) for row in logits]
    labels = values(target)
    loss = -mpmath.fsum(mpmath.log(p[t]) for p, t in zip(probabilities, labels, strict=True)) / n
    # d loss / d logits = (softmax - one_hot) / n; back through the second layer and the ReLU mask
    d_logits = [
        [(p - (1 if k == t else 0)) / n for k, p in enumerate(ps)]
        for ps, t in zip(probabilities, labels, strict=True)
    ]
    w2_rows = values(w2)
    d_hidden = [
        [
            mpmath.fsum(d * w2_rows[k][j] for k, d in enumerate(row)) if pre[i][j] > 0 else mpmath.mpf(0)
            for j in range(len(pre[0]))
        ]
        for i, row in enumerate(d_logits)
    ]
    x_rows = values(x)

    def outer(grads, inputs):  # sum over samples of grads^T inputs
        return [
            [
                mpmath.fsum(g[k] * hp(a[j]) for g, a in zip(grads, inputs, strict=True))
                for j in range(len(inputs[0]))
            ]
            for k in range(len(grads[0]))
        ]

    return [
        {
            "loss": ExactTensor.of("float32", loss),
            "grad_w1": ExactTensor.of("float32", outer(d_hidden, x_rows)),
            "grad_b1": ExactTensor.of("float32", [mpmath.fsum(column) for column in transpose(d_hidden)]),
            "grad_w2": ExactTensor.of("float32", outer(d_logits, hidden)),
            "grad_b2": ExactTensor.of("float32", [mpmath.fsum(column) for column in transpose(d_logits)]),
        }
    ]


def _sample_mlp_loss(draw: Draw, level: int) -> dict:
    batch, features = draw.integer(2, 2 + level), draw.integer(2, 2 + level)
    hidden, classes = draw.integer(2, 2 + level), draw.integer(2, 2 + level // 2)
    return {
        "x": dyadic_tensor(draw, (batch, features), -2, 2, 2),
        "target": int_tensor(draw, (batch,), 0, classes - 1),
        "w1": dyadic_tensor(draw, (hidden, features), -1, 1, 3),
        "b1": dyadic_tensor(draw, (hidden,), -0.5, 0.5, 3),
        "w2": dyadic_tensor(draw, (classes, hidden), -1, 1, 3),
        "b2": dyadic_tensor(draw, (classes,), -0.5, 0.5, 3),
    }


def _off_the_relu_kink(inputs: Inputs) -> str | None:
    pre = _hidden_pre_activations(inputs["x"], inputs["w1"], inputs["b1"])
    if any(h == 0 for row in pre for h in row):
        return "a hidden pre-activation is exactly 0: the ReLU gradient would sit on its kink"
    if all(h < 0 for row in pre for h in row):
        return "every hidden unit is off: no gradient reaches the first layer"
    return None

# mlp_loss_gradients -------------------------------------------------------------------------------
def _mp(nested):
    """A nested list of numbers as mpfs at the working precision, converted once (an mpf stays
    itself: its exact value round-trips, so converting it again would only cost time)."""
    if isinstance(nested, list):
        return [_mp(e) for e in nested]
    return nested if isinstance(nested, mpmath.mpf) else hp(nested)


def _mlp_exact(xv, labels, params):
    """Loss, gradients and pre-activations of linear -> relu -> linear -> cross-entropy, in mpmath
    (params: nested lists w1, b1, w2, b2 of Fractions or mpfs)."""
    xv = _mp(xv)
    w1, b1, w2, b2 = _mp(list(params))
    pre = [[mpmath.fsum(a * b for a, b in zip(row, unit, strict=True)) + c
            for unit, c in zip(w1, b1, strict=True)] for row in xv]
    hidden = [[h if h > 0 else mpmath.mpf(0) for h in row] for row in pre]
    logits = [[mpmath.fsum(a * b for a, b in zip(row, unit, strict=True)) + c
               for unit, c in zip(w2, b2, strict=True)] for row in hidden]
    n = len(logits)
    probabilities = [softmax(row) for row in logits]
    loss = -mpmath.fsum(mpmath.log(p[t]) for p, t in zip(probabilities, labels, strict=True)) / n
    d_logits = [[(p - (1 if k == t else 0)) / n for k, p in enumerate(ps)]
                for ps, t in zip(probabilities, labels, strict=True)]
    d_hidden = [[mpmath.fsum(d * w2[k][j] for k, d in enumerate(row)) if pre[i][j] > 0 else mpmath.mpf(0)
                 for j in range(len(w1))] for i, row in enumerate(d_logits)]

    def outer(grads, inputs):
        return [[mpmath.fsum(g[k] * a[j] for g, a in zip(grads, inputs, strict=True))
                 for j in range(len(inputs[0]))] for k in range(len(grads[0]))]

    grads = (outer(d_hidden, xv), [mpmath.fsum(c) for c in transpose(d_hidden)], outer(d_logits, hidden),
             [mpmath.fsum(c) for c in transpose(d_logits)])
    return loss, grads, pre, logits


def _update(params, steps, lr):
    """params minus lr times steps, elementwise over the nested lists."""
    def sub(p, s):
        return [sub(a, b) for a, b in zip(p, s, strict=True)] if isinstance(p, list) else _mp(p) - lr * s
    return [sub(p, s) for p, s in zip(params, steps, strict=True)]


_MLP_TENSORS = ("x", "target", "w1", "b1", "w2", "b2")


def _mlp_trajectory(inputs, steps, lr, momentum=0):
    """(loss, params, pre, logits) after each of ``steps`` heavy-ball steps (momentum 0: plain SGD).
    The refusal of a draw, the refusal of the built task and the independent check each walk the
    same trajectory: it is computed once (the arguments are immutable; do not mutate the result)."""
    return _trajectory(tuple(inputs[name] for name in _MLP_TENSORS), steps, lr, momentum)


@functools.lru_cache(maxsize=32)
def _trajectory(tensors, steps, lr, momentum):
    xv, labels = values(tensors[0]), values(tensors[1])
    params, velocity, out = [values(t) for t in tensors[2:]], None, []
    loss, grads, pre, logits = _mlp_exact(xv, labels, params)
    out.append((loss, params, pre, logits))
    for _ in range(steps):
        if velocity is None:
            velocity = grads
        else:
            velocity = _update(grads, velocity, -mpmath.mpf(momentum))  # grads + momentum * velocity
        params = _update(params, velocity, mpmath.mpf(lr))
        loss, grads, pre, logits = _mlp_exact(xv, labels, params)
        out.append((loss, params, pre, logits))
    return tuple(out)


def _mostly_alive(inputs: Inputs) -> str | None:
    """Refuse an instance whose first-layer gradient is mostly exactly zero (dead ReLUs)."""
    pre = _hidden_pre_activations(inputs["x"], inputs["w1"], inputs["b1"])
    xv = values(inputs["x"])
    hidden, features = len(pre[0]), len(xv[0])
    zeros = sum(1 for j in range(hidden) for f in range(features)
                if all(pre[s][j] <= 0 or xv[s][f] == 0 for s in range(len(xv))))
    if 2 * zeros >= hidden * features:
        return f"{zeros} of {hidden * features} first-layer gradients are exactly 0 (dead ReLUs)"
    return None


LEVEL_1 = pytorch_level(
    "autograd",
    reference=mlp_loss_gradients,
    independent=_mlp_loss_gradients,
    question=lambda i: (
        f"""A small classifier maps the batch `x` through Linear({i["w1"].shape[1]},
        {i["w1"].shape[0]}) (weight `w1`, bias `b1`), ReLU and Linear({i["w2"].shape[1]}, {i["w2"].shape[0]})
        (weight `w2`, bias `b2`) to logits. With the parameters as leaf tensors that require gradients,
        compute the cross-entropy loss of the logits against the class indices `target` (torch's default
        mean reduction) and call backward. Give the `loss` (a 0-d tensor) and the gradients `grad_w1`,
        `grad_b1`, `grad_w2` and `grad_b2` of the four parameters."""
    ),
    answer=lambda i: (
        {
            "loss": f32(),
            "grad_w1": f32(*dims(i["w1"])),
            "grad_b1": f32(*dims(i["b1"])),
            "grad_w2": f32(*dims(i["w2"])),
            "grad_b2": f32(*dims(i["b2"])),
        },
    ),
    sample=_sample_mlp_loss,
    refuse=lambda inputs: _off_the_relu_kink(inputs) or _mostly_alive(inputs),
)


def _mlp_ok(inputs: Inputs) -> str | None:
    return _off_the_relu_kink(inputs) or _mostly_alive(inputs)


def _trajectory_clear(inputs: Inputs, steps: int, lr, momentum=0) -> str | None:
    problem = _mlp_ok(inputs)
    if problem is not None:
        return problem
    for _, _, pre, logits in _mlp_trajectory(inputs, steps, lr, momentum):
        if any(abs(h) < mpmath.mpf("1e-3") for row in pre for h in row):
            return "a pre-activation comes within 1e-3 of the ReLU kink along the way"
        for row in logits:
            top = sorted(row, reverse=True)
            if top[0] - top[1] < mpmath.mpf("1e-3"):
                return "two logits come within 1e-3: the predicted class would hinge on rounding"
    return None


def _mlp_forward_text(i):
    return f"""A classifier maps each row s of `x` to logits z_s = W2 h_s + b2, where h_s = max(0, W1 x_s +
        b1) elementwise (W1 = `w1` of shape {shape_text(i["w1"].shape)}, b1 = `b1`, W2 = `w2` of shape
        {shape_text(i["w2"].shape)}, b2 = `b2`). The loss is the mean over the {i["x"].shape[0]} samples s of
        (ln(sum over classes k of e^(z_s[k])) - z_s[target_s]), with the class indices in `target`."""


LEVEL_2 = pytorch_level(
    "autograd",
    mlp_loss_gradients,
    _mlp_loss_gradients,
    lambda i: f"""{_mlp_forward_text(i)} At the given parameters, give the `loss` (a 0-d tensor) and its
        gradients `grad_w1`, `grad_b1`, `grad_w2` and `grad_b2` with respect to W1, b1, W2 and b2.""",
    lambda i: ({"loss": f32(), "grad_w1": f32(*dims(i["w1"])), "grad_b1": f32(*dims(i["b1"])),
                "grad_w2": f32(*dims(i["w2"])), "grad_b2": f32(*dims(i["b2"]))},),
    _sample_mlp_loss,
    refuse=_mlp_ok,
)


def mlp_sgd_step(x, target, w1, b1, w2, b2, lr):
    import torch
    import torch.nn.functional as F

    def loss_of(p):
        return F.cross_entropy(F.linear(torch.relu(F.linear(x, p[0], p[1])), p[2], p[3]), target)

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    grads = torch.autograd.grad(loss_of(params), params)
    new = [(p - lr * g).detach() for p, g in zip(params, grads, strict=True)]
    after = loss_of(new)
    return {"rows": [{"loss_after": after, "b2_after": new[3]}]}


def _mlp_sgd_step(x, target, w1, b1, w2, b2, lr):
    inputs = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}
    loss, params, _, _ = _mlp_trajectory(inputs, 1, lr)[-1]
    return [{"loss_after": ExactTensor.of("float32", loss), "b2_after": ExactTensor.of("float32", params[3])}]


def _sample_mlp_lr(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lr": draw.choice((0.5, 0.25, 1.0))}


LEVEL_3 = pytorch_level(
    "autograd",
    mlp_sgd_step,
    _mlp_sgd_step,
    lambda i: f"""{_mlp_forward_text(i)} Take one plain gradient-descent step on all four parameters at
        once (each parameter minus `lr` times the loss's gradient with respect to it, all gradients
        taken at the given parameters). Give `loss_after`, the loss after the step (a 0-d tensor), and
        `b2_after`, the updated b2.""",
    lambda i: ({"loss_after": f32(), "b2_after": f32(*dims(i["b2"]))},),
    _sample_mlp_lr,
    refuse=lambda i: _trajectory_clear(i, 1, i["lr"]),
)


def steps_to_fit(x, target, w1, b1, w2, b2, lrs):
    import torch
    import torch.nn.functional as F

    rows = []
    for lr in lrs:
        params, found = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)], -1
        for steps in range(0, 9):
            logits = F.linear(torch.relu(F.linear(x, params[0], params[1])), params[2], params[3])
            if bool((logits.argmax(dim=1) == target).all()):
                found = steps
                break
            grads = torch.autograd.grad(F.cross_entropy(logits, target), params)
            params = [(p - lr * g).detach().requires_grad_(True) for p, g in zip(params, grads, strict=True)]
        rows.append({"steps": found})
    return {"rows": rows}


def _fitted(logits, labels) -> bool:
    return all(row.index(max(row)) == t for row, t in zip(logits, labels, strict=True))


def _steps_to_fit(x, target, w1, b1, w2, b2, lrs):
    inputs, labels = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}, values(target)
    return [{"steps": next((steps for steps, (_, _, _, logits) in enumerate(_mlp_trajectory(inputs, 8, lr))
                            if _fitted(logits, labels)), -1)} for lr in lrs]


FIT_LRS = (0.125, 0.25, 0.5, 1.0, 2.0)
"""mlp_loss_gradients L4 asks the fewest steps at three of these learning rates, a row each: with
one rate, -1 or 1 step was the whole key of a quarter of the instances or more."""


def _sample_mlp_lrs(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lrs": sorted(draw.sample(FIT_LRS, 3))}


def _fit_clear(inputs: Inputs) -> str | None:
    network = {name: inputs[name] for name in _MLP_TENSORS}
    problem = _mlp_ok(network)
    if problem is not None:
        return problem
    if _fitted(_mlp_trajectory(network, 0, 0)[0][3], values(inputs["target"])):
        return "every sample is classified correctly before any step"
    for lr in inputs["lrs"]:
        problem = _trajectory_clear(network, 8, lr)
        if problem is not None:
            return problem
    if len({row["steps"] for row in _steps_to_fit(**inputs)}) == 1:
        return "every learning rate takes the same number of steps: a constant answer passes"
    return None


LEVEL_4 = pytorch_level(
    "autograd",
    steps_to_fit,
    _steps_to_fit,
    lambda i: f"""{_mlp_forward_text(i)} A sample is classified correctly when its largest logit is the
        one of its target class. Starting from the given parameters, repeatedly take plain
        gradient-descent steps on all four parameters at once (each parameter minus lr times the
        loss's gradient with respect to it). For each learning rate lr in `lrs` (a row of the answer
        each, in order, each run starting from the given parameters), give `steps`, the smallest
        number of steps from 0 to 8 after which every sample is classified correctly, or -1 if no
        number of steps up to 8 achieves it.""",
    lambda i: tuple({"steps": PY_INT} for _ in i["lrs"]),
    _sample_mlp_lrs,
    refuse=_fit_clear,
)


def _fit_none(task) -> bool:
    return any(row["steps"] == -1 for row in task.expected["rows"])


def mlp_momentum(x, target, w1, b1, w2, b2, lr, momentum):
    import torch
    import torch.nn.functional as F

    def loss_of(p):
        return F.cross_entropy(F.linear(torch.relu(F.linear(x, p[0], p[1])), p[2], p[3]), target)

    params = [p.clone().requires_grad_(True) for p in (w1, b1, w2, b2)]
    velocity = None
    for _ in range(3):
        grads = torch.autograd.grad(loss_of(params), params)
        if velocity is None:
            velocity = list(grads)
        else:
            velocity = [momentum * v + g for v, g in zip(velocity, grads, strict=True)]
        params = [(p - lr * v).detach().requires_grad_(True) for p, v in zip(params, velocity, strict=True)]
    final = loss_of(params)
    return {"rows": [{"loss_final": final.detach(), "w2_final": params[2].detach()}]}


def _mlp_momentum(x, target, w1, b1, w2, b2, lr, momentum):
    inputs = {"x": x, "target": target, "w1": w1, "b1": b1, "w2": w2, "b2": b2}
    loss, params, _, _ = _mlp_trajectory(inputs, 3, lr, momentum)[-1]
    return [{"loss_final": ExactTensor.of("float32", loss), "w2_final": ExactTensor.of("float32", params[2])}]


def _sample_mlp_momentum(draw: Draw, level: int) -> dict:
    return {**_sample_mlp_loss(draw, level), "lr": draw.choice((0.5, 0.25)),
            "momentum": draw.choice((0.5, 0.75, 0.875))}


LEVEL_5 = pytorch_level(
    "autograd",
    mlp_momentum,
    _mlp_momentum,
    lambda i: f"""{_mlp_forward_text(i)} Train all four parameters for three steps of gradient descent
        with a velocity: at each step compute the gradient g of the loss at the current parameters, set
        the velocity to g on the first step and to `momentum` times the previous velocity plus g
        afterwards, then subtract `lr` times the velocity from the parameters. Give `loss_final`, the
        loss after the three steps (a 0-d tensor), and `w2_final`, W2 after them.""",
    lambda i: ({"loss_final": f32(), "w2_final": f32(*dims(i["w2"]))},),
    _sample_mlp_momentum,
    refuse=lambda i: _trajectory_clear(i, 3, i["lr"], i["momentum"]),
)


MLP_LOSS_GRADIENTS = five_levels(
    "mlp_loss_gradients",
    (LEVEL_1, LEVEL_2, LEVEL_3, LEVEL_4, LEVEL_5),
    about="L1 the modules and backward named; L2 the network and loss given by their formulas; L3 one "
          "descent step and the loss after it; L4 the fewest descent steps until every sample is "
          "classified correctly, at each of three learning rates, or -1; L5 three steps of descent with "
          "a velocity (heavy-ball momentum) described, to reproduce",
    branches=(Branch("no step count fits the batch at some rate", _fit_none, Fraction(1, 10), (4,)),),
)
