"""Task families: unlimited, reproducible, exactly keyed variants of the canonical tasks.

A family is the one task builder its canonical tasks already use (reference + prompt template +
policy and test metadata, as a ``build(task_id, inputs) -> TaskDef``) plus a parameter sampler
``sample(draw, level) -> inputs``. A canonical task is a family with fixed inputs; a generated
task is the same family with sampled inputs, so both share one question text.

Streams: ``generate(domain, seed=S, index=i, level=L, family=F)`` is the i-th task of the stream
(domain, S, L, F). Every draw of a task comes from SHA-256 of (domain, family, seed, index, level,
attempt), never from Python's ``random`` or ``hash``: the same arguments give the same task in any
process, under any PYTHONHASHSEED, on any machine, and the streams of two seeds share nothing
(unlike ``Random(seed + i)``, where seed 43 is seed 42 shifted by one). ``family=None`` interleaves
the domain's families round-robin: index i is index i // n of family i % n, so a mixed stream is
made of the same tasks as the per-family streams and no task appears twice in it.

Rejection sampling: a sampler raises ``Reject`` for an instance it will not pose; every built
instance must also pass the family's own ``reject`` test (e.g. "the named mistake gives the right
answer") and the domain's ``check()``, and must not have the inputs of a canonical task. Each
attempt draws afresh; after MAX_ATTEMPTS the family raises GenerationError naming family, seed,
index and level. Accepted tasks are cached, so a host holding only an id rebuilds the key once.

Only a degenerate draw is redrawn. A check() problem is ``Degenerate`` when the draw is sound but
not worth posing (a tie, a key too close to a tolerance edge, a zero or constant field); any other
problem (the independent recomputation disagrees with the key, the key breaks the prompt's
promise) is a defect of the reference or of the check, and generation fails closed on it with a
GenerationError instead of redrawing: a redraw would keep only the draws where the defect does
not show, and so pose valid-looking tasks from a wrong reference.

The level ladder (one meaning in all three domains; every family has all five levels). A level
adds *reasoning*, never size alone and never vagueness: every convention and hardware number is
stated at every level, and nothing must be recalled.

- L1 (stated): the asked quantity's formula, or the torch call and its options, is stated; the
  task is transcription plus exact arithmetic (the canonical tasks are L1).
- L2 (derive): the setup and the conventions are stated, the formula of the asked quantity is
  not; the model derives it (a pipeline schedule described, its bubble not given; a tensor
  operation described mathematically, the torch call not named).
- L3 (compose): the answer chains several quantities, possibly of several families (what fits
  in memory, then the largest batch, then its step time, then the bound); intermediate values
  are not asked.
- L4 (inverse and search): the smallest or largest parameter, or the best of candidate
  configurations, under constraints, decided exactly, ties broken by a stated rule.
- L5 (design): several interacting constraints, or a closed form in symbols, or an algorithm
  described but not named, to reproduce (a module or a training loop from its mathematics).

Shortcut-proof instances: ``Family.varying`` names the categorical key fields (``bound``,
``fits``, ...) that must take at least two values within one instance, so a constant answer
fails; generation rejects an instance where one does not (``constant_fields``). A field constant
by physics is listed in ``Family.constant`` with the reason instead, and the prompt says so.
``Family.branches`` names the reference's cases (a None answer, a tie broken by the stated rule,
an edge) that a stated share of instances must reach; each domain's table test checks the
shares, the varying fields and the family's degenerate-instance test (``reject``) on 200
instances per level.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any, TypeVar

from exactgrade.task import DOMAINS, ID_PREFIX, Task, TaskDef, domain_module, materialise

LEVELS = (1, 2, 3, 4, 5)
MAX_ATTEMPTS = 200
MAX_SEED = 2**63 - 1
STREAM_VERSION = "exactgrade-families-v2"
"""Part of every task's hash: change it only to deliberately re-draw every stream (v2: the
reasoning ladder; a v1 generated id names another task under v2)."""

T = TypeVar("T")


class Reject(Exception):
    """Raised by a sampler for an instance it will not pose; the generator draws again."""


class GenerationError(RuntimeError):
    """A family found no valid instance within MAX_ATTEMPTS draws, or a draw showed a defect."""


class Degenerate(str):
    """A domain check's problem that means the draw is degenerate, not that anything is wrong: a
    tie, a key too close to a tolerance edge, a zero or constant field. Generation redraws it.
    A problem that is a plain ``str`` is a defect (a disagreement with the independent
    recomputation, a broken promise of the prompt): generation fails closed on it. Being a str,
    it prints, joins and compares as its text, so verify reports both kinds alike."""

    __slots__ = ()


def defects(problems: Sequence[str]) -> list[str]:
    """The problems that are not Degenerate: each one a defect that no redraw may hide."""
    return [problem for problem in problems if not isinstance(problem, Degenerate)]


class Draw:
    """Deterministic random choices from a SHA-256 counter stream.

    Python's ``random`` is avoided on purpose: its algorithms are an implementation detail,
    while this stream is fixed by its definition, so a task id rebuilds the same task anywhere.
    """

    def __init__(self, key: str) -> None:
        self._key = key.encode()
        self._counter = 0

    def _word(self) -> int:
        digest = hashlib.sha256(self._key + b"#" + str(self._counter).encode()).digest()
        self._counter += 1
        return int.from_bytes(digest, "big")

    def below(self, n: int) -> int:
        """A uniform int in [0, n)."""
        if type(n) is not int or n <= 0:
            raise ValueError(f"below(n) needs a positive int, got {n!r}")
        bits = n.bit_length()
        while True:
            value, have = 0, 0
            while have < bits:
                value, have = (value << 256) | self._word(), have + 256
            value >>= have - bits
            if value < n:
                return value

    def integer(self, low: int, high: int) -> int:
        """A uniform int in [low, high], both included."""
        if high < low:
            raise ValueError(f"integer({low}, {high}): empty range")
        return low + self.below(high - low + 1)

    def choice(self, options: Sequence[T]) -> T:
        if not options:
            raise ValueError("choice from an empty sequence")
        return options[self.below(len(options))]

    def shuffled(self, options: Sequence[T]) -> list[T]:
        """A new list with the options in uniformly random order (Fisher-Yates)."""
        items = list(options)
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]
        return items

    def sample(self, options: Sequence[T], k: int) -> list[T]:
        """k distinct options, in random order (a partial Fisher-Yates: O(k) draws, so sampling
        from a large range is cheap)."""
        n = len(options)
        if not 0 <= k <= n:
            raise ValueError(f"sample of {k} from {n} options")
        moved: dict[int, int] = {}
        picked = []
        for i in range(k):
            j = i + self.below(n - i)
            picked.append(options[moved.get(j, j)])
            moved[j] = moved.get(i, i)
        return picked

    def chance(self, numerator: int, denominator: int) -> bool:
        """True with probability numerator/denominator."""
        return self.below(denominator) < numerator

    def dyadic(self, low: Fraction | int, high: Fraction | int, bits: int) -> Fraction:
        """A uniform multiple of 2**-bits in [low, high]."""
        scale = 2**bits
        lo, hi = Fraction(low) * scale, Fraction(high) * scale
        first, last = -((-lo.numerator) // lo.denominator), hi.numerator // hi.denominator
        return Fraction(self.integer(first, last), scale)


@dataclass(frozen=True)
class Branch:
    """A case of a family's reference that generated instances must reach (a None answer, a tie
    broken by the stated rule, an edge): in at least ``share`` of the instances of each level in
    ``levels`` (checked by the domain's table test, over 200 instances per level)."""

    name: str
    reached: Callable[[Task], bool]
    share: Fraction
    levels: tuple[int, ...] = LEVELS


@dataclass(frozen=True)
class Family:
    """One kind of task: the builder its canonical tasks use, and a sampler of new inputs.

    ``build(task_id, inputs)`` returns the TaskDef (reference, prompt, policy, metadata) of the
    canonical question (level 1); ``build_level(task_id, inputs, level)``, when given, returns it
    for every level (its level 1 must be ``build``'s), so a level can ask another question of
    the same setting; ``sample(draw, level)`` returns inputs for a level 1..5 or raises Reject;
    ``reject(task)`` says why a built, keyed instance must not be posed (None: accept);
    ``levels`` says what each level asks the model to reason (it goes into the docs).
    ``varying``, ``constant`` and ``branches`` are the shortcut rules (module docstring).
    """

    name: str
    build: Callable[[str, Mapping[str, Any]], TaskDef]
    sample: Callable[[Draw, int], Mapping[str, Any]]
    levels: str
    reject: Callable[[Task], str | None] | None = None
    build_level: Callable[[str, Mapping[str, Any], int], TaskDef] | None = None
    varying: tuple[str, ...] = ()
    constant: Mapping[str, str] = dataclasses.field(default_factory=dict)
    branches: tuple[Branch, ...] = ()

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"family name {self.name!r} must be lower_snake_case (it is part of task ids)")
        both = set(self.varying) & set(self.constant)
        if both:
            raise ValueError(f"family {self.name!r}: {sorted(both)} cannot be both varying and constant")

    def task(self, task_id: str, inputs: Mapping[str, Any], level: int = 1) -> TaskDef:
        """The TaskDef of this family with these inputs at this level (a canonical task is
        level 1 with fixed inputs; a generated one has sampled inputs)."""
        build = self.build if self.build_level is None else (
            lambda task_id, inputs: self.build_level(task_id, inputs, level))  # type: ignore[misc]
        return dataclasses.replace(build(task_id, inputs), family=self.name)


