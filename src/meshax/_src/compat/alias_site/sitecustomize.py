"""Run at the start of every Python process that `python -m meshax.as_jax` starts, directly or not (pytest-xdist's
workers, multiprocessing's spawned workers, subprocesses): installs the alias, so `import jax` is meshax there too
(an interpreter without meshax starts as usual); then runs the next sitecustomize on the path, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("MESHAX_AS_JAX") == "1":
    try:
        import meshax.as_jax  # noqa: F401 - installs the alias
    except ImportError:
        pass


def _run_the_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_the_next_sitecustomize()
