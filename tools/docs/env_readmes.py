#!/usr/bin/env python
"""The six environment READMEs (environments/*/README.md), rendered from the code and one template,
so that their counts (families, canonical tasks, levels, the tasks text mode serves) cannot drift.

  python tools/docs/env_readmes.py write    render every README into its package
  python tools/docs/env_readmes.py check    render and compare; exit 1 naming each stale README

What comes from the code: the environment's id, module and taskset class (a stream when its class is
infinite), its domain; the Hub description and tags (its pyproject.toml); the domain's canonical
tasks, families, levels, sandbox profile and grading policies; which tasks text mode serves
(exactgrade.env.modes.text_refusal over the canonical tasks and one generated task per family and
level, seed 0 and index 0); the taskset flags and their defaults (the taskset's config class: a
flag of the config with no row here is an error). What is written here: the prose, once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = ROOT / "environments"
COMMAND = "python tools/docs/env_readmes.py write"

SUBJECTS = {
    "scaling": "LLM-scaling arithmetic: rooflines, FLOPs, memory, sharding and inference",
    "pytorch": "PyTorch on CPU: tensor ops, nn modules, autograd, losses and optimisers",
    "deeplearning": "deep-learning mathematics: information theory, backprop, optimisation, linear algebra "
    "and numerical stability",
}
PROFILES = {
    "python": "python (standard library and sympy)",
    "torch": "torch (CPU {torch}, needs `exactgrade[torch]`)",
}
POLICIES = {
    "RelTol": "exact `Fraction` keys, a float answer passes within the tolerance (decided exactly), an int "
    "key needs an exact int",
    "Exact": "every number must be exact (int, `Fraction`, exact sympy), a float fails",
    "AllClose": "tensors within the tolerance, with exact shapes and dtype families, ints exact",
}


@dataclass(frozen=True)
class Flag:
    """One row of the Configuration table: the config field (dotted for a nested one), its meaning;
    `generated` marks a field that only the generated source of a finite pool reads."""

    field: str
    meaning: str
    generated: bool = False
    unset: str = "none"


FLAGS = (
    Flag("source", "`dataset` (the rows of a dataset) or `generated` (a finite pool)"),
    Flag("size", "how many tasks the pool holds", generated=True),
    Flag("seed", "the seed (two seeds share no task)", generated=True),
    Flag("levels", "a level or a range, mixed round-robin", generated=True),
    Flag("families", "a comma-separated filter of family names", generated=True, unset="all"),
    Flag(
        "calibration",
        "a `calibration.json` of `python -m exactgrade calibrate`; keep only the cells whose "
        "pass rate lies in `band`",
        generated=True,
    ),
    Flag("band", "with `calibration`: `LOW-HIGH`, e.g. `0.1-0.9`"),
    Flag("split", "dataset split"),
    Flag("dataset_name", "a local build directory or `.jsonl`, or a Hugging Face Hub id", unset="shipped"),
    Flag(
        "max_turns",
        "model turns before the rollout is stopped and graded as it stands (code and text modes: 1)",
    ),
    Flag(
        "answer_mode",
        "`tools`, `code` (one python block defining `solve`) or `text` (the answer written out, no sandbox)",
    ),
    Flag(
        "hidden_check",
        "code mode: also call `solve` on a hidden instance of the same family and level, "
        "where it asks the same question",
    ),
    Flag("show_task_id", "end generated prompts with a `Task id:` line (only the scripted policies need it)"),
    Flag("tools.runtime.type", "where the shared sandbox tool server runs"),
    Flag("tools.backend", "sandbox backend: `namespaces` where the host allows them, else `landlock`"),
)
NESTED = ("task", "tools")
"""Config fields that are sections; the table shows their leaves that a user sets."""


@dataclass(frozen=True)
class Environment:
    """What one environment's README says, read from its package and the code."""

    env_id: str
    folder: Path
    module: str
    taskset: type
    domain: str
    stream: bool
    tags: tuple[str, ...]


