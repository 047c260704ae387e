"""The one version of the release: the core and the six environment packages carry it together.

pyproject.toml reads it from here; each environments/<id>/pyproject.toml repeats it (as
`version` and in its `exactgrade==` pin) because `prime env push` builds that folder alone.
`python tools/set_version.py X.Y.Z` rewrites all seven; tests/release/test_release.py fails when any
of them disagrees with this file.
"""

__version__ = "0.3.0"
