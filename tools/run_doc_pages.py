"""Run the Python cells of JAX's documentation pages under real JAX and under meshax, and compare them cell by cell.

    python tools/run_doc_pages.py DIR_OR_PAGES... [--show-diffs] [--timeout SECONDS] [--devices N] [--json FILE]

Each `.md` page (MyST notebooks: ```{code-cell} blocks, or ```python blocks) runs in fresh processes: once with
JAX, once with `import jax` answered by meshax (the `meshax.as_jax` alias, or a small import shim where that alias
is not installed), and, when some cells differ, once more under meshax with `MESHAX_EXPLICIT_AXES_BY_DEFAULT=1`
(today's JAX `make_mesh` default). A cell's result is what it printed, its last expression's value (as a notebook shows it) and the name of
the exception it raised, if any. Numbers are matched to a relative tolerance; addresses and the module paths in
default object reprs are ignored. Verdicts per cell:

- `same`: meshax gives JAX's result;
- `listed`: it does once README's deliberate differences are accounted for: the seeds' reprs (`PartitionSpec(...)`
  for `P(...)`, meshes printed as the seeds print them, `TFRT_CPU_0` for `cpu:0`), the seeds' Auto default of
  `make_mesh` (the cell matches in the run with Explicit axes by default), jaxprs whose inputs and types agree but
  whose equations are meshax's own, shard_map's out_specs replication error (it names the user's function), or
  cells printing compiler output (`as_text()`, also through a helper an earlier such cell defined) or using offloading remat
  policies;
- `differs`, `fails` (meshax raised, JAX did not), `missing` (the page stopped early): unexplained.

The summary prints the counts per page. Exit status 1 when any cell is unexplained.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$|^```python[^\n]*\n(.*?)^```\s*$", re.S | re.M)
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan")
ADDRESS = re.compile(r" at 0x[0-9a-f]+")
MESH_AXIS_TYPES = re.compile(r"(?<!Abstract)(Mesh\([^()]*?), axis_types=\([^()]*\)\)")  # the seeds' Mesh repr
OBJECT_REPR = re.compile(r"<(?:[A-Za-z_][\w]*\.)+(\w+) object>")  # <jax._src.sharding_impls.set_mesh object at ..>
SEED_MESH = re.compile(r"(?<![\w.])Mesh\(device_ids=array\(")
SEED_DEVICE = re.compile(r"\bTFRT_CPU_(\d+)\b")
VERDICTS = ("same", "listed", "differs", "fails", "missing")
# README's deliberate differences a cell's code shows: its output may differ where it prints compiler output
# (meshax compiles nothing: `as_text()` is the jaxpr), uses an offloading remat policy (CPU has one memory) or
# compares a compiled program's formats (README: no GSPMDSharding, whose inequality to NamedSharding fails JAX's page)
LISTED_CODE = re.compile(r"\.as_text\(|\.compiler_ir\(|\.cost_analysis\(|save_and_offload_only_these_names"
                         r"|offload_dot_with_no_batch_dims|\.output_formats\b|\.input_formats\b")
JAXPR_HEAD = re.compile(r"^\{ lambda [^\n]*?\. let", re.M)  # a printed jaxpr's own inputs (not its inner ones)
# README: shard_map's out_specs replication error names the user's function and the output (JAX: `_rem_singleton`)
REPLICATION_ERROR = re.compile(r"shard_map applied to the function '[^']*' was given out_specs which require "
                               r"replication.*?`jax\.shard_map`\.", re.S)
DEFINED = re.compile(r"^def (\w+)\(", re.M)


def cells_of(page: Path) -> list[str]:
    """The Python cells of a page, without MyST options (`:tags: ...`) and IPython magics/shell lines."""
    cells = []
    for match in CELL.finditer(page.read_text()):
        body = match.group(1) if match.group(1) is not None else match.group(2)
        lines = body.splitlines()
        while lines and (lines[0].startswith(":") or lines[0].startswith("---")):
            lines.pop(0)
        lines = [line for line in lines if not line.lstrip().startswith(("%", "!"))]
        code = "\n".join(lines).strip("\n")
        if code.strip():
            cells.append(code)
    return cells


# ---- running one page (in a child process) ---------------------------------------------------------------------


def _alias_jax_to_meshax() -> None:
    """`import jax` answered by meshax: its own alias where installed, else a minimal import shim."""
    try:
        import meshax.as_jax  # noqa: F401  (installs the alias)
        return
    except ImportError:
        pass
    import importlib
    import importlib.abc
    import importlib.util

    class _Shim(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name == "jax" or name.startswith("jax."):
                return importlib.util.spec_from_loader(name, self)
            return None

        def create_module(self, spec: Any) -> Any:
            return importlib.import_module("meshax" + spec.name[3:])

        def exec_module(self, module: Any) -> None:
            pass

    sys.meta_path.insert(0, _Shim())


def _run_cell(code: str, namespace: dict[str, Any], filename: str) -> dict[str, Any]:
    """Run one cell as a notebook does (its last expression's value is shown); what it printed and raised."""
    out = io.StringIO()
    error = None
    with contextlib.redirect_stdout(out):
        try:
            tree = ast.parse(code)
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            if last is not None:
                tree.body.pop()
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
                if value is not None:
                    print(repr(value))
        except BaseException as exc:  # noqa: BLE001 - a cell's exception is its result
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = type(exc).__name__
            if os.environ.get("RUN_DOC_PAGES_TRACEBACKS"):
                traceback.print_exc(file=sys.stderr)
    return {"output": out.getvalue(), "error": error}


def run_page(page: str, library: str) -> list[dict[str, Any]]:
    """Every cell of `page` in one namespace, with `jax` being JAX or meshax."""
    if library == "meshax":
        _alias_jax_to_meshax()
    namespace: dict[str, Any] = {"__name__": "__main__"}
    results = []
    for index, code in enumerate(cells_of(Path(page))):
        results.append(_run_cell(code, namespace, f"{page}[cell {index}]"))
    return results


# ---- comparing ---------------------------------------------------------------------------------------------------


def _plain(text: str) -> str:
    """Without what always differs between two libraries: addresses, module paths of default reprs, spacing."""
    text = OBJECT_REPR.sub(r"<\1 object>", ADDRESS.sub("", text))
    return " ".join(text.split())  # NumPy pads columns to the widest number


def _nested_shape(value: Any) -> tuple[int, ...]:
    return (len(value), *_nested_shape(value[0])) if isinstance(value, list) and value else ()


def _seed_mesh_as_jax(text: str) -> str:
    """`Mesh(device_ids=array([[0, 1], [2, 3]]), axis_names=('X', 'Y'))` (the seeds' form) as JAX 0.10 prints it."""
    while (match := SEED_MESH.search(text)) is not None:
        depth, end = 2, match.end()  # inside `Mesh(` and `array(`
        while depth and end < len(text):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        body = text[match.end() - len("array("):end - 1]
        found = re.fullmatch(r"array\((.*)\), axis_names=(\(.*?\))(?:, axis_types=(\(.*\)))?", body, re.S)
        if found is None:
            break
        try:
            shape = _nested_shape(ast.literal_eval(found[1]))
            names = ast.literal_eval(found[2])
        except (ValueError, SyntaxError):
            break
        types = found[3] or "(" + ", ".join(["Auto"] * len(names)) + ("," if len(names) == 1 else "") + ")"
        sizes = ", ".join(f"{name!r}: {size}" for name, size in zip(names, shape))
        text = text[:match.start()] + f"Mesh({sizes}, axis_types={types})" + text[end:]
    return text


def _listed_normalised(text: str) -> str:
    """The seeds' printing (README's deliberate differences) turned into JAX 0.10's."""
    text = REPLICATION_ERROR.sub("<shard_map: an output varies over an axis its out_specs replicate>", text)
    text = SEED_DEVICE.sub(r"cpu:\1", _seed_mesh_as_jax(text))
    text = re.sub(r"\bP\(", "PartitionSpec(", text)
    return MESH_AXIS_TYPES.sub(r"\1)", text)


def _same_text(ours: str, theirs: str, rtol: float, atol: float) -> bool:
    if NUMBER.split(ours) != NUMBER.split(theirs):
        return ours == theirs
    for a, b in zip(NUMBER.findall(ours), NUMBER.findall(theirs)):
        x, y = float(a), float(b)
        if not (x == y or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= atol + rtol * abs(y)
                or abs(x - y) <= _last_place(a, b) * (1 + 1e-9)):
            return False
    return True


def _last_place(a: str, b: str) -> float:
    """One unit of the last decimal both numbers print (without exponents, with as many decimals): values rounded
    for printing (np.round(g, 4)) differ by it where the two results straddle a rounding boundary; 0 otherwise."""
    if "." not in a or "." not in b or "e" in (a + b).lower():
        return 0.0
    decimals = len(a.split(".")[1])
    return 10.0 ** -decimals if decimals == len(b.split(".")[1]) and decimals else 0.0


def same_output(ours: str, theirs: str, rtol: float = 1e-4, atol: float = 1e-6, listed: bool = True) -> bool:
    """Equal texts, numbers compared to a tolerance; with `listed`, also the seeds' reprs counted as JAX's."""
    ours, theirs = _plain(ours), _plain(theirs)
    if _same_text(ours, theirs, rtol, atol):
        return True
    return listed and _same_text(_listed_normalised(ours), _listed_normalised(theirs), rtol, atol)


def _same_jaxpr_types(ours: str, theirs: str) -> bool:
    """Both print jaxprs with the same inputs and types (README: derivative jaxprs hold meshax's own equations)."""
    mine, reference = JAXPR_HEAD.findall(_plain(ours)), JAXPR_HEAD.findall(_plain(theirs))
    return bool(reference) and [_listed_normalised(h) for h in mine] == [_listed_normalised(h) for h in reference]


def _cell_verdict(cell: dict, reference: dict, code: str = "") -> str:
    if cell["error"] and not reference["error"]:
        return "fails"
    if cell["error"] != reference["error"] and not (cell["error"] and reference["error"]):
        return "listed" if LISTED_CODE.search(code) else "differs"  # (JAX raising where meshax does not)
    if same_output(cell["output"], reference["output"], listed=False):
        return "same"
    if same_output(cell["output"], reference["output"]) or LISTED_CODE.search(code) \
            or _same_jaxpr_types(cell["output"], reference["output"]):
        return "listed"
    return "differs"


def compare(ours: list[dict], theirs: list[dict], explicit: list[dict] | None = None,
            cells: list[str] | None = None) -> list[str]:
    """Per cell: 'same', 'listed' (README's deliberate differences: the seeds' reprs, or the cell matches in
    `explicit`, meshax's run with Explicit mesh axes by default; or it prints compiler output, itself or through a
    function an earlier such cell defined), 'differs', 'fails' (meshax raised, JAX did not) or 'missing'."""
    verdicts = []
    compiler_helpers: set[str] = set()
    for index, reference in enumerate(theirs):
        if index >= len(ours):
            verdicts.append("missing")
            continue
        code = cells[index] if cells is not None and index < len(cells) else ""
        if LISTED_CODE.search(code):  # helpers defined here print compiler output wherever they are called
            compiler_helpers.update(DEFINED.findall(code))
        elif any(re.search(rf"\b{name}\(", code) for name in compiler_helpers):
            code += "\n# calls a helper printing compiler output: .as_text("
        verdict = _cell_verdict(ours[index], reference, code)
        if verdict not in ("same", "listed") and explicit is not None and index < len(explicit) \
                and _cell_verdict(explicit[index], reference, code) in ("same", "listed"):
            verdict = "listed"
        verdicts.append(verdict)
    return verdicts


def _run_in_child(page: Path, library: str, timeout: float, devices: int,
                  explicit_by_default: bool = False) -> list[dict[str, Any]]:
    env = dict(os.environ)
    if explicit_by_default:
        env["MESHAX_EXPLICIT_AXES_BY_DEFAULT"] = "1"
    env.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={devices}")
    env.setdefault("MESHAX_NUM_CPU_DEVICES", str(devices))
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONHASHSEED"] = "0"  # sets print in the same order under both libraries
    command = [sys.executable, __file__, "--run-page", str(page), "--library", library]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return []
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    if not lines:
        sys.stderr.write(f"{page} under {library} gave no results (exit {done.returncode}):\n{done.stderr[-2000:]}\n")
        return []
    return json.loads(lines[-1][len("RESULTS "):])


def pages_in(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        found += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="directories of .md pages, or pages")
    parser.add_argument("--show-diffs", action="store_true", help="print both outputs of every cell that differs")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per page and library")
    parser.add_argument("--devices", type=int, default=8, help="CPU devices each run sees")
    parser.add_argument("--json", help="write the per-cell verdicts to this file")
    parser.add_argument("--run-page", help=argparse.SUPPRESS)
    parser.add_argument("--library", choices=("jax", "meshax"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_page:
        results = run_page(args.run_page, args.library)
        sys.stdout.write("\nRESULTS " + json.dumps(results) + "\n")
        return 0
    if not args.paths:
        parser.error("give a directory of .md pages (or pages)")
    report, bad = {}, False
    for page in pages_in(args.paths):
        if not cells_of(page):
            continue  # prose only
        with ThreadPoolExecutor(2) as pool:  # both libraries' runs of the page at once, each its own process
            theirs_run = pool.submit(_run_in_child, page, "jax", args.timeout, args.devices)
            ours, theirs = _run_in_child(page, "meshax", args.timeout, args.devices), theirs_run.result()
        cells = cells_of(page)
        verdicts, explicit = compare(ours, theirs, cells=cells), []
        if any(v not in ("same", "listed") for v in verdicts):  # which of those match with today's default?
            explicit = _run_in_child(page, "meshax", args.timeout, args.devices, explicit_by_default=True)
            verdicts = compare(ours, theirs, explicit, cells)
        report[str(page)] = verdicts
        counts = {kind: verdicts.count(kind) for kind in VERDICTS}
        bad |= counts["same"] + counts["listed"] != len(verdicts)
        print(f"{page}: {len(verdicts)} cells, {counts['same']} same, {counts['listed']} differ for listed reasons, "
              f"{counts['differs']} differ, {counts['fails']} fail under meshax only, {counts['missing']} missing")
        if args.show_diffs:
            for index, verdict in enumerate(verdicts):
                if verdict not in ("same", "listed"):
                    mine = ours[index] if index < len(ours) else {}
                    today = explicit[index] if index < len(explicit) else {}
                    print(f"--- cell {index} ({verdict}):\n{cells[index]}\n--- jax: error={theirs[index]['error']}\n"
                          f"{theirs[index]['output']}--- meshax: error={mine.get('error')}\n{mine.get('output', '')}"
                          f"--- meshax, Explicit axes by default: error={today.get('error')}\n"
                          f"{today.get('output', '')}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
