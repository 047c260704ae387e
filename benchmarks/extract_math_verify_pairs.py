"""Write benchmarks/data/math_verify_pairs.json: Math-Verify's own labelled test pairs, as strings.

Source: huggingface/Math-Verify (Apache-2.0, Copyright The HuggingFace Team), tests/*.py at the
commit given below. Every @pytest.mark.parametrize row with (gold, pred, expected) literals is
kept with the test it comes from and the options that test passes to its compare_strings helper
(match_types, precision, strict, allow_set_relation_comp), so bench_text.py can grade each pair
the way Math-Verify's own test does. Rows that are not literals (none at this commit) are skipped.

    python benchmarks/extract_math_verify_pairs.py /path/to/Math-Verify
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

FILES = (
    "tests/test_all.py",
    "tests/test_numina_cases.py",
    "tests/test_open_thoughts.py",
    "tests/test_yujianll.py",
    "tests/test_strict.py",
    "tests/test_boxed.py",
)
OUT = Path(__file__).parent / "data" / "math_verify_pairs.json"


def _options(function: ast.FunctionDef) -> dict[str, object]:
    """The literal keyword arguments of the compare_strings call in a test body."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "compare_strings":
            return {
                k.arg: ast.literal_eval(k.value)
                for k in node.keywords
                if k.arg and isinstance(k.value, ast.Constant | ast.List)
            }
    return {"match_types": ["parse-default"]}  # test_yujianll calls parse() and verify() directly


def _rows(path: str, source: str) -> list[dict[str, object]]:
    rows = []
    for function in ast.parse(source).body:
        if not isinstance(function, ast.FunctionDef):
            continue
        for decorator in function.decorator_list:
            if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                continue
            names = [n.strip() for n in ast.literal_eval(decorator.args[0]).split(",")]
            options = _options(function)
            for element in decorator.args[1].elts:
                try:
                    values = dict(zip(names, ast.literal_eval(element), strict=True))
                except ValueError:
                    continue
                label = values.pop("expected", values.pop("result", None))
                row = {
                    "file": path,
                    "test": function.name,
                    "gold": values.pop("gold"),
                    "pred": values.pop("pred"),
                    "expected": int(label),
                }
                row.update(options)
                row.update(values)  # per-row options (precision, strict, allow_set_relation_comp)
                rows.append(row)
    return rows


def main(repo: str) -> None:
    commit = subprocess.run(
        ["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    rows = []
    for path in FILES:
        source = subprocess.run(
            ["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
        ).stdout
        rows.extend(_rows(path, source))
    data = {
        "source": f"https://github.com/huggingface/Math-Verify/tree/{commit}/tests",
        "license": "Apache-2.0, Copyright The HuggingFace Team",
        "commit": commit,
        "pairs": rows,
    }
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pairs -> {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
