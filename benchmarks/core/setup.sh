#!/usr/bin/env bash
# Create CORE's own virtualenv (pycer: Python bindings of the CORE complex event recognition
# engine, VLDB 2022) for benchmarks/engine_suite.py and tests/differential/test_vs_core.py.
# pycer ships wheels for CPython 3.13 only; this uses the machine's 3.13 interpreter
# (pyenv's /root/.pyenv/versions/3.13.*, or $PYTHON313). Nothing here touches the project venv.
set -euo pipefail
VENV="${CORE_VENV:-$HOME/.cache/lakecep/core-venv}"
PYCER_VERSION="0.1.6"
PY="${PYTHON313:-}"
if [ -z "$PY" ]; then
  PY="$(ls -d /root/.pyenv/versions/3.13.*/bin/python 2>/dev/null | sort -V | tail -1 || true)"
fi
if [ -z "$PY" ] || [ ! -x "$PY" ]; then
  PY="$(command -v python3.13 || true)"
fi
if [ -z "$PY" ]; then
  echo "no CPython 3.13 found (set PYTHON313); pycer has wheels for 3.13 only" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet "pycer==$PYCER_VERSION"
"$VENV/bin/python" -c "import pycer, sys; print('pycer', pycer.__file__, sys.version)"
