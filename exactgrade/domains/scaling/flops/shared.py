"""Helpers that several flops families use."""

from __future__ import annotations

from exactgrade.task import Task

LAYER = """\
A decoder layer, per token: the query projection maps d_model values to n_heads*head_dim, the key
and value projections each map d_model values to n_kv_heads*head_dim, the output projection maps
n_heads*head_dim values back to d_model, and the MLP applies `mlp_matrices` weight matrices of
d_model x d_ff. In attention at context length S, each of the n_heads query heads of a token takes
the dot product of its query (head_dim values) with the key of every one of the S positions, then
sums the S value vectors (head_dim values each) weighted by those scores. Count the full context
(no causal-mask savings) and only these multiply-adds: a dot product of n values, or a weighted
sum of vectors of n values per vector, costs 2*n FLOPs per vector (no softmax, scaling or
norms)."""


def _measured_physical(task: Task) -> str | None:
    if any(not 0 < row["mfu"] < 1 for row in task.expected["rows"]):
        return "an MFU outside (0, 1)"
    return None