Builder = Callable[[str, Mapping[str, Any]], TaskDef]
"""``build(task_id, inputs) -> TaskDef``: a level's question (reference, prompt, policy, and in its
meta the independent check the domain's check() runs)."""
Sampler = Callable[[Draw, int], Mapping[str, Any]]
"""``sample(draw, level) -> inputs``, or Reject for a draw not worth posing."""
Rule = Callable[[Task], str | None]
"""Why a built, keyed instance must not be posed (None: accept)."""


@dataclass(frozen=True)
class Level:
    """One level of a family: the question it asks (``build``), the inputs it draws (``sample``)
    and the reason it refuses a built instance (``reject``). A level may ask another question of
    its own inputs than the level below it, so each carries its own builder; a domain's level
    constructor (``pytorch_level``, ...) fills these from the domain's vocabulary."""

    build: Builder
    sample: Sampler
    reject: Rule | None = None


def five_levels(name: str, levels: Sequence[Level], *, about: str, reject: Rule | None = None,
                varying: tuple[str, ...] = (), constant: Mapping[str, str] | None = None,
                branches: tuple[Branch, ...] = ()) -> Family:
    """The one way to declare a family: its five Levels in order (level 1 is the canonical
    question), ``about`` what each level asks (it goes into the docs), ``reject`` a rule every
    level's instances pass before their own, and the shortcut rules (module docstring).
    A family without exactly five levels raises ValueError where it is declared, at import."""
    if len(levels) != len(LEVELS) or not all(isinstance(level, Level) for level in levels):
        raise ValueError(f"family {name!r} declares {len(levels)} levels: every family has exactly "
                         f"{len(LEVELS)}, one Level each")
    table = dict(zip(LEVELS, levels, strict=True))

    def sample(draw: Draw, level: int) -> Mapping[str, Any]:
        return table[level].sample(draw, level)

    def build_level(task_id: str, inputs: Mapping[str, Any], level: int) -> TaskDef:
        return table[level].build(task_id, inputs)

    def reject_instance(task: Task) -> str | None:
        own = table[task.level or 1].reject
        problem = reject(task) if reject is not None else None
        return problem if problem is not None or own is None else own(task)

    return Family(name=name, build=levels[0].build, sample=sample, levels=about, reject=reject_instance,
                  build_level=build_level, varying=varying, constant=dict(constant or {}), branches=branches)


