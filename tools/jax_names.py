"""Regenerate src/meshax/_src/compat/jax_names.py: the public names of JAX's modules, read from `dir()` of the
installed JAX (run with a Python that has the JAX release meshax follows, e.g. the test venv):

    .venv/bin/python tools/jax_names.py            (--print: write it to stdout instead)

A public name is one without a leading underscore, less what a module merely imported for its own use: other
modules (`np`, `jnp`), objects of non-JAX libraries (`Any`, `partial`) and the implementation details that JAX's
multihost_utils leaves in its namespace (it has no `__all__`).
"""
from __future__ import annotations

import importlib
import inspect
import pathlib
import sys
import textwrap

import jax

MODULES = [
    "jax", "jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.lax", "jax.lax.linalg", "jax.nn",
    "jax.nn.initializers", "jax.random", "jax.tree_util", "jax.tree", "jax.scipy", "jax.scipy.cluster",
    "jax.scipy.cluster.vq", "jax.scipy.fft", "jax.scipy.integrate", "jax.scipy.interpolate", "jax.scipy.linalg",
    "jax.scipy.ndimage", "jax.scipy.optimize", "jax.scipy.signal", "jax.scipy.sparse", "jax.scipy.sparse.linalg",
    "jax.scipy.spatial", "jax.scipy.spatial.transform", "jax.scipy.special", "jax.scipy.stats", "jax.ops",
    "jax.image", "jax.custom_batching", "jax.custom_derivatives", "jax.debug", "jax.errors", "jax.sharding",
    "jax.ad_checkpoint", "jax.stages", "jax.dtypes", "jax.export", "jax.dlpack", "jax.flatten_util",
    "jax.monitoring", "jax.profiler", "jax.experimental.multihost_utils", "jax.experimental.checkify", "jax.core",
    "jax.extend.core", "jax.interpreters.ad", "jax.interpreters.batching", "jax.interpreters.partial_eval",
]
# multihost_utils' own helpers and primitives, not its API (the documented functions are kept).
MULTIHOST_INTERNALS = {
    "global_array_to_host_local_array_impl", "global_array_to_host_local_array_p", "gtl_abstract_eval",
    "host_local_array_to_global_array_impl", "host_local_array_to_global_array_p", "ltg_abstract_eval",
    "ltg_batcher", "safe_zip",
}
TARGET = pathlib.Path(__file__).resolve().parent.parent / "src/meshax/_src/compat/jax_names.py"


def _is_public(module: str, name: str, value: object) -> bool:
    """Whether `module.name` is part of the module's API rather than one of its own imports."""
    if name.startswith("_") or name == "annotations":
        return False
    if module == "jax.experimental.multihost_utils" and name in MULTIHOST_INTERNALS:
        return False
    if inspect.ismodule(value):
        return value.__name__ == f"{module}.{name}"
    owner = getattr(value, "__module__", None) if (inspect.isclass(value) or inspect.isfunction(value)) else None
    return owner is None or owner.split(".")[0] in ("jax", "jaxlib", "ml_dtypes", "numpy", "builtins")


def public_names() -> dict[str, list[str]]:
    """Module -> its sorted public names, for MODULES and every distribution module of jax.scipy.stats."""
    names = {}
    for module in MODULES:
        mod = importlib.import_module(module)
        names[module] = sorted(n for n in dir(mod) if _is_public(module, n, getattr(mod, n)))
    stats = importlib.import_module("jax.scipy.stats")
    for name in names["jax.scipy.stats"]:
        if inspect.ismodule(getattr(stats, name)):
            sub = getattr(stats, name)
            names[f"jax.scipy.stats.{name}"] = sorted(n for n in dir(sub) if _is_public(sub.__name__, n,
                                                                                       getattr(sub, n)))
    return names


def render(names: dict[str, list[str]]) -> str:
    lines = [f'"""Public names of JAX {jax.__version__} modules (tools/jax_names.py writes this file from dir() of',
             'the installed JAX; JAX is not imported at run time)."""', "from __future__ import annotations", "",
             f"JAX_VERSION = {jax.__version__!r}", "", "JAX_NAMES: dict[str, frozenset[str]] = {"]
    for module in sorted(names):
        if not names[module]:
            lines.append(f"    {module!r}: frozenset(),")
            continue
        body = textwrap.fill(", ".join(repr(n) for n in names[module]) + ",", width=112,
                             initial_indent=" " * 8, subsequent_indent=" " * 8, break_on_hyphens=False)
        lines += [f"    {module!r}: frozenset((", body, "    )),"]
    return "\n".join(lines + ["}", ""])


if __name__ == "__main__":
    text = render(public_names())
    if sys.argv[1:] == ["--print"]:  # what the file would hold (tests/test_api_coverage.py compares)
        sys.stdout.write(text)
    else:
        TARGET.write_text(text)
        print(f"wrote {TARGET} (JAX {jax.__version__})")
