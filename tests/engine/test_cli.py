"""Bad input at the command line: every command answers a bad argument with one clear line on
stderr and a non-zero exit, never a traceback. Each row runs the real `python -m exactgrade`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_leftovers import HANG_GUARD

from exactgrade import cli_args
from exactgrade.cli import COMMANDS

UNSET = "EXACTGRADE_TEST_SURELY_UNSET"
CALIBRATE = ["--model", "m", "--base-url", "http://127.0.0.1:1/v1"]

# (arguments, words the one line must hold, extra environment). {tmp}: a fresh directory;
# {file}: a regular file; {dir}: a directory; {binary}: a file that is not UTF-8; {blocked}: a
# directory whose `scaling` entry is a file; {busy}: a port something is listening on.
BAD = [
    ([], ["required: COMMAND"], {}),
    (["nope"], ["invalid choice: 'nope'"], {}),
    # build
    (["build"], ["required: --out"], {}),
    (["build", "--out", "/proc/nope"], ["argument --out", "cannot write to /proc/nope"], {}),
    (["build", "--out", "{file}"], ["argument --out", "exists and is not a directory"], {}),
    (["build", "--out", "{file}/sub"], ["argument --out", "is not a directory"], {}),
    (["build", "--out", ""], ["argument --out", "must be a directory path"], {}),
    (["build", "--out", "{tmp}/o", "--domain", "chemistry"], ["argument --domain", "invalid choice"], {}),
    (["build", "--out", "{blocked}", "--domain", "scaling"], ["build: error: File exists", "scaling"], {}),
    # verify
    (["verify", "--task-timeout", "-3"], ["argument --task-timeout", "greater than 0", "'-3'"], {}),
    (["verify", "--task-timeout", "0"], ["argument --task-timeout", "greater than 0"], {}),
    (["verify", "--task-timeout", "nan"], ["argument --task-timeout", "finite"], {}),
    (["verify", "--task-timeout", "inf"], ["argument --task-timeout", "finite"], {}),
    (["verify", "--task-timeout", "soon"], ["argument --task-timeout", "number of seconds", "'soon'"], {}),
    (["verify", "--domain", "chemistry"], ["argument --domain", "invalid choice"], {}),
    (["verify", "extra"], ["unrecognized arguments: extra"], {}),
    # doctor
    (["doctor", "--bogus"], ["unrecognized arguments: --bogus"], {}),
    # demo
    (["demo", "--limit", "-1"], ["argument --limit", "positive integer", "'-1'"], {}),
    (["demo", "--limit", "0"], ["argument --limit", "positive integer"], {}),
    (["demo", "--limit", "two"], ["argument --limit", "positive integer", "'two'"], {}),
    (["demo", "--concurrency", "0"], ["argument --concurrency", "positive integer"], {}),
    (["demo", "--max-turns", "0"], ["argument --max-turns", "positive integer"], {}),
    (["demo", "--max-turns", "1.5"], ["argument --max-turns", "positive integer"], {}),
    (["demo", "--out", "/proc/nope"], ["argument --out", "cannot write to /proc/nope"], {}),
    (["demo", "--out", "{file}"], ["argument --out", "exists and is not a directory"], {}),
    (["demo", "--envs", "chess-env"], ["argument --envs", "invalid choice"], {}),
    (["demo", "--policies", "perfect"], ["argument --policies", "invalid choice"], {}),
    (["demo", "--model", " "], ["argument --model", "must not be empty"], {}),
    (["demo", "--base-url", "ftp://host/v1"], ["argument --base-url", "http:// or https://"], {}),
    (["demo", "--api-key-var", "1-BAD"], ["argument --api-key-var", "name of an environment variable"], {}),
    (["demo", "--api-key-var", UNSET], ["argument --api-key-var", f"{UNSET} is not set"], {}),
    (["demo", "--model", "m"], ["--model and --base-url go together"], {}),
    (["demo", "--base-url", "http://127.0.0.1:1/v1"], ["--model and --base-url go together"], {}),
    (["demo", "--api-key-var", "HOME"], ["--api-key-var needs --model"], {}),
    (["demo", "--envs", "scaling-env", "scaling-env"], ["--envs lists scaling-env more than once"], {}),
    (["demo", "--policies", "mutant", "reference", "mutant"], ["--policies lists mutant more than once"], {}),
    (["demo", "--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--policies", "mutant"],
     ["--policies chooses scripted policies", "with --model"], {}),
    (["demo", "--limit", "1"], ["vf-eval is not on PATH"], {"PATH": "/nonexistent"}),
    # policy-server
    (["policy-server", "--port", "70000"], ["argument --port", "0 to 65535", "'70000'"], {}),
    (["policy-server", "--port", "-1"], ["argument --port", "0 to 65535"], {}),
    (["policy-server", "--port", "http"], ["argument --port", "port number"], {}),
    (["policy-server", "--port", "{busy}"], ["policy-server: error: Address already in use"], {}),
    (["policy-server", "--policy", "perfect"], ["argument --policy", "invalid choice"], {}),
    (["policy-server", "--log", "/proc/x/requests.jsonl"], ["argument --log", "/proc/x does not exist"], {}),
    (["policy-server", "--log", "/proc/requests.jsonl"], ["argument --log", "cannot write to"], {}),
    (["policy-server", "--log", "{dir}"], ["argument --log", "is a directory"], {}),
    (["policy-server", "--canary-file", "{tmp}/none.txt"], ["argument --canary-file", "does not exist"], {}),
    (["policy-server", "--canary-file", "{dir}"], ["argument --canary-file", "not a regular file"], {}),
    (["policy-server", "--canary-file", "{binary}"], ["argument --canary-file", "not UTF-8 text"], {}),
    # calibrate
    (["calibrate", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"], ["required: --env"], {}),
    (["calibrate", "--env", "scaling-env", "--base-url", "http://127.0.0.1:1/v1"], ["required: --model"], {}),
    (["calibrate", "--env", "chess-env", *CALIBRATE], ["argument --env", "invalid choice"], {}),
    (["calibrate", "--env", "scaling-env", "--model", "m", "--base-url", "ftp://h/v1"],
     ["argument --base-url", "http:// or https://"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--api-key-var", UNSET],
     ["argument --api-key-var", f"{UNSET} is not set"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--levels", "0-3"],
     ["argument --levels", "levels from 1 to 5"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--tasks-per-cell", "0"],
     ["argument --tasks-per-cell", "positive integer"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--rollouts", "two"],
     ["argument --rollouts", "positive integer", "'two'"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--seed", "-1"],
     ["argument --seed", "non-negative integer"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--out", "{file}"],
     ["argument --out", "exists and is not a directory"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE, "--families", "nope"],
     ["argument --families", "unknown family 'nope' of the scaling domain"], {}),
    (["calibrate", "--env", "scaling-env", *CALIBRATE], ["vf-eval is not on PATH"], {"PATH": "/nonexistent"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("cli")
    (tmp / "file.txt").write_text("a file\n")
    (tmp / "dir").mkdir()
    (tmp / "binary.bin").write_bytes(b"\xff\xfe\x00canary")
    (tmp / "blocked").mkdir()
    (tmp / "blocked" / "scaling").write_text("a file where the build wants a directory\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield {"tmp": str(tmp), "file": str(tmp / "file.txt"), "dir": str(tmp / "dir"),
               "binary": str(tmp / "binary.bin"), "blocked": str(tmp / "blocked"),
               "busy": str(busy.getsockname()[1])}


@pytest.fixture(scope="module")
def answers(places: dict[str, str]) -> list[subprocess.CompletedProcess[str]]:
    """Every row of BAD run once, a few at a time (each is a fresh interpreter start)."""
    env = {k: v for k, v in os.environ.items() if k != UNSET}

    def run(row: tuple) -> subprocess.CompletedProcess[str]:
        arguments, _, environment = row
        argv = [argument.format(**places) for argument in arguments]
        return subprocess.run([sys.executable, "-m", "exactgrade", *argv], capture_output=True, text=True,
                              timeout=300, cwd=places["tmp"], env={**env, **environment})

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(run, BAD))


@pytest.mark.parametrize("row", range(len(BAD)), ids=[" ".join(row[0]) or "-" for row in BAD])
def test_a_bad_argument_gets_one_clear_line(places, answers, row) -> None:
    done, words = answers[row], [word.format(**places) for word in BAD[row][1]]
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert all(word in lines[0] for word in words), (words, lines[0])
    assert lines[0].startswith("python -m exactgrade"), lines[0]


def test_every_command_is_in_the_table() -> None:
    assert {row[0][0] for row in BAD if row[0]} >= set(COMMANDS)


def test_the_path_checks_leave_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "new" / "out"
    assert cli_args.writable_dir(str(target)) == target
    assert cli_args.writable_file(str(tmp_path / "log.jsonl")) == tmp_path / "log.jsonl"
    (tmp_path / "kept.jsonl").write_text("one line\n")
    assert cli_args.writable_file(str(tmp_path / "kept.jsonl")) == tmp_path / "kept.jsonl"
    assert list(tmp_path.iterdir()) == [tmp_path / "kept.jsonl"]
    assert (tmp_path / "kept.jsonl").read_text() == "one line\n"


# ---------------------------------------------------------------- the validators themselves

GOOD = [
    (cli_args.positive_int, "3", 3),
    (cli_args.non_negative_int, "0", 0),
    (cli_args.non_negative_int, "12345", 12345),
    (cli_args.positive_seconds, "0.5", 0.5),
    (cli_args.port, "0", 0),
    (cli_args.non_negative_float, "0", 0.0),
    (cli_args.non_negative_float, "0.7", 0.7),
    (cli_args.port, "65535", 65535),
    (cli_args.levels_range, "1-5", (1, 2, 3, 4, 5)),
    (cli_args.levels_range, "3", (3,)),
    (cli_args.levels_range, "2-2", (2,)),
    (cli_args.levels_range, "1,5", (1, 5)),
    (cli_args.levels_range, "5,1-2", (1, 2, 5)),
    (cli_args.http_url, "https://api.example.com/v1", "https://api.example.com/v1"),
    (cli_args.non_empty, "gpt", "gpt"),
]

REFUSED = [
    (cli_args.positive_int, "0", "1 or more"),
    (cli_args.non_negative_int, "-1", "0 or more"),
    (cli_args.non_negative_int, "seed", "non-negative integer"),
    (cli_args.positive_seconds, "-inf", "finite"),
    (cli_args.port, "65536", "0 to 65535"),
    (cli_args.non_negative_float, "-0.1", "0 or more"),
    (cli_args.non_negative_float, "nan", "finite"),
    (cli_args.non_negative_float, "warm", "must be a number"),
    (cli_args.levels_range, "0-5", "levels from 1 to 5"),
    (cli_args.levels_range, "1-6", "levels from 1 to 5"),
    (cli_args.levels_range, "4-2", "levels from 1 to 5"),
    (cli_args.levels_range, "1,,3", "levels from 1 to 5"),
    (cli_args.levels_range, "1,6", "levels from 1 to 5"),
    (cli_args.levels_range, "", "levels from 1 to 5"),
    (cli_args.http_url, "http://", "http:// or https://"),
    (cli_args.non_empty, "", "must not be empty"),
]


@pytest.mark.parametrize(("check", "text", "value"), GOOD)
def test_validators_accept(check, text, value) -> None:
    result = check(text)
    assert result == value and type(result) is type(value)


@pytest.mark.parametrize(("check", "text", "message"), REFUSED)
def test_validators_refuse_with_a_value_error_naming_the_rule(check, text, message) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        check(text)
    assert type(caught.value) is cli_args.ArgumentValueError


def test_ctrl_c_ends_the_demo_with_one_line_and_nothing_left_running(tmp_path: Path) -> None:
    """Ctrl-C in a terminal reaches the whole foreground process group: the demo, its policy
    server and vf-eval. The demo says so in one line, exits 130, and leaves no process behind."""
    def terminal_defaults() -> None:  # a test runner may ignore SIGINT; a terminal does not
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    command = [sys.executable, "-m", "exactgrade", "demo", "--envs", "scaling-env", "--limit", "1",
               "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=terminal_defaults)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # the policy server is up: the demo is inside its run
    assert first.startswith("policy server (reference"), first
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "python -m exactgrade demo: interrupted", err
    deadline = time.monotonic() + HANG_GUARD  # children still exiting are reaped by init
    while time.monotonic() < deadline and _alive_in_group(proc.pid):
        time.sleep(0.2)
    assert not _alive_in_group(proc.pid)


def _alive_in_group(pgid: int) -> list[str]:
    """Processes (zombies excluded) still in process group `pgid`."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(entry.name)
    return alive
