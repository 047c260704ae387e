"""exactgrade's modules import each other top-down: no import circle, at module level or inside a
function (a function-level import hides a circle from the interpreter, not from the reader)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import exactgrade


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at `root`, by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that the module `name` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # `from p import m` imports the module p.m when there is one
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return (found & set(known)) - {name}


def import_graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path that ends where it starts, or None when it is acyclic."""
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))] if start not in done else []
        if stack:
            path.append(start)
            on_path.add(start)
        while stack:
            node, edges = stack[-1]
            step = next(edges, None)
            if step is None:
                stack.pop()
                on_path.discard(path.pop())
                done.add(node)
            elif step in on_path:
                return [*path[path.index(step):], step]
            elif step not in done:
                stack.append((step, iter(sorted(graph[step]))))
                path.append(step)
                on_path.add(step)
    return None


def test_exactgrade_has_no_import_cycle() -> None:
    graph = import_graph(Path(exactgrade.__file__).parent)
    assert "exactgrade.compare" in graph["exactgrade"] and len(graph) > 30  # the walk sees the package
    cycle = first_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# (files of a package `pkg`, the cycle the check must name; None: acyclic)
PACKAGES = [
    ({"a.py": "import pkg.b\n", "b.py": "def f():\n    from pkg import a\n"}, ["pkg.a", "pkg.b", "pkg.a"]),
    ({"a.py": "from . import b\n", "b.py": "from .c import x\n", "c.py": "from .a import y\n"},
     ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]),
    ({"__init__.py": "from pkg.a import f\n", "a.py": "def g():\n    from pkg import f\n"},
     ["pkg", "pkg.a", "pkg"]),
    ({"a.py": "import pkg.b\nimport json\n", "b.py": "from pkg.sub import c\n", "sub/__init__.py": "",
      "sub/c.py": "from .. import b as back\n"}, ["pkg.b", "pkg.sub.c", "pkg.b"]),
    ({"a.py": "import pkg.b\n", "b.py": "import os\nfrom pkg import c\n", "c.py": "x = 1\n"}, None),
]


@pytest.mark.parametrize(("files", "cycle"), PACKAGES, ids=["function-level", "relative", "through __init__",
                                                            "subpackage", "acyclic"])
def test_the_check_names_the_cycle_it_finds(tmp_path: Path, files: dict[str, str],
                                            cycle: list[str] | None) -> None:
    root = tmp_path / "pkg"
    for relative, text in {"__init__.py": "", **files}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    assert first_cycle(import_graph(root)) == cycle
