"""Shared fixtures. One Spark session per test session (``spark``), lake under a temp dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def lake_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private LAKECEP_HOME for the whole test session."""
    home = tmp_path_factory.mktemp("lakecep_home")
    os.environ["LAKECEP_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def settings(lake_home: Path):  # noqa: ANN201 - lakecep.config.Settings
    from lakecep.config import load_settings

    return load_settings()


@pytest.fixture(scope="session")
def spark(settings) -> Iterator[object]:  # noqa: ANN001
    """The test session's only SparkSession (local[2], Delta enabled)."""
    from jobs.spark import get_spark

    session = get_spark("lakecep-tests", settings)
    yield session
    session.stop()
