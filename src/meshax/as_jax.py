"""Run unchanged JAX code on meshax: `import jax` (and every `jax.X`) is answered by meshax.

Importing this module installs the alias in the current process (do it before anything imports jax):

    import meshax.as_jax  # noqa: F401
    import jax            # meshax

As a program, it runs a script, a module or a command under the alias, like `python` itself does:

    python -m meshax.as_jax train.py [args...]
    python -m meshax.as_jax -m package.module [args...]
    python -m meshax.as_jax -c "import jax; print(jax.devices())"

This works under any launcher (`mpiexec -n 4 python -m meshax.as_jax train.py`, `srun python -m
meshax.as_jax train.py`); `meshax launch --as-jax -n 4 train.py` does the same for local jobs. Run as a program,
it also carries the alias into every Python process the program starts (pytest's `-n` workers, multiprocessing's
spawned workers): MESHAX_AS_JAX=1 and a sitecustomize on PYTHONPATH that installs it there.
"""
from __future__ import annotations

import os
import runpy
import sys

from meshax._src.compat.jax_alias import JAX_API_VERSION, JaxModuleNotImplemented, install, installed

__all__ = ["JAX_API_VERSION", "JaxModuleNotImplemented", "install", "installed", "main"]

install()

_USAGE = "usage: python -m meshax.as_jax (script.py | -m module | -c command) [args...]"


def main(argv: list[str] | None = None) -> int:
    """Run `argv` (a script path, `-m module` or `-c command`, then its arguments) as `__main__`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _carry_to_child_processes()
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            print(f"meshax.as_jax: argument {argv[0]} needs a value\n{_USAGE}", file=sys.stderr)
            return 2
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c", *argv[2:]]
            sys.path.insert(0, "")
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        return 0
    script = argv[0]
    if not os.path.exists(script):
        print(f"meshax.as_jax: can't open file {script!r}: no such file\n{_USAGE}", file=sys.stderr)
        return 2
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script.py` sets it
    runpy.run_path(script, run_name="__main__")
    return 0


def _carry_to_child_processes() -> None:
    """Python processes started from here install the alias at start-up too (alias_site/sitecustomize.py)."""
    site = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_src", "compat", "alias_site")
    os.environ["MESHAX_AS_JAX"] = "1"
    path = os.environ.get("PYTHONPATH")
    if not path or path.split(os.pathsep)[0] != site:
        os.environ["PYTHONPATH"] = site + (os.pathsep + path if path else "")


if __name__ == "__main__":
    sys.exit(main())
