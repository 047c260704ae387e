"""The softmax family of numerical: everything it needs, its five levels in level order."""

from __future__ import annotations

from exactgrade.domains.deeplearning.numerical.shared import (
    logit_sampler,
    numerical_family,
    op,
    softmax_naive,
)


def softmax_shifted(logits, index):
    m = op("max", *logits)
    return op("div", op("exp", op("sub", logits[index], m)),
              op("sum", *[op("exp", op("sub", x, m)) for x in logits]))


sample_softmax = logit_sampler("p", softmax_naive, softmax_shifted, indexed=True)


SOFTMAX = numerical_family("softmax", ("softmax", "overflow"), sample_softmax,
                            "naive/shifted softmax cases of logits near the edges")