def field_values(expected: Any, path: str) -> list[Any]:
    """The values at ``path`` in a key: dotted dict keys, ``[]`` for every element of a list
    (``"rows[].bound"``, ``"best.fits"``). A missing key or a non-list under ``[]`` is an error
    in the family's rules, raised as ValueError."""
    values = [expected]
    for part in path.split("."):
        each = part.endswith("[]")
        name = part[:-2] if each else part
        step = []
        for value in values:
            if name:
                if not isinstance(value, Mapping) or name not in value:
                    raise ValueError(f"rule path {path!r}: no key {name!r} in the answer key")
                value = value[name]
            if each:
                if not isinstance(value, list):
                    raise ValueError(f"rule path {path!r}: {name or 'the key'} is not a list")
                step.extend(value)
            else:
                step.append(value)
        values = step
    return values


def constant_fields(expected: Any, paths: Sequence[str]) -> str | None:
    """Why a constant answer would pass: the first of ``paths`` whose values in the key are all
    the same (including a single row), or None when every one takes two values or more."""
    for path in paths:
        values = field_values(expected, path)
        if len({repr(v) for v in values}) < 2:
            shown = repr(values[0]) if values else "nothing"
            return f"a constant answer passes: {path} is {shown} in every row ({len(values)} rows)"
    return None


# ---------------------------------------------------------------------------- registry


