"""The docstring examples of every cep_core module run as doctests (the public API's
examples stay true)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import cep_core

MODULES = sorted(m.name for m in pkgutil.walk_packages(cep_core.__path__, "cep_core."))


def test_every_module_is_found() -> None:
    assert len(MODULES) >= 30
    assert "cep_core.runtime.time_axis" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, name
