"""Information tasks (dl-000..dl-008): entropy, cross-entropy, KL, mutual information.

Every probability used in a log is an integer power of two, so every value in bits is an exact
Fraction; nats are bits * log(2), exact sympy values. Joints are built with b a deterministic
function of a (a dyadic split of a binary axis would force independence and I = 0), with
marginals chosen dyadic.

Families (one per reference; a canonical task is an instance with fixed inputs): entropy,
divergence, kl_asymmetry, mutual_information, classification_loss. Their samplers build
distributions by repeatedly halving one outcome's probability, so every probability is a power
of two by construction (up to 16 outcomes at level 5); joints put all of P(A = a) on one b = f(a)
and draw P(B) first and then split each P(B = b) dyadically over f's preimage of b, so both
marginals are dyadic by construction and I(A; B) = H(B) > 0 (f invertible: I = H(A)).
"""

from __future__ import annotations

from fractions import Fraction as F

from exactgrade.domains.deeplearning.information.classification_loss import CLASSIFICATION_LOSS
from exactgrade.domains.deeplearning.information.divergence import DIVERGENCE
from exactgrade.domains.deeplearning.information.entropy import ENTROPY
from exactgrade.domains.deeplearning.information.kl_asymmetry import KL_ASYMMETRY
from exactgrade.domains.deeplearning.information.mutual_information import MUTUAL_INFORMATION

HALF_QUARTER_EIGHTHS = [F(1, 2), F(1, 4), F(1, 8), F(1, 8)]


UNIFORM4 = [F(1, 4)] * 4

FAMILIES = (ENTROPY, DIVERGENCE, KL_ASYMMETRY, MUTUAL_INFORMATION, CLASSIFICATION_LOSS)


_ENTROPY = [HALF_QUARTER_EIGHTHS, [F(1, 2)] + [F(1, 8)] * 4, UNIFORM4,
            [F(1, 2), F(1, 4), F(1, 8), F(1, 16), F(1, 32), F(1, 32)]]


_PAIRS = [{"p": HALF_QUARTER_EIGHTHS, "q": UNIFORM4},
          {"p": UNIFORM4, "q": HALF_QUARTER_EIGHTHS},
          {"p": [F(1, 2), F(1, 4), F(1, 4)], "q": [F(1, 4), F(1, 4), F(1, 2)]}]


# q is p rotated by one place (not reversed): D(p || q) = 1/2 bit but D(q || p) = 5/8 bit.
_ASYMMETRIC_P = HALF_QUARTER_EIGHTHS


_ASYMMETRIC_Q = [F(1, 4), F(1, 8), F(1, 8), F(1, 2)]


_NATS_PAIRS = [{"p": [F(1, 2), F(1, 8), F(1, 8), F(1, 8), F(1, 8)],
                "q": [F(1, 16), F(1, 2), F(1, 16), F(1, 8), F(1, 4)]}]

# B = (A + 1) mod 4: invertible, so I(A; B) = H(A) and H(A | B) = 0.
_JOINT_INVERTIBLE = [[0, F(1, 2), 0, 0], [0, 0, F(1, 4), 0], [0, 0, 0, F(1, 8)], [F(1, 8), 0, 0, 0]]


# B = f(A) with f = (0, 0, 1, 1, 2): not invertible, so I(A; B) = H(B) < H(A).
_JOINT_MERGING = [[F(1, 4), 0, 0], [F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [0, 0, F(1, 4)]]


# B = f(A) with f = (0, 1, 1, 0, 2, 2) over P(A) = (1/4, 1/8, 1/8, 1/4, 1/8, 1/8).
_JOINT_SIX = [[F(1, 4), 0, 0], [0, F(1, 8), 0], [0, F(1, 8), 0], [F(1, 4), 0, 0], [0, 0, F(1, 8)],
              [0, 0, F(1, 8)]]

TASKS = (
    ENTROPY.task("dl-000", {"distributions": _ENTROPY, "unit": "bits"}),
    ENTROPY.task("dl-001", {"distributions": _ENTROPY[:3], "unit": "nats"}),
    DIVERGENCE.task("dl-002", {"pairs": _PAIRS, "unit": "bits"}),
    KL_ASYMMETRY.task("dl-003", {"pairs": [{"p": _ASYMMETRIC_P, "q": _ASYMMETRIC_Q},
                                           {"p": _ASYMMETRIC_Q, "q": _ASYMMETRIC_P}], "unit": "bits"}),
    DIVERGENCE.task("dl-004", {"pairs": _NATS_PAIRS, "unit": "nats"}),
    MUTUAL_INFORMATION.task("dl-005", {"joint": _JOINT_INVERTIBLE, "unit": "bits"}),
    MUTUAL_INFORMATION.task("dl-006", {"joint": _JOINT_MERGING, "unit": "bits"}),
    CLASSIFICATION_LOSS.task("dl-007", {
        "predictions": [HALF_QUARTER_EIGHTHS, UNIFORM4, [F(1, 8), F(1, 8), F(1, 4), F(1, 2)]],
        "labels": [1, 2, 0]}),
    MUTUAL_INFORMATION.task("dl-008", {"joint": _JOINT_SIX, "unit": "nats"}),
)
