"""Degenerate draws and defects: a domain check's problem is either ``Degenerate`` (a sound draw not
worth posing: generation redraws it) or a defect (the key disagrees with the independent
recomputation, a promise of the prompt is broken: generation fails closed). A family defined here
whose reference is wrong on some draws shows that a redraw no longer hides the bug, in generation
and in verify; the tables show each domain's problems carry the kind their meaning says."""

from __future__ import annotations

import dataclasses
import importlib.util
from fractions import Fraction as F

import pytest

from exactgrade import GenerationError
from exactgrade.domains import deeplearning, pytorch, scaling
from exactgrade.domains.pytorch.common import POLICY, f32, make_task, pytorch_level, tensor
from exactgrade.domains.pytorch.exact import ExactTensor, values
from exactgrade.family import Degenerate, Draw, build_instance, defects, draw_key, five_levels, generate
from exactgrade.task import materialise
from exactgrade.verify import format_report, verify_generated

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (pip install torch==2.13.0)")


def test_a_degenerate_problem_is_its_text_and_a_plain_one_is_a_defect():
    tie, wrong = Degenerate("a tie"), "the key differs"
    assert (tie == "a tie", str(tie), f"{tie}; {wrong}") == (True, "a tie", "a tie; the key differs")
    assert defects([tie, wrong, Degenerate("an edge")]) == [wrong]
    assert defects([tie]) == [] and defects([]) == []


# ---------------------------------------------------------------- a family with a wrong reference

def largest_magnitude(x):
    """Deliberately wrong: x.max() is the largest magnitude only when that element is positive."""
    return {"rows": [{"m": x.max()}]}


def _largest_magnitude(x):
    return [{"m": ExactTensor.of("float32", max(abs(e) for e in values(x)))}]


def magnitudes(x):
    return {"rows": [{"y": x.abs()}]}


def _magnitudes(x):
    return [{"y": ExactTensor.of("float32", [abs(e) for e in values(x)])}]


def _quarters(draw: Draw, level: int):
    """Four distinct non-zero multiples of 1/4 in [-4, 4] (exact in float32)."""
    picked = draw.sample([k for k in range(-16, 17) if k != 0], 4)
    return {"x": tensor("float32", [k / 4 for k in picked])}


def _quarters_or_positive(draw: Draw, level: int):
    """_quarters, but all positive in half the draws (where |x| is x passed through)."""
    if draw.chance(1, 2):
        return {"x": tensor("float32", [k / 4 for k in draw.sample(range(1, 17), 4)])}
    return _quarters(draw, level)


def _one_question(name, reference, independent, question, answer, sample):
    """A test family that asks its level-1 question at every level."""
    level = pytorch_level("tensor_ops", reference, independent, question, answer, sample)
    return five_levels(name, [level] * 5, about="test family: every level asks level 1's question")


WRONG = _one_question("test_largest_magnitude", largest_magnitude, _largest_magnitude,
                      "Give `m`, the largest |x_i|.", ({"m": f32()},), _quarters)
SOUND = _one_question("test_magnitudes", magnitudes, _magnitudes, "Give `y`, the elementwise |x|.",
                      lambda i: ({"y": f32(4)},), _quarters_or_positive)


def _first_draw(fam, index: int):
    """The task of attempt 0 of (fam, L1, seed 0, index), keyed, unchecked."""
    inputs = fam.sample(Draw(draw_key("pytorch", fam.name, 1, 0, index, 0)), 1)
    definition = dataclasses.replace(fam.task("pt-test", inputs, 1), level=1, seed=0, index=index)
    return materialise(definition, "pytorch", "torch")


@needs_torch
def test_a_reference_wrong_on_some_draws_fails_generation_instead_of_being_redrawn():
    built, refused = {}, {}
    for index in range(10):
        try:
            built[index] = build_instance("pytorch", WRONG, 1, 0, index)
        except GenerationError as error:
            refused[index] = str(error)
    assert built and refused  # the old redraw built all ten from the draws where the bug hides
    for task in built.values():
        x = values(task.inputs["x"])
        assert max(x) == max(abs(e) for e in x), task.id  # only where the bug does not show
    for index, message in refused.items():
        assert "\n" not in message
        assert message.startswith(f"family 'test_largest_magnitude' of the pytorch domain, level 1, seed 0, "
                                  f"index {index} (attempt "), message
        assert ("the domain check found a defect, not a degenerate draw, so it is not redrawn: the "
                "independent computation disagrees with the key: rows[0]['m']") in message, message


@needs_torch
def test_a_degenerate_draw_is_still_redrawn():
    first = {index: _first_draw(SOUND, index) for index in range(6)}
    degenerate = [i for i, task in first.items() if pytorch.check(task)]
    assert degenerate  # some first draws are all positive: |x| is x passed through
    for index in degenerate:
        problems = pytorch.check(first[index])
        assert problems == ["rows[0]['y'] is the input `x` passed through"]
        assert all(type(p) is Degenerate for p in problems)
        task = build_instance("pytorch", SOUND, 1, 0, index)
        assert min(values(task.inputs["x"])) < 0 and pytorch.check(task) == []


