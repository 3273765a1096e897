"""The README's engine example runs and prints what the README says it prints."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_engine_example_output() -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert block, "README has no python example"
    code = block.group(1)
    expected = "\n".join(line[2:] for line in code.splitlines() if line.startswith("# "))
    namespace: dict[str, object] = {}
    statements, last = code.rsplit("cep_core.match_recognize(", 1)
    exec(statements, namespace)  # noqa: S102 - the README's own example
    result = eval("cep_core.match_recognize(" + last.split("\n#")[0], namespace)  # noqa: S307
    assert result.to_string() == expected
