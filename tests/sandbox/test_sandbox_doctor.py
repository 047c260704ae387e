"""`python -m exactgrade doctor` reports the backend in use and its guarantees honestly."""

from __future__ import annotations

import subprocess
import sys

from exactgrade.sandbox import backends


def _expected_backend() -> str | None:
    found = backends.probe()
    return next((b for b in ("namespaces", "landlock") if found.unavailable(b) is None), None)


def test_doctor_reports_the_backend_and_passes_the_live_check():
    done = subprocess.run([sys.executable, "-m", "exactgrade", "doctor", "--check"], capture_output=True,
                          text=True, timeout=300)
    expected = _expected_backend()
    if expected is None:
        assert done.returncode == 1
        assert "IN USE: none. Sandbox() refuses to run untrusted code here unless unsafe=True" in done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"IN USE: {expected}" in done.stdout
    for probe in ("tcp blocked", "dns blocked", "host_file blocked", "import_project blocked",
                  "signal_host blocked", "vsock blocked", "netlink blocked", "installed_copy blocked"):
        assert probe in done.stdout
    assert "installed copies of the project found on this host:" in done.stdout
    assert "visible to a sandbox: none" in done.stdout
    assert "live check: passed" in done.stdout
