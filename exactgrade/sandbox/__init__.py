"""Isolated, persistent execute_code/bash workers for model-written code.

    from exactgrade.sandbox import Sandbox, SandboxDied, NoResult
    with Sandbox(inputs={"x": Fraction(3, 2)}, profile="python") as sb:   # or profile="torch"
        out = sb.execute_code("result = x * 2\\nprint(result)")
        out = sb.bash("ls -la && python3 -c 'print(1)'")
        value = sb.result()   # decoded through exactgrade.wire; NoResult if never set
    # SandboxDied.death says what ended a sandbox and whether the model's code did (deaths.py)

Backends and their guarantees: see backends.py and `python -m exactgrade doctor`.
"""

from exactgrade.sandbox.errors import Death, NoResult, ResultNotEncodable, SandboxDied, SandboxUnavailable
from exactgrade.sandbox.sandbox import PROFILES, Limits, Sandbox, warm

__all__ = [
    "PROFILES", "Death", "Limits", "NoResult", "ResultNotEncodable", "Sandbox", "SandboxDied",
    "SandboxUnavailable", "warm",
]
