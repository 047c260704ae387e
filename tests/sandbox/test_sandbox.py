"""The sandbox contract: persistence, shared work dir, output cap, result read-back,
profiles, backend selection. Runs against the real default backend; attacks live in
test_sandbox_attacks.py, cleanup and concurrency in test_sandbox_cleanup.py."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import sympy

from exactgrade.sandbox import Limits, NoResult, Sandbox, SandboxDied, SandboxUnavailable, backends
from exactgrade.values import TensorValue
from exactgrade.wire import WireError


def _default_backend() -> str:
    found = backends.probe()
    for backend in ("namespaces", "landlock"):
        if found.unavailable(backend) is None:
            return backend
    pytest.skip(f"no isolating backend here (namespaces: {found.namespaces}; landlock: {found.landlock})")


@pytest.fixture
def sandbox():
    _default_backend()
    with Sandbox(inputs={"x": Fraction(3, 2), "n": 7}) as sb:
        yield sb


def test_issue_example(sandbox):
    out = sandbox.execute_code("result = x * 2\nprint(result)")
    assert out == "3\n"
    assert "hello" in sandbox.bash("echo hello && python3 -c 'print(1)'")
    value = sandbox.result()
    assert type(value) is Fraction and value == 3


def test_variables_persist_across_calls(sandbox):
    sandbox.execute_code("acc = [n]")
    sandbox.execute_code("acc.append(n * 2)\nimport math as m")
    assert sandbox.execute_code("print(acc, m.factorial(4))") == "[7, 14] 24\n"


def test_execute_code_and_bash_share_the_work_dir(sandbox):
    sandbox.execute_code("open('from_python.txt', 'w').write('py')")
    assert sandbox.bash("cat from_python.txt; echo sh > from_bash.txt") == "py"
    assert sandbox.execute_code("print(open('from_bash.txt').read().strip())") == "sh\n"


def test_bash_python3_has_sympy_but_not_the_project(sandbox):
    out = sandbox.bash("python3 -c 'import sympy; print(sympy.Rational(1, 3))'\n"
                       "python3 -c 'import exactgrade'")
    assert out.startswith("1/3\n")
    assert "ModuleNotFoundError: No module named 'exactgrade'" in out
    assert "[exit status 1]" in out


def test_exceptions_are_output_not_host_errors(sandbox):
    out = sandbox.execute_code("1/0")
    assert "ZeroDivisionError: division by zero" in out
    assert "SystemExit: 3" in sandbox.execute_code("import sys; sys.exit(3)")
    assert sandbox.execute_code("print('still alive')") == "still alive\n"


def test_output_is_capped_with_a_visible_marker():
    _default_backend()
    with Sandbox(limits=Limits(max_output=1000)) as sb:
        out = sb.execute_code("print('y' * 5000)")
        assert out.startswith("y" * 1000)
        assert "[output truncated: 5001 bytes in total, showing the first 1000]" in out
        assert len(out) < 1100


@pytest.mark.parametrize(("code", "expected"), [
    ("result = 2**70", 2**70),
    ("result = 0.1", 0.1),
    ("result = float('nan')", math.nan),
    ("result = [1, 'a', None, {'k': True}]", [1, "a", None, {"k": True}]),
    ("import sympy\nresult = sympy.sqrt(2) / 3", sympy.sqrt(2) / 3),
    ("from fractions import Fraction\nresult = Fraction(-7, 4)", Fraction(-7, 4)),
])
def test_result_round_trips_through_the_wire(sandbox, code, expected):
    sandbox.execute_code(code)
    value = sandbox.result()
    assert type(value) is type(expected)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(value)
    else:
        assert value == expected


@pytest.mark.parametrize(("method", "text", "expected"), [
    ("execute_code", "x = 1\0", "SyntaxError: source code string cannot contain null bytes"),
    ("bash", "echo a\0b", "bash: ValueError: embedded null byte"),
    ("execute_code", "#" * (2 << 20), "[refused: the code has 2097152 bytes, over the limit of 1048576]"),
    ("bash", "#" * (2 << 20), "[refused: the cmd has 2097152 bytes, over the limit of 1048576]"),
])
def test_malformed_model_input_is_output_not_a_host_error(sandbox, method, text, expected):
    assert expected in getattr(sandbox, method)(text)
    assert sandbox.execute_code("print('alive')") == "alive\n"


def test_sympy_inputs_arrive_as_sympy_values():
    _default_backend()
    with Sandbox(inputs={"r": sympy.sqrt(2) + sympy.Rational(1, 3), "xs": [Fraction(1, 2), 3]}) as sb:
        out = sb.execute_code("print(type(r).__name__, [type(v).__name__ for v in xs])\nresult = r**2")
        value = sb.result()
    assert out == "Add ['Fraction', 'int']\n"
    assert sympy.simplify(value - (sympy.sqrt(2) + sympy.Rational(1, 3)) ** 2) == 0


def test_no_result_raises_noresult(sandbox):
    sandbox.execute_code("y = 1")
    with pytest.raises(NoResult):
        sandbox.result()


def test_inputs_must_be_wire_values():
    _default_backend()
    with pytest.raises(WireError):
        Sandbox(inputs={"f": object()})


def test_closed_sandbox_raises_sandboxdied(sandbox):
    sandbox.close()
    with pytest.raises(SandboxDied, match="closed"):
        sandbox.execute_code("print(1)")
    with pytest.raises(SandboxDied, match="closed"):
        sandbox.result()


def test_torch_profile_gets_tensors_and_returns_tensor_values():
    _default_backend()
    inputs = {"w": TensorValue("float32", (2, 2), (1.0, 2.0, 3.0, 4.0)), "k": 3}
    with Sandbox(inputs=inputs, profile="torch") as sb:
        out = sb.execute_code("import torch\nprint(type(w).__name__, w.dtype, torch.get_num_threads())\n"
                              "result = (w @ w) * k")
        assert out == "Tensor torch.float32 1\n"
        value = sb.result()
    assert value == TensorValue("float32", (2, 2), (21.0, 30.0, 45.0, 66.0))


@pytest.mark.parametrize(("profile", "allowed", "refused"), [
    ("python", ["sympy", "mpmath"], ["torch", "numpy", "datasets", "verifiers", "exactgrade", "math_verify"]),
    ("torch", ["sympy", "torch", "numpy"], ["datasets", "verifiers", "exactgrade", "pandas", "math_verify"]),
])
def test_only_the_profile_packages_are_importable(profile, allowed, refused):
    _default_backend()
    code = ("import importlib\nfor name in names:\n    try:\n        importlib.import_module(name)\n"
            "        print(name, 'ok')\n    except ImportError:\n        print(name, 'missing')\n")
    with Sandbox(inputs={"names": allowed + refused}, profile=profile) as sb:
        out = sb.execute_code(code)
    expected = [f"{name} ok" for name in allowed] + [f"{name} missing" for name in refused]
    assert out.splitlines() == expected


def test_kernel_surface_is_reduced(sandbox):
    code = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print('unshare', libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))\n"
            "print('ptrace', libc.ptrace(0, 0, 0, 0), os.strerror(ctypes.get_errno()))\n"
            "try:\n    os.sched_setaffinity(0, {0})\n"
            "except OSError as e:\n    print('setaffinity', e.strerror)\n"
            "print(open('/proc/self/status').read().split('NoNewPrivs:')[1].split()[0])\n")
    out = sandbox.execute_code(code)
    assert out == ("unshare -1 Operation not permitted\nptrace -1 Operation not permitted\n"
                   "setaffinity Operation not permitted\n1\n")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"profile": "numpy"}, "profile='numpy' must be one of"),
    ({"backend": "docker"}, "backend='docker' must be 'auto' or one of"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sandbox(**kwargs)


@pytest.mark.parametrize(("field", "value"), [("call_timeout", 0), ("memory_bytes", -1), ("max_output", "1")])
def test_bad_limits_are_clear_errors(field, value):
    with pytest.raises(ValueError, match=f"Limits.{field}="):
        Limits(**{field: value})


def test_no_isolating_backend_refuses_without_unsafe():
    nothing = backends.Probe(namespaces="no bwrap", landlock="no landlock", cgroups=None)
    with pytest.raises(SandboxUnavailable, match="Refusing to run untrusted code; pass unsafe=True"):
        backends.resolve("auto", unsafe=False, found=nothing)
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        assert backends.resolve("auto", unsafe=True, found=nothing) == "unsafe"


def test_explicit_unsafe_backend_needs_the_unsafe_flag():
    with pytest.raises(SandboxUnavailable, match="also needs unsafe=True"):
        Sandbox(backend="unsafe")


def test_unsafe_backend_runs_but_warns_loudly(capfd):
    with pytest.warns(RuntimeWarning, match="WITHOUT isolation"):
        sb = Sandbox(inputs={"a": 2}, backend="unsafe", unsafe=True)
    with sb:
        sb.execute_code("result = a + 1")
        assert sb.result() == 3
    assert "WARNING: exactgrade.sandbox: running untrusted code WITHOUT isolation" in capfd.readouterr().err


def test_unavailable_backend_names_the_reason():
    found = backends.Probe(namespaces="bubblewrap is not installed", landlock=None, cgroups=None)
    with pytest.raises(SandboxUnavailable, match="backend 'namespaces' is unavailable here: bubblewrap"):
        backends.resolve("namespaces", unsafe=False, found=found)
    assert backends.resolve("auto", unsafe=False, found=found) == "landlock"
