"""Helpers for the cep_core unit tests (plain pandas data, no Spark)."""

from __future__ import annotations

import sys
from pathlib import Path

# The editable install may have registered ``cep_core`` as a namespace package (it was
# empty when the environment was built); make sure the real package from this checkout
# is the one imported. Re-running ``pip install -e .`` makes this a no-op.
_REPO = str(Path(__file__).resolve().parents[3])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
if "cep_core" in sys.modules and getattr(sys.modules["cep_core"], "__file__", None) is None:
    del sys.modules["cep_core"]
