"""Shared fixtures for the unit tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exactgrade.sandbox import backends
from exactgrade.strategies import typed_equal as _typed_equal


@pytest.fixture(scope="session")
def typed_equal() -> Callable[[Any, Any], bool]:
    """exactgrade.strategies.typed_equal: same types and values all the way down (2 != 2.0)."""
    return _typed_equal


@pytest.fixture(params=("namespaces", "landlock"))
def backend(request: pytest.FixtureRequest) -> str:
    """Each isolating sandbox backend in turn; skipped where this machine cannot run it."""
    reason = backends.probe().unavailable(request.param)
    if reason is not None:
        pytest.skip(f"{request.param} backend unavailable on this machine: {reason}")
    return request.param
