"""The rollout state shared by the sandbox tool server and the host-side reward.

The host (Task.setup) writes what the tool server needs to build the sandbox: the task's
inputs as wire text and the sandbox profile. The tool server writes back, after every
call, the sandbox's `result` as wire text and the health of the sandbox. The reward reads
it after the rollout. Nothing here is ever the answer key.
"""

from __future__ import annotations

import verifiers.v1 as vf


class SandboxState(vf.State):
    """Typed per-rollout state (`trace.state`); not serialized into traces.jsonl."""

    inputs_wire: str = ""
    """wire.encode(inputs dict), preloaded by name into the sandbox (host -> server)."""
    profile: str = "python"
    """Sandbox profile the task's programs need: "python" or "torch" (host -> server)."""
    result_wire: str | None = None
    """wire.encode of the sandbox's `result` after the last call that left one set."""
    result_error: str | None = None
    """Why the last `result` is not a gradeable value (the sandbox could not encode it)."""
    tool_calls: int = 0
    """Tool calls the server handled (execute_code + bash)."""
    sandbox_seconds: float = 0.0
    """Wall time spent inside the sandbox, creation included."""
    sandbox_uid: int | None = None
    """The uid of the rollout's sandbox once it exists (its cgroups are exactgrade/sb-<uid>)."""
    sandbox_error: str | None = None
    """Set once the sandbox died of a harness failure (the zygote or jail died, the host closed it or
    could not perform the read-back)."""
    model_fault: str | None = None
    """Set once the model's own code ended its sandbox (it exited or killed its worker, hit its memory
    or time limit, forged a reply or its read-back), or its answer cannot be run or read (code mode: no
    block, two blocks, no `solve`, `solve` raised; text mode: no answer, an unreadable one): a wrong
    answer with this reason, not a harness failure, so that a policy cannot void its bad rollouts by
    crashing them."""
    check_wire: str | None = None
    """Code mode: wire.encode of what `solve` returned on the hidden instance (exactgrade.env.code_answer)."""
