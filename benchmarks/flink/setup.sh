#!/usr/bin/env bash
# Create a separate virtualenv with Apache Flink (PyFlink) for the peer benchmark.
# Flink 2.x runs on the installed JDK 17. Nothing here touches the project venv.
set -euo pipefail
VENV="${FLINK_VENV:-$HOME/.cache/lakecep/flink-venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install "apache-flink>=2.0,<3"
"$VENV/bin/python" -c "import pyflink, sys; print('pyflink', pyflink.__file__, sys.version)"
java -version