@needs_torch
def test_verify_reports_the_disagreement(monkeypatch):
    monkeypatch.setattr(pytorch, "FAMILIES", (WRONG,))
    report = verify_generated("pytorch", 3, 0, (1,))
    lines = format_report(report)
    assert not report.ok
    refused = [line for line in lines if "is not redrawn: the independent computation disagrees" in line]
    assert refused and all(line.startswith("pt-test_largest_magnitude-L1-s0-i") for line in refused), lines
    assert lines[-1] == f"pytorch: {3 - len(refused)}/3 passed"


# ---------------------------------------------------------------- each domain's kinds

def float32_cancellation(x):
    return {"rows": [{"y": (x + 2.0**24) - 2.0**24}]}


def doubled(x):
    return {"rows": [{"y": 2 * x}]}


def _same(x):
    return [{"y": ExactTensor.of("float32", values(x))}]


def _doubled_off_by(share):
    def independent(x):
        shifted = [2 * e - share * (F(POLICY.atol) + F(POLICY.rtol) * abs(2 * e)) for e in values(x)]
        return [{"y": ExactTensor.of("float32", shifted)}]
    return independent


def passthrough(x):
    return {"rows": [{"y": x.clone()}]}


def log_of_negative(x):
    return {"rows": [{"y": x.log()}]}


X = tensor("float32", [1.5, -0.25, 2.75, 0.5])


@needs_torch
@pytest.mark.parametrize(("reference", "independent", "answer", "fragment", "kind"), [
    (doubled, _doubled_off_by(F(7, 10)), ({"y": f32(4)},), "the key uses 70% of the tolerance", Degenerate),
    (doubled, _doubled_off_by(F(3, 2)), ({"y": f32(4)},), "the independent computation disagrees", str),
    (float32_cancellation, _same, ({"y": f32(4)},), "the reference run in float64 agrees", Degenerate),
    (passthrough, _same, ({"y": f32(4)},), "is the input `x` passed through", Degenerate),
    (log_of_negative, _same, ({"y": f32(4)},), "holds NaN or infinity", Degenerate),
    (doubled, _same, ({"y": f32(2, 2)},), "the prompt promises <float32 tensor of shape (2, 2)>", str),
], ids=lambda v: v if isinstance(v, str) else None)
def test_pytorch_problems_carry_their_kind(reference, independent, answer, fragment, kind):
    definition = make_task("pt-900", "tensor_ops", reference=reference, inputs={"x": X}, question="test",
                           answer=answer, independent=independent)
    task = materialise(definition, "pytorch", "torch")
    found = [p for p in pytorch.check(task) if fragment in p]
    assert found and all(type(p) is kind for p in found), (fragment, pytorch.check(task))


def _scaling_task():
    return generate("scaling", seed=0, index=0, level=1, family="matmul_roofline")


def _zeroed(task):
    rows = [dict(row) for row in task.expected["rows"]]
    number = next(k for k, v in rows[0].items() if type(v) in (int, F) and not isinstance(v, bool))
    rows[0][number] = 0
    return dataclasses.replace(task, expected={"rows": rows})


def _deeplearning_task(family):
    return generate("deeplearning", seed=3, index=0, level=1, family=family)


def _mi_rows(task, value):
    rows = [{k: (value(v) if k.startswith("I_") else v) for k, v in row.items()}
            for row in task.expected["rows"]]
    return dataclasses.replace(task, expected={"rows": rows})


@pytest.mark.parametrize(("make", "check", "fragment", "kind"), [
    (lambda: _zeroed(_scaling_task()), scaling.check, "is exactly zero (a cancelled formula?)", Degenerate),
    (lambda: dataclasses.replace(_scaling_task(), policy=POLICY), scaling.check, "policy is", str),
    (lambda: _mi_rows(_deeplearning_task("mutual_information"), lambda v: 0), deeplearning.check,
     "the mutual information must not be zero", Degenerate),
    (lambda: _mi_rows(_deeplearning_task("mutual_information"), lambda v: v + F(1, 7)), deeplearning.check,
     "but exactgrade.rational gives", str),
    (lambda: dataclasses.replace(task := _deeplearning_task("mlp_gradient"),
                                 meta={**task.meta, "fd_step": F(64)}),
     deeplearning.check, "straddles a ReLU kink", Degenerate),
    (lambda: dataclasses.replace(task := _deeplearning_task("entropy"),
                                 meta={**task.meta, "distributions": [[F(3, 8), F(5, 8)]]}),
     deeplearning.check, "is not dyadic", Degenerate),
    (lambda: dataclasses.replace(_deeplearning_task("entropy"), category="vision"), deeplearning.check,
     "unknown category 'vision'", str),
], ids=lambda v: v if isinstance(v, str) and " " in v else None)
def test_scaling_and_deeplearning_problems_carry_their_kind(make, check, fragment, kind):
    problems = check(make())
    found = [p for p in problems if fragment in p]
    assert found and all(type(p) is kind for p in found), (fragment, problems)