def _family_table(domain: str) -> dict[str, Family]:
    module = domain_module(domain)
    return {family.name: family for family in getattr(module, "FAMILIES", ())}


def families(domain: str) -> tuple[str, ...]:
    """The family names of a domain, in their documented order."""
    return tuple(_family_table(domain))


def family_of(domain: str, name: str) -> Family:
    """The Family object (sampler, builder) called ``name`` in ``domain``."""
    table = _family_table(domain)
    if name not in table:
        known = ", ".join(table) or "none yet"
        raise ValueError(f"unknown family {name!r} of the {domain} domain; known: {known}")
    return table[name]


def check_level(level: object) -> int:
    if type(level) is not int or level not in LEVELS:
        raise ValueError(f"level must be an int from {LEVELS[0]} to {LEVELS[-1]}, got {level!r}")
    return level


def _check_count(name: str, value: object) -> int:
    if type(value) is not int or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{name} must be an int from 0 to 2**63 - 1, got {value!r}")
    return value


# ---------------------------------------------------------------------------- ids

_GENERATED_ID = re.compile(r"(?P<prefix>[a-z]+)-(?P<family>[a-z][a-z0-9_]*)-L(?P<level>[1-5])"
                           r"-s(?P<seed>0|[1-9][0-9]*)-i(?P<index>0|[1-9][0-9]*)")


def generated_id(domain: str, family: str, level: int, seed: int, index: int) -> str:
    """The self-describing id of a generated task: ``sc-matmul_roofline-L3-s0-i17``."""
    return f"{ID_PREFIX[domain]}-{family}-L{level}-s{seed}-i{index}"


def parse_generated_id(task_id: str) -> tuple[str, str, int, int, int] | None:
    """(domain, family, level, seed, index) of a generated id, or None if it is not one."""
    match = _GENERATED_ID.fullmatch(task_id)
    if match is None:
        return None
    domain = next((d for d, p in ID_PREFIX.items() if p == match["prefix"]), None)
    if domain is None:
        return None
    return domain, match["family"], int(match["level"]), int(match["seed"]), int(match["index"])


# ---------------------------------------------------------------------------- generation


def generate(domain: str, *, seed: int, index: int, level: int = 1, family: str | None = None) -> Task:
    """The ``index``-th task of the stream (domain, seed, level, family).

    ``family=None`` interleaves all of the domain's families round-robin.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; expected one of {sorted(DOMAINS)}")
    check_level(level)
    _check_count("seed", seed)
    _check_count("index", index)
    if family is None:
        names = families(domain)
        if not names:
            raise ValueError(f"the {domain} domain has no task families yet")
        family, index = names[index % len(names)], index // len(names)
    else:
        family_of(domain, family)
    return generated_task(domain, family, level, seed, index)


def get_generated(task_id: str) -> Task | None:
    """The generated task with this id, rebuilt from the id alone; None if not a generated id."""
    parsed = parse_generated_id(task_id)
    if parsed is None:
        return None
    domain, family, level, seed, index = parsed
    family_of(domain, family)
    return generated_task(domain, family, level, seed, index)


@lru_cache(maxsize=8192)
def generated_task(domain: str, family: str, level: int, seed: int, index: int) -> Task:
    """The accepted instance (validated arguments; cached)."""
    return build_instance(domain, family_of(domain, family), level, seed, index)


def draw_key(domain: str, family: str, level: int, seed: int, index: int, attempt: int) -> str:
    """The Draw key of one attempt of a generated task (a worker re-checks carried inputs with it)."""
    return f"{STREAM_VERSION}|{domain}|{family}|{seed}|{index}|{level}|{attempt}"


def build_instance(domain: str, fam: Family | str, level: int, seed: int, index: int, *,
                   checked: bool = True) -> Task:
    """Rejection-sample one instance of ``fam`` (a Family or the name of one of the domain's).
    A check() problem that is not Degenerate raises GenerationError at once (module docstring).
    ``checked=False`` skips the domain's check() (only for measuring the cost of generation
    apart from the independent checks)."""
    module = domain_module(domain)
    if isinstance(fam, str):
        fam = family_of(domain, fam)
    family = fam.name
    rejections: Counter[str] = Counter()
    for attempt, definition in _sampled(domain, fam, level, seed, index, rejections):
        task = materialise(definition, domain, module.PROFILE)
        problem = constant_fields(task.expected, fam.varying)
        if problem is None and fam.reject is not None:
            problem = fam.reject(task)
        if problem is None and checked:
            problems = module.check(task)
            found = defects(problems)
            if found:
                more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
                raise GenerationError(f"family {family!r} of the {domain} domain, level {level}, seed "
                                      f"{seed}, index {index} (attempt {attempt}): the domain check found a "
                                      "defect, not a degenerate draw, so it is not redrawn: "
                                      f"{_one_line(found[0])}{more}")
            problem = "; ".join(problems) if problems else None
        if problem is not None:
            rejections[problem[:120]] += 1
            continue
        return task
    common = "; ".join(f"{reason} ({count}x)" for reason, count in rejections.most_common(3))
    raise GenerationError(f"family {family!r} of the {domain} domain found no valid instance in "
                          f"{MAX_ATTEMPTS} attempts (seed {seed}, index {index}, level {level}); "
                          f"most common rejections: {common}")


def _sampled(domain: str, fam: Family, level: int, seed: int, index: int,
             rejections: Counter[str]) -> Iterator[tuple[int, TaskDef]]:
    """(attempt, TaskDef) of each draw of an instance that its sampler accepts and that is not a
    canonical task's, in attempt order, counting the others in ``rejections``; no reference runs."""
    task_id = generated_id(domain, fam.name, level, seed, index)
    canonical = _canonical_inputs(domain)
    for attempt in range(MAX_ATTEMPTS):
        draw = Draw(draw_key(domain, fam.name, level, seed, index, attempt))
        try:
            inputs = dict(fam.sample(draw, level))
        except Reject as reason:
            rejections[str(reason) or "sampler"] += 1
            continue
        if _inputs_text(inputs) in canonical:
            rejections["the inputs of a canonical task"] += 1
            continue
        definition = fam.task(task_id, inputs, level)
        yield attempt, dataclasses.replace(definition, level=level, seed=seed, index=index)


