"""The outcome of one comparison: data, never an exception."""

from __future__ import annotations

from dataclasses import dataclass

PathPart = str | int


def render_path(path: tuple[PathPart, ...]) -> str:
    """('rows', 2, 'grad') -> "rows[2]['grad']"; the empty path is 'value'."""
    if not path:
        return "value"
    head, *rest = path
    text = str(head) if isinstance(head, str) else f"[{head}]"
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f"[{part!r}]"
    return text


@dataclass(frozen=True, slots=True)
class Verdict:
    """ok, a reason (non-empty whenever ok is false) and the path where it was decided."""

    ok: bool
    reason: str = ""
    path: tuple[PathPart, ...] = ()

    def __post_init__(self) -> None:
        if not self.ok and not self.reason:
            raise ValueError("a failed Verdict needs a reason")

    def __bool__(self) -> bool:
        return self.ok
