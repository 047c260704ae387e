"""Code mode's hidden check: `solve` also answers a hidden instance of the same family and level.

A hard-coded answer passes the task's own inputs and fails the hidden instance. The check is fair
only where the hidden instance asks the same question, word for word, apart from the inputs' listed
values and the answer's shown shape (a question that states a number outside the inputs, e.g.
`reshape to (3, 4)`, has another number in another instance, which `solve` cannot know); the
prompt says whether it applies.

Whether it applies is decided when the task is loaded, from the hidden instance's *draft* (its
first draw the sampler accepts, rendered without running any reference or check), so a
taskset loads as fast as in tools mode. The hidden instance itself (reference and checks run) is
built only when a rollout is graded. If the built instance asks another question than its draft
(a check rejected the draft's draw), the rollout is graded on the task's own inputs only, and the
trace says so: the prompt's promise of a fair check is kept, and a skipped check never makes a
wrong answer pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exactgrade.task import Task

HIDDEN_INDEX_BIT = 1 << 62
"""The hidden instance of a task at index i is index i ^ HIDDEN_INDEX_BIT of its stream (a canonical
task: of the generated level-1 stream of seed 0), never in a pool a run draws from."""


def hidden_instance(
    domain: str, family: str | None, level: int | None, seed: int | None, index: int | None
) -> Task | None:
    """The hidden instance of a task, built (its reference runs: it blocks); None without a family."""
    from exactgrade.family import generate

    if family is None or level is None:
        return None
    return generate(domain, seed=seed or 0, index=(index or 0) ^ HIDDEN_INDEX_BIT, level=level, family=family)


def hidden_check_applies(
    prompt: str,
    inputs: Iterable[str],
    domain: str,
    family: str | None,
    level: int | None,
    seed: int | None,
    index: int | None,
) -> bool:
    """Whether the task (its tools-mode `prompt` and input names) and its hidden instance's draft ask
    the same question of inputs of the same names (decided at load, without building the instance)."""
    if family is None or level is None:
        return False
    draft = _draft(domain, family, level, seed or 0, (index or 0) ^ HIDDEN_INDEX_BIT)
    return draft is not None and draft == (tuple(sorted(inputs)), question(prompt))


def draft_kept(hidden: Task) -> bool:
    """Whether the built hidden instance asks its draft's question (what the load decided from)."""
    draft = _draft(hidden.domain, hidden.family or "", hidden.level or 1, hidden.seed or 0, hidden.index or 0)
    return draft == (tuple(sorted(hidden.inputs)), question(hidden.prompt))


@lru_cache(maxsize=4096)
def _draft(
    domain: str, family: str, level: int, seed: int, index: int
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(input names, question) of the first draw of generated task (family, level, seed, index) its
    sampler accepts; None if it accepts none."""
    from exactgrade.family import first_draft

    draft = first_draft(domain, family, level, seed, index)
    if draft is None:
        return None
    return tuple(sorted(draft.inputs)), question(draft.render(draft.inputs))


def question(prompt: str) -> tuple[str, ...]:
    """A tools-mode prompt without its input listing and its answer-shape line."""
    return tuple(line for line in prompt.strip().splitlines() if not line.startswith(("- `", "result = ")))
