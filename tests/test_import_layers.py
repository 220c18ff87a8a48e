"""The source tree's import graph: no cycles (imports inside functions count: they are the same dependency, hidden),
and no layer of `src/meshax/_src` importing a higher one (docs/architecture.md draws the layers)."""
from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

# The layers of meshax/_src, lowest first; a module may import its own layer and those below it.
LAYERS = ["config", "profiler", "tree", "runtime", "core", "sharding", "arrays", "interpreters", "primitives", "numpy",
          "lax", "random", "transforms", "nn", "scipy", "export", "checkpoint", "compat", "launch"]
# jnp.linalg and jnp.fft are built on lax.linalg and lax.fft: they sit just above lax, though jnp's namespace holds them.
ABOVE_LAX = {"meshax._src.numpy.linalg", "meshax._src.numpy.fft", "meshax._src.numpy.polynomials_linalg",
             "meshax._src.numpy.bessel"}
MAX_LINES = 600


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Dotted module name -> (file, is it a package's __init__), for every module under src/meshax."""
    found = {}
    for path in (SRC / "meshax").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imported(name: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict) -> set[str]:
    """The meshax modules an import statement needs: `from P import m` needs the module P.m when there is one, else
    P (whose attribute it reads); `import a.b` needs a.b."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            package = name.split(".") if is_package else name.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            prefix = ".".join(package + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        wanted = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names]
    found = set()
    for target in wanted:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = set().union(*[_imported(name, is_package, node, modules) for node in ast.walk(tree)
                                    if isinstance(node, (ast.Import, ast.ImportFrom))])
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
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
                    components.append(sorted(component))
    return components


def _layer(name: str) -> float | None:
    if not name.startswith("meshax._src."):
        return None
    if name in ABOVE_LAX:
        return LAYERS.index("lax") + 0.5
    return LAYERS.index(name.split(".")[2])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles (imports inside functions included): {cycles}"


def test_every_src_module_belongs_to_a_layer() -> None:
    strays = [name for name in _graph() if name.startswith("meshax._src.") and name.split(".")[2] not in LAYERS
              and name.split(".")[2] != "__init__"]
    assert not strays, f"modules outside the layers {LAYERS}: {strays}"


def test_no_layer_imports_a_higher_one() -> None:
    upward = [f"{name} -> {target}" for name, targets in _graph().items() for target in sorted(targets)
              if _layer(name) is not None and _layer(target) is not None and _layer(target) > _layer(name)]
    assert not upward, "imports from a lower layer into a higher one:\n" + "\n".join(upward)


def test_the_src_top_level_holds_folders_and_config_only() -> None:
    top = sorted(p.name for p in (SRC / "meshax" / "_src").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "config.py"]


def test_no_module_is_over_the_line_limit() -> None:
    long = {str(path.relative_to(SRC)): lines for path in sorted((SRC / "meshax").rglob("*.py"))
            if (lines := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concept): {long}"