def first_draft(domain: str, family: str, level: int, seed: int, index: int) -> TaskDef | None:
    """The TaskDef of the first draw of a generated task that its sampler accepts: the question
    the instance asks unless a check later rejects that draw. Cheap (no reference or check runs);
    None if the sampler accepts no draw."""
    fam = family_of(domain, family)
    return next((definition for _, definition in _sampled(domain, fam, level, seed, index, Counter())), None)


DEFECT_SHOWN = 600
"""Characters of a defect a GenerationError quotes (a key printed whole can run to pages)."""


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DEFECT_SHOWN else flat[:DEFECT_SHOWN] + "..."


def _inputs_text(inputs: Mapping[str, Any]) -> str:
    from exactgrade import wire

    return wire.encode(dict(inputs))


@cache
def _canonical_inputs(domain: str) -> frozenset[str]:
    return frozenset(_inputs_text(d.inputs) for d in domain_module(domain).TASKS)


def parse_levels(text: str) -> tuple[int, ...]:
    """``"3"`` -> (3,); ``"2-4"`` -> (2, 3, 4); ``"1,5"`` -> (1, 5); ``"1-2,5"`` -> (1, 2, 5): the levels
    of a command-line option, in increasing order, each once (a list measures L1 and L5 without
    the levels between)."""
    low, high = LEVELS[0], LEVELS[-1]
    chosen: set[int] = set()
    for part in str(text).split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        first = int(match.group(1)) if match else 0
        last = int(match.group(2)) if match and match.group(2) is not None else first
        if not low <= first <= last <= high:
            raise ValueError(f"levels must be levels from {low} to {high} or ranges A-B of them, "
                             f"comma-separated (e.g. {low}-{high} or 1,5), got {text!r}")
        chosen.update(range(first, last + 1))
    return tuple(sorted(chosen))


def parse_families(domain: str, text: str | None) -> tuple[str, ...]:
    """``None`` -> every family of the domain; ``"a,b"`` -> ("a", "b"), each checked against the
    domain's (ValueError naming the known families): the families of a command-line option."""
    if text is None:
        return families(domain)
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        family_of(domain, name)
    if not names:
        raise ValueError(f"{text!r} names no family: give a comma-separated list of {domain} families")
    return names


def definition_of(task: Task) -> TaskDef:
    """The TaskDef a generated task was materialised from (what verify re-runs)."""
    if task.family is None or task.level is None:
        raise ValueError(f"{task.id} is not a generated task")
    fam = family_of(task.domain, task.family)
    return dataclasses.replace(fam.task(task.id, task.inputs, task.level), level=task.level, seed=task.seed,
                               index=task.index)
