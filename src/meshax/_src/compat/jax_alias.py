"""The `jax` alias: an import hook that answers `import jax` and every `jax.X` with meshax's modules.

`install()` puts `JaxAliasFinder` first on `sys.meta_path` of this process only. `jax` itself is a small
module object that forwards attribute access to `meshax` but reports the JAX API level meshax follows in
`__version__` / `__version_info__`; `jax.X` is the very module object `meshax.X` (so `jax.numpy is
meshax.numpy`). The few private `jax._src.X` modules that popular libraries import are answered by
`meshax._src.compat.jax_private.X`, and `jax.version` by a module of JAX's version. A module meshax lacks fails with
`JaxModuleNotImplemented`, a ModuleNotFoundError, so libraries' `try: import ...` probes keep working.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Sequence

JAX_API_VERSION = "0.12.0.1"  # the JAX release whose API meshax follows
JAX_API_VERSION_INFO = (0, 12, 0, 1)

_PRIVATE_PREFIX = "jax._src"
_REDIRECTS = {"jax.version": "meshax._src.compat.jax_private.version"}  # JAX modules with no meshax counterpart


class JaxModuleNotImplemented(ModuleNotFoundError):
    """A `jax.X` module that meshax does not provide."""


def meshax_name(jax_name: str) -> str:
    """The meshax module answering `jax_name` (jax.numpy -> meshax.numpy, jax._src.X -> meshax._src.compat.jax_private.X)."""
    if jax_name in _REDIRECTS:
        return _REDIRECTS[jax_name]
    if jax_name == _PRIVATE_PREFIX:
        return "meshax._src.compat.jax_private"
    if jax_name.startswith(_PRIVATE_PREFIX + "."):
        return "meshax._src.compat.jax_private" + jax_name[len(_PRIVATE_PREFIX):]
    return "meshax" + jax_name[len("jax"):]


class _JaxModule(types.ModuleType):
    """`jax`: meshax's top-level names, with JAX's version."""

    def __getattr__(self, name: str) -> Any:
        import meshax

        try:
            return getattr(meshax, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            try:  # a submodule meshax's __init__ does not list (jax.scipy, jax.extend, ...)
                return importlib.import_module(f"jax.{name}")
            except JaxModuleNotImplemented:
                pass
            raise

    def __dir__(self) -> list[str]:
        import meshax

        return sorted({*dir(meshax), *self.__dict__})


class _AliasLoader(importlib.abc.Loader):
    """Loads `jax.X` as the already-importable module `meshax.X` (the same object)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == "jax":
            module = _JaxModule("jax", "meshax, answering `import jax` (python -m meshax.as_jax)")
            module.__version__ = JAX_API_VERSION
            module.__version_info__ = JAX_API_VERSION_INFO
            module.__path__ = []
            return module
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__  # the import system overwrites it with the alias's spec
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run (the meshax module is already initialised); it keeps its own `__spec__`."""
        if module.__name__ != "jax":
            module.__spec__ = self._own_spec


class JaxAliasFinder(importlib.abc.MetaPathFinder):
    """Finds `jax` and `jax.X` as meshax modules (and refuses, clearly, what meshax lacks)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "jax" and not fullname.startswith("jax."):
            return None
        if fullname == "jax":
            return importlib.machinery.ModuleSpec("jax", _AliasLoader("meshax"), is_package=True)
        name = meshax_name(fullname)
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise JaxModuleNotImplemented(f"{fullname} is not implemented in meshax yet (`import jax` is answered "
                                          "by meshax in this process)", name=fullname)
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name),
                                              is_package=found.submodule_search_locations is not None)


def install() -> None:
    """Make `import jax` (and every `jax.X`) resolve to meshax in this process; a no-op when already done."""
    if any(isinstance(f, JaxAliasFinder) for f in sys.meta_path):
        return
    loaded = sorted(n for n in sys.modules if n == "jax" or n.startswith("jax."))
    if loaded and not isinstance(sys.modules.get("jax"), _JaxModule):
        raise RuntimeError(
            f"the real jax is already imported in this process ({', '.join(loaded[:3])}...), so `import jax` can no "
            "longer be answered by meshax; install the alias first: run the program with `python -m meshax.as_jax "
            "script.py` or put `import meshax.as_jax` before any `import jax`."
        )
    sys.meta_path.insert(0, JaxAliasFinder())


def installed() -> bool:
    """Whether `import jax` is answered by meshax in this process."""
    return any(isinstance(f, JaxAliasFinder) for f in sys.meta_path)
