"""Optimisation tasks (dl-017..dl-023): SGD, momentum, Nesterov, Adam, a learning-rate schedule.

The objective is a separable quadratic f(w) = 1/2 * sum_i a_i (w_i - c_i)**2 with rational
curvatures a and centre c, so SGD-family trajectories stay rational. verify recomputes SGD
trajectories as powers of each coordinate's linear state map, and Adam and the schedule in
80-digit mpmath arithmetic. Adam's square root is kept
exact with sympy (its first step is rational: sqrt(g**2) = |g|); the cosine schedule is exact
sympy at multiples of pi/12.

Families: sgd (dl-017..020), adam (dl-021, 022), warmup_cosine (dl-023). SGD instances draw a
learning rate on either side of the stability limit of their optimiser (2/lambda_max for plain
SGD, with lambda_max = max curvature + weight decay; 2(1 + mu)/lambda_max for heavy ball;
2(1 + mu)/((1 + 2mu) lambda_max) for Nesterov), so about a third of them diverge. Adam keeps its
square roots exact, and nested roots grow fast with the steps (4 steps with eps > 0 is ~3 kB
of sympy), so Adam stops at 3 steps and the key-size rule refuses the largest. Schedules use
decay lengths whose cosines sympy writes in radicals (2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30).
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.optimisation.adam import ADAM
from exactgrade.domains.deeplearning.optimisation.sgd import SGD
from exactgrade.domains.deeplearning.optimisation.warmup_cosine import WARMUP_COSINE

FAMILIES = (SGD, ADAM, WARMUP_COSINE)


_BOWL = {"curvature": [1, 4], "center": [1, -1], "w0": [3, 2]}


def _sgd(task_id, lr, momentum=0, nesterov=False, weight_decay=0, steps=3, bowl=None):
    return SGD.task(task_id, {**(bowl or _BOWL), "lr": lr, "momentum": momentum, "nesterov": nesterov,
                              "weight_decay": weight_decay, "steps": steps})


def _adam(task_id, bowl, lr, eps, steps):
    return ADAM.task(task_id, {**bowl, "lr": lr, "beta1": F(9, 10), "beta2": F(999, 1000), "eps": eps,
                               "steps": steps})


TASKS = (
    _sgd("dl-017", lr=F(1, 8)),
    _sgd("dl-018", lr=F(1, 8), momentum=F(9, 10)),
    _sgd("dl-019", lr=F(1, 8), momentum=F(9, 10), nesterov=True, weight_decay=F(1, 10)),
    # lr = 9/32 > 2 / a_max = 1/4: the stiff coordinate oscillates with growing amplitude (factor -5/4).
    _sgd("dl-020", lr=F(9, 32), steps=4, bowl={"curvature": [1, 8], "center": [0, 0], "w0": [1, 1]}),
    # Gradients 1 and 100, eps = 0: Adam's first step moves both coordinates by exactly lr.
    _adam("dl-021", {"curvature": [1, 100], "center": [0, 0], "w0": [1, 1]}, lr=F(1, 10), eps=0, steps=1),
    _adam("dl-022", {"curvature": [2], "center": [1], "w0": [3]}, lr=F(1, 10), eps=F(1, 10**8), steps=2),
    WARMUP_COSINE.task("dl-023", {"peak_lr": F(3, 1000), "min_lr": F(3, 10000), "warmup_steps": 4,
                                  "decay_steps": 12, "steps": [1, 3, 4, 5, 6, 7, 10, 13, 16, 20]}),
)
