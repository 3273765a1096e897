"""Import rules of cep_core, read from the source with ``ast`` (nothing is imported):

(a) no import cycle among cep_core modules, counting imports inside functions too (only
    ``if TYPE_CHECKING:`` blocks are ignored: they never run);
(b) no private name imported across modules: ``from <cep_core module> import _name``.

A module uses another through its public interface; what several modules share is public.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cep_core"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run (skipping ``if TYPE_CHECKING:`` bodies)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom reads from."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _base(module, path, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                           for a in node.names]
            graph[module] |= {t for t in targets if t in MODULES and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_rules_see_the_whole_package() -> None:
    graph = _edges()
    assert len(MODULES) >= 30
    assert "cep_core.language.parser" in graph["cep_core.api"]
    # the package's public names are imported lazily (PEP 562), so the package itself has
    # no import edge: importing the parser must not load the engines
    assert graph["cep_core"] == set()
    # a function-local import counts: api imports the uncertain evaluator inside methods
    assert "cep_core.uncertain.evaluation" in graph["cep_core.api"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_inside_cep_core() -> None:
    assert _cycles(_edges()) == []


def test_no_private_name_imported_across_modules() -> None:
    offenders = []
    for module, path in MODULES.items():
        for node in _imports(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _base(module, path, node)
            if not (base == "cep_core" or base.startswith("cep_core.")) or base == module:
                continue
            offenders += [f"{module}: from {base} import {a.name}" for a in node.names
                          if a.name.startswith("_") and a.name != "__future__"]
    assert offenders == []


def test_the_parser_loads_without_the_engines() -> None:
    """``lakecep validate`` and rule hashes parse queries; they must not pay for pandas and
    the engines at start-up (cep_core's names are imported on first use)."""
    import subprocess
    import sys

    code = ("import sys, cep_core, cep_core.language.parser\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'cep_core.api') if m in sys.modules))\n"
            "cep_core.match_recognize\n"
            "print('cep_core.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.split("\n")[:2] == ["[]", "True"]
