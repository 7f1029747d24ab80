"""The project's import graph, read from the source (top-level and function-level imports).

The layer contract and the cycle check read the same graph, so what one reports the other
sees too. Every `import` statement counts, wherever it sits in a module: a lazy import still
ties the importer to what it imports.
"""
from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"tests", "bench", "mutants", "scenarios", "dashboard", "docs", "prompts", "build", "dist"}


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


@lru_cache(maxsize=1)
def project_modules() -> dict[str, Path]:
    """Every module of the application (tests, benchmarks and tooling left out)."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in SKIP or any(p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        modules[_module_name(path)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module a dotted import name lands in (`a.b.C` → `a.b`), if any."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@lru_cache(maxsize=1)
def import_edges() -> tuple[Edge, ...]:
    """Each import of one project module by another, with the line it is on."""
    modules = project_modules()
    edges = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                names = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = _owner(name, modules)
                if target and target != module:
                    edges.append(Edge(module, target, node.lineno))
    return tuple(edges)


@lru_cache(maxsize=1)
def layers() -> tuple[tuple[str, ...], ...]:
    """The declared layer order, top first (`[tool.layers]` in pyproject.toml)."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["layers"]["order"]
    return tuple(tuple(part.strip() for part in row.split("|")) for row in spec)


def layer_of(module: str) -> int | None:
    """The index of the layer a module belongs to (0 is the top); the longest name wins."""
    best: tuple[int, int] | None = None
    for index, row in enumerate(layers()):
        for prefix in row:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return best[0] if best else None


def cycles() -> list[list[str]]:
    """Module cycles: strongly connected components of more than one module."""
    graph: dict[str, set[str]] = {m: set() for m in project_modules()}
    for edge in import_edges():
        graph[edge.importer].add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def upward_imports() -> list[Edge]:
    """Imports from a lower layer into a higher one (or into a sibling marked independent)."""
    bad = []
    for edge in import_edges():
        here, there = layer_of(edge.importer), layer_of(edge.imported)
        if here is not None and there is not None and there < here:
            bad.append(edge)
    return bad


if __name__ == "__main__":
    for edge in upward_imports():
        print(f"up: {edge.importer} -> {edge.imported}  ({edge.importer.replace('.', '/')}.py:{edge.line})")
    for component in cycles():
        print("cycle:", " -> ".join(component))
    unplaced = sorted({m for m in project_modules() if layer_of(m) is None})
    print("unplaced:", unplaced)