def environments() -> tuple[Environment, ...]:
    """Every package under environments/, with the taskset class its module exports."""
    from exactgrade.env import ExactgradeStream

    found = []
    for folder in sorted(p for p in ENVIRONMENTS.iterdir() if (p / "pyproject.toml").is_file()):
        project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
        if project.get("readme") != "README.md":
            raise SystemExit(f'{folder / "pyproject.toml"}: [project].readme must be "README.md"')
        module = folder.name
        sys.path.insert(0, str(folder))  # this checkout's package, not an installed copy
        try:
            loaded = importlib.import_module(module)
        finally:
            sys.path.remove(str(folder))
        (taskset,) = [getattr(loaded, n) for n in loaded.__all__ if hasattr(getattr(loaded, n), "DOMAIN")]
        found.append(
            Environment(
                project["name"],
                folder,
                module,
                taskset,
                taskset.DOMAIN,
                issubclass(taskset, ExactgradeStream),
                tuple(project["tags"]),
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class DomainFacts:
    """A domain's counts and what text mode serves of it."""

    canonical: int
    canonical_text: int
    families: int
    levels: tuple[int, ...]
    generated_text: tuple[tuple[int, int], ...]
    """(level, how many of one generated task per family text mode serves)."""
    profile: str
    policies: tuple[tuple[str, int, int], ...]
    """(policy, canonical tasks, generated tasks) under each grading policy, in order of first use."""


@cache
def domain_facts(domain: str) -> DomainFacts:
    """Counted from the registry: generated tasks are the first (seed 0, index 0) of each family and level."""
    from exactgrade import families, generate, tasks
    from exactgrade.env.modes import text_refusal
    from exactgrade.family import LEVELS
    from exactgrade.task import domain_module

    canonical = tasks(domain)
    generated = {
        level: [generate(domain, seed=0, index=0, level=level, family=name) for name in families(domain)]
        for level in LEVELS
    }
    drafts = [t for ts in generated.values() for t in ts]
    counted = Counter(repr(t.policy) for t in canonical), Counter(repr(t.policy) for t in drafts)
    order = dict.fromkeys(repr(t.policy) for t in [*canonical, *drafts])
    return DomainFacts(
        canonical=len(canonical),
        canonical_text=sum(text_refusal(t.expected) is None for t in canonical),
        families=len(families(domain)),
        levels=LEVELS,
        generated_text=tuple(
            (level, sum(text_refusal(t.expected) is None for t in ts)) for level, ts in generated.items()
        ),
        profile=domain_module(domain).PROFILE,
        policies=tuple((policy, counted[0][policy], counted[1][policy]) for policy in order),
    )


def text_served(facts: DomainFacts) -> str:
    """What text mode serves, in the words of the Answer modes bullet."""
    if facts.canonical_text == facts.canonical and all(n == facts.families for _, n in facts.generated_text):
        return "served for every task"
    per_level = ", ".join(f"L{level} {n}" for level, n in facts.generated_text)
    return (
        f"served for only the tasks whose keys hold no floating-point tensor: {facts.canonical_text} of the "
        f"{facts.canonical} canonical (the taskset logs how many at load); generated pools and streams skip "
        f"the others (of one generated task per family and level: {per_level} of {facts.families})"
    )


def grading(facts: DomainFacts) -> str:
    """The Grading bullet: each policy the domain's tasks use, on how many, and what it asks."""
    generated = facts.families * len(facts.levels)
    rules = []
    for policy, canonical, drafted in facts.policies:
        counts = (
            canonical and f"{canonical} of {facts.canonical} canonical",
            drafted and f"{drafted} of {generated} generated",
        )
        rules.append(f"`{policy}` ({' and '.join(c for c in counts if c)}): {POLICIES[policy.split('(')[0]]}")
    sample = "generated: one per family and level at seed 0, index 0"
    return f"each task names its policy: {'; '.join(rules)} ({sample})."


def profile_text(profile: str) -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (torch,) = [d.removeprefix("torch") for d in extras["torch"] if d.startswith("torch")]
    return PROFILES[profile].format(torch=f"torch{torch}")


def default_cell(config: Any, flag: Flag) -> str:
    """The default column: the config's own default, or the flag's word for an unset one."""
    value = config
    for part in flag.field.split("."):
        value = getattr(value, part)
    return flag.unset if value is None else f"`{value}`"


def configuration(env: Environment) -> str:
    """The Configuration table: every flag the taskset's config declares (beyond verifiers' own)."""
    import verifiers.v1 as vf
    from verifiers.v1.utils.generic import concrete_type

    config = concrete_type(
        env.taskset, vf.TasksetConfig, origin=vf.Taskset
    )()  # as verifiers' loader finds it
    own = set(type(config).model_fields) - set(vf.TasksetConfig.model_fields) - set(NESTED)
    rows = [flag for flag in FLAGS if flag.field.split(".")[0] in type(config).model_fields]
    missing = own - {flag.field for flag in rows}
    if missing:
        raise SystemExit(f"{env.env_id}: taskset flags with no row in FLAGS of {__file__}: {sorted(missing)}")
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    for flag in rows:
        meaning = f"generated: {flag.meaning}" if flag.generated and not env.stream else flag.meaning
        lines.append(
            f"| `--env.taskset.{flag.field.replace('_', '-')}` | {default_cell(config, flag)} | {meaning} |"
        )
    return "\n".join(lines)


POOL_OVERVIEW = """\
${Subject}, graded exactly: ${canonical} canonical tasks, or a finite pool of
generated tasks from ${families} families at ${level_count} difficulty levels (`--env.taskset.source
generated`), for training (prime-rl, including its `difficulty_pool` curriculum) and evaluation.
The infinite stream of the same generated tasks is its own environment, `${env}-stream`."""

STREAM_OVERVIEW = """\
An **infinite** stream of generated `${base}` tasks: ${Subject}, graded exactly.
Its own environment because infinity is a property of the Taskset class: verifiers and prime-rl
read `type(taskset).INFINITE` (prime-rl's orchestrator iterates an infinite taskset lazily and
materialises a finite one with `list(taskset)`), so `${base}`'s generated source is a finite pool
and this is the stream. Same tasks, same order, same grading as `${base}`'s generated pool."""

POOL_DATASETS = """\
- **Canonical** (`--env.taskset.source dataset`, the default): the `${domain}` dataset shipped in the
  `exactgrade` package, ${canonical} rows (`task_id, category, prompt, api_description, inputs,
  expected_output, policy`; the key column stays on the host). `--env.taskset.dataset-name` takes a
  local build (`python -m exactgrade build --out DIR`, byte-for-byte reproducible) or a Hub id.
- **Generated pool** (`--env.taskset.source generated`): `--env.taskset.size` tasks (default ${size})
  drawn from SHA-256 of (domain, family, seed, index, level) by the ${families} families, in a
  fixed order (position p is cell p mod C of the (level, family) cells, level fastest, index p div
  C), unique `Task.key`s, each built only when the run reaches it. Level 1 is the canonical
  question; higher levels add reasoning (derive, compose, inverse/search, design), never vagueness."""

STREAM_DATASETS = """\
No dataset: tasks are generated from SHA-256 of (domain, family, seed, index, level) by the
${families} task families of the `${domain}` domain (`exactgrade.generate`), each built when the run
reaches it. Position p is cell p mod C of the (level, family) cells (level fastest), index p div C of
that cell's stream. Streams of two seeds share no task; no generated task has a canonical task's inputs."""

POOL_QUICKSTART = """\
```bash
pip install ${env}  # or, in the exactgrade repository: pip install -e . -r environments/requirements.txt
vf-eval ${env} -m MODEL --client.base-url URL --client.api-key-var MY_API_KEY \\
  --env.agent.runtime.type subprocess --no-push -n 10 -r 2
vf-eval ${env} -m MODEL --env.taskset.source generated --env.taskset.size 200 --env.taskset.levels 2-4 \\
  --client.base-url URL --env.agent.runtime.type subprocess --no-push
```

prime-rl, a curriculum over a finite generated pool (its `difficulty_pool` sampler needs a finite
taskset with unique keys and learns each key's pass rate online):

```toml
[[orchestrator.train.source]]
name = "${env}"

[orchestrator.train.source.curriculum]
sampler = { type = "difficulty_pool" }
gates = { zero_advantage = { type = "advantage_range" } }

[orchestrator.train.source.env.taskset]
id = "${env}"
source = "generated"
size = 2000
levels = "${level_range}"
seed = 0

[orchestrator.train.source.env.agent.runtime]
type = "subprocess"
```"""

STREAM_QUICKSTART = """\
```bash
pip install ${env}  # or, in the exactgrade repository: pip install -e . -r environments/requirements.txt
vf-eval ${env} -m MODEL -n 100 --env.taskset.seed 7 --env.taskset.levels 2-4 \\
  --client.base-url URL --client.api-key-var MY_API_KEY --env.agent.runtime.type subprocess --no-push
```

`-n` (or closed `--select.include.idx` ranges) bounds a run; `shuffle` on an infinite taskset is
refused by verifiers."""

POOL_RESULTS = """\
Measured on this project's machine (2-core VM) through real `vf-eval` with the scripted policies
of `python -m exactgrade policy-server` (`python -m exactgrade demo`): `reference` (the task's own
reference program) ${canonical}/${canonical} at 1.0; `mutant` (one deliberate error each) and
`adversarial` (read the key, escape, forge, crash, memory bomb) 0 passes, 0 escapes, 0 harness
failures. `vf-validate ${env} --runtime.type subprocess`: gold valid and noop valid on all
${canonical} tasks. Real-model pass rates per family and level: `python -m exactgrade calibrate
--env ${env} --model M --base-url URL --api-key-var VAR` (calibration.json, a table, a heatmap)."""

STREAM_RESULTS = """\
Measured on this project's machine (2-core VM), scripted policies through real `vf-eval`
(`python -m exactgrade policy-server`): the reference policy scores 1.0 and the mutant 0.0 on
generated tasks (`tests/test_env_generated.py`, `tests/test_packaging.py` runs this package's wheel
from a fresh virtual environment). Per-level pass rates of a real model: `python -m exactgrade
calibrate --env ${base} ...` (the same tasks)."""

TEMPLATE = """\
<!-- Generated by `${command}` from the code and its template; edit those, not this file. -->
# ${env}

## Overview

${overview}

- **Environment id**: `${env}` (module `${module}`, exports one `vf.Taskset` and the default harness)
- **Tags**: ${tags}
- **Built on**: verifiers ${verifiers} (`verifiers.v1`) and the `exactgrade` engine of the same version

## Datasets

${datasets}

## Task

- **Type**: tool use, multi-turn (at most `max_turns` model turns); sandbox profile ${profile}.
- **Answer modes** (`--env.taskset.answer-mode`): `tools` (the default, described here); `code`, one turn, \
no tools: one python block defining `solve(<inputs by name>)`, run by the host in the sandbox on the task's \
inputs and, where the question allows, a hidden instance's; `text`, one turn, no sandbox: the answer in the \
final message (one json block or `\\boxed{}`), read and graded exactly on the host, ${text_served}. See the \
exactgrade repository's docs/answer-modes.md.
- **Grading**: ${grading}
- **Tools**: `execute_code(code)` (a persistent Python interpreter with the task's inputs preloaded
  by name; `result` persists) and `bash(command)`, both in one exactgrade sandbox per rollout
  (bubblewrap, unprivileged uid, cgroup limits, no network). The harness offers no host tool.
- **Answer**: the model leaves its answer in the variable `result`; the host reads it back through a
  strict wire format (never `eval`, `pickle` or `sympify`) and grades it with `exactgrade.compare`
  against a key that never enters TaskData, the prompt, the tool server or the sandbox.
- **Reward** `correctness`: 1.0 if the verdict passes, else 0.0, with `trace.info["reason"]` and
  `trace.info["path"]` naming what differed. A harness failure scores nothing and is flagged
  (`ok: false`, `trace.info["scoring_error"]`); a sandbox the model's own code killed is a wrong
  answer (0.0), never a flagged one.
- **System prompt**: per task, stating only the conventions that apply to its answer (exact values
  where a float would fail, tensors where the answer holds one).

## Quickstart

${quickstart}

Offline on one machine, `--env.agent.runtime.type subprocess` is required (verifiers' default runtime
is a remote Prime sandbox). The harness needs no `uv` and no network on the subprocess runtime. The
host needs `bubblewrap` (or Landlock) and writable cgroups for the sandbox: `python -m exactgrade doctor`.

## Configuration

${configuration}

A plugged reward, judge or `--env.taskset.system-prompt` is refused: grading and prompts are fixed.

## Metrics

| metric | meaning |
|---|---|
| `correctness` (reward) | 1.0 iff the answer passes the exact comparison (weight 1) |
| `level` | the task's difficulty level ${level_range} (canonical tasks: 1) |
| `seed`, `index` | a generated task's seed and index in its (family, level) stream |
| `passed_level_<L>` | the rollout's score, only on level-L rollouts: its mean is the pass rate at level L |
| `passed_family_<family>` | the same per family |
| `tool_calls`, `turns`, `sandbox_seconds` | tool calls handled, model turns, seconds inside the sandbox |

prime-rl averages each metric over the rollouts that have it (`train/<env>/metrics/passed_level_3/mean`
is the pass rate at level 3), so its logs give reward by level and by family. vf-eval's summary line
averages over every rollout of the run instead (a rollout without the metric counts 0): there
`passed_level_2 0.25` with half the rollouts at level 2 is a pass rate of 0.5. TaskData also carries
`family`, `level`, `seed` and `index`; `python -m exactgrade calibrate` tabulates pass rates per cell.

## Results

${results}
"""


def render(env: Environment) -> str:
    """The README of one environment."""
    from importlib.metadata import version

    from exactgrade.env.taskset import DEFAULT_POOL_SIZE

    facts = domain_facts(env.domain)
    subject = SUBJECTS[env.domain]
    values = {
        "command": COMMAND,
        "env": env.env_id,
        "base": env.env_id.removesuffix("-stream"),
        "module": env.module,
        "domain": env.domain,
        "Subject": subject[0].upper() + subject[1:] if not env.stream else subject,
        "canonical": facts.canonical,
        "families": facts.families,
        "size": DEFAULT_POOL_SIZE,
        "level_count": {5: "five"}.get(len(facts.levels), str(len(facts.levels))),
        "level_range": f"{facts.levels[0]}-{facts.levels[-1]}",
        "tags": ", ".join(f"`{tag}`" for tag in env.tags),
        "verifiers": version("verifiers"),
        "profile": profile_text(facts.profile),
        "text_served": text_served(facts),
        "grading": grading(facts),
        "configuration": configuration(env),
    }
    parts = (
        {
            "overview": STREAM_OVERVIEW,
            "datasets": STREAM_DATASETS,
            "quickstart": STREAM_QUICKSTART,
            "results": STREAM_RESULTS,
        }
        if env.stream
        else {
            "overview": POOL_OVERVIEW,
            "datasets": POOL_DATASETS,
            "quickstart": POOL_QUICKSTART,
            "results": POOL_RESULTS,
        }
    )
    values |= {name: Template(text).substitute(values) for name, text in parts.items()}
    return Template(TEMPLATE).substitute(values)


def stale() -> list[Path]:
    """The READMEs that differ from their rendering."""
    return [
        env.folder / "README.md"
        for env in environments()
        if not (env.folder / "README.md").is_file() or (env.folder / "README.md").read_text() != render(env)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("write", "check"))
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # render from this checkout's exactgrade, not an installed copy
    if args.action == "write":
        for env in environments():
            (env.folder / "README.md").write_text(render(env))
            print(f"wrote {(env.folder / 'README.md').relative_to(ROOT)}")
        return 0
    outdated = stale()
    for path in outdated:
        print(f"{path.relative_to(ROOT)} is not current: run `{COMMAND}`")
    return 1 if outdated else 0


if __name__ == "__main__":
    sys.exit(main())
