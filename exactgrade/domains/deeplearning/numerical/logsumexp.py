"""The logsumexp family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade.domains.deeplearning.numerical.shared import (
    logit_sampler,
    logsumexp_naive,
    numerical_family,
    op,
)


def logsumexp_shifted(logits):
    m = op("max", *logits)
    return op("add", m, op("log", op("sum", *[op("exp", op("sub", x, m)) for x in logits])))


sample_logsumexp = logit_sampler("lse", logsumexp_naive, logsumexp_shifted, indexed=False)


LOGSUMEXP = numerical_family("logsumexp", ("logsumexp", "overflow", "log0"), sample_logsumexp,
                              "naive/shifted log-sum-exp cases of logits near the edges")
