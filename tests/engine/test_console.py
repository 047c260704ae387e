"""exactgrade.console: plain lines where the output is no terminal (a log, a pipe), rich's live bar
and fitted table on a real terminal (a pseudo-terminal here)."""

from __future__ import annotations

import io
import os
import re
import threading

import pytest

from exactgrade.console import Progress, print_table, table
from exactgrade.demo import RunResult, Tally, results_table

LINE = re.compile(r"(?P<what>.+): (?P<done>\d+)/(?P<total>\d+) \(\d+ s\)")


def plain_lines(total: int, steps: list[tuple[str, object]]) -> list[tuple[str, int]]:
    """(description, done) of every plain line a Progress writes for these calls."""
    out = io.StringIO()
    with Progress("build scaling", total, file=out) as bar:
        for call, value in steps:
            if call == "advance":
                bar.advance()
            elif call == "update":
                bar.update(value)  # type: ignore[arg-type]
            else:
                bar.update(description=value)  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    matches = [LINE.fullmatch(line) for line in lines]
    assert all(matches), lines
    return [(m["what"], int(m["done"])) for m in matches if m and int(m["total"]) == total]


# (total, the calls, the (description, done) of the lines written)
PLAIN = [
    (20, [("advance", None)] * 20, [("build scaling", n) for n in range(0, 21, 2)]),  # a tenth at a time
    (3, [("advance", None)] * 3, [("build scaling", n) for n in range(4)]),  # small: every step
    # a poll that sees no change writes no line, also once all is done (the demo polls until vf-eval exits)
    (10, [("update", 0), ("update", 0), ("update", 5), ("update", 5), ("update", 10), ("update", 10),
          ("update", 10)],
     [("build scaling", 0), ("build scaling", 5), ("build scaling", 10)]),
    # a new description gets a line at once
    (100, [("advance", None), ("describe", "verify pytorch"), ("advance", None)],
     [("build scaling", 0), ("verify pytorch", 1), ("verify pytorch", 2)]),
    (100, [("advance", None)] * 3, [("build scaling", 0), ("build scaling", 3)]),  # stopped early: its end
]


@pytest.mark.parametrize(("total", "steps", "lines"), PLAIN,
                         ids=["tenths", "every step", "unchanged polls", "description", "early end"])
def test_progress_on_a_log_writes_plain_lines(total: int, steps, lines) -> None:
    assert plain_lines(total, steps) == lines


def test_progress_that_ends_in_an_error_writes_no_last_line_before_the_error() -> None:
    out = io.StringIO()
    with pytest.raises(OSError), Progress("build scaling", 35, file=out) as bar:
        bar.advance()
        raise OSError("disk full")
    (line,) = out.getvalue().splitlines()  # the start only (its seconds are the machine's)
    assert LINE.fullmatch(line).group("what", "done", "total") == ("build scaling", "0", "35")


def test_progress_counts_advances_from_many_threads() -> None:
    out = io.StringIO()
    with Progress("verify", 4000, file=out) as bar:
        workers = [threading.Thread(target=lambda: [bar.advance() for _ in range(1000)]) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert bar.completed == 4000
    assert LINE.fullmatch(out.getvalue().splitlines()[-1])["done"] == "4000"


def test_a_table_on_a_log_is_plain_ascii_without_trailing_spaces() -> None:
    out = io.StringIO()
    grid = table(["policy", "passed"], numeric={"passed"}, file=out)
    grid.add_row("reference", "116/116")
    grid.add_section()
    grid.add_row("[mutant]", "0/116")  # brackets are text, not rich markup
    print_table(grid, out)
    assert out.getvalue().splitlines() == [
        "policy       passed",
        "-------------------",
        "reference   116/116",
        "",
        "[mutant]      0/116",
    ]


def test_the_demo_table_has_a_total_and_attack_rows() -> None:
    out = io.StringIO()
    attacks = {"escape": Tally(rollouts=2, wrong=1, flagged=1)}
    run = RunResult("adversarial", "scaling-env", "/runs/adversarial/scaling-env", 41.6,
                    {"roofline": Tally(rollouts=3, wrong=3)}, attacks, [], [])
    print_table(results_table([run]), out)
    rows = [line.split() for line in out.getvalue().splitlines()]
    assert rows[0] == ["policy/model", "environment", "category", "passed", "wrong", "flagged", "time", "run"]
    assert rows[2:] == [["adversarial", "scaling-env", "roofline", "0/3", "3", "0"],
                        ["adversarial", "scaling-env", "TOTAL", "0/3", "3", "0", "42s",
                         "/runs/adversarial/scaling-env"],
                        ["attack", "escape", "0/2", "1"]]


def read_all(fd: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # the terminal's other side closed
            return
        if not chunk:
            return
        into.append(chunk)


def test_on_a_terminal_progress_is_a_live_bar_and_a_table_is_drawn_by_rich() -> None:
    leader, follower = os.openpty()
    received: list[bytes] = []
    reader = threading.Thread(target=read_all, args=(leader, received))
    reader.start()
    with os.fdopen(follower, "w", encoding="utf-8") as terminal:
        with Progress("[reference] scaling-env", 5, file=terminal) as bar:
            for _ in range(5):
                bar.advance()
        grid = table(["policy", "passed"], numeric={"passed"}, file=terminal)
        grid.add_row("reference", "5/5")
        print_table(grid, terminal)
    reader.join()
    os.close(leader)
    text = b"".join(received).decode()
    assert "\x1b[" in text  # drawn with terminal control sequences, not plain lines
    assert "[reference] scaling-env" in text and "5/5" in text
    assert not LINE.search(text.replace("\r", "\n"))  # no plain progress line
    assert "\u2500" in text  # rich's box rule under the table's header
