"""SciPy's API on meshax arrays (as jax.scipy): special functions, statistics, linear algebra, signal processing,
FFTs, optimisation, interpolation, integration, image coordinates, clustering, sparse solvers and rotations."""
from __future__ import annotations

import importlib
from typing import Any

from meshax.scipy import linalg, special, stats

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]


def __getattr__(name: str) -> Any:
    """The other submodules load on first use (as `jax.scipy.signal` after `import jax`)."""
    if name in __all__:
        return importlib.import_module(f"meshax.scipy.{name}")
    raise AttributeError(f"module 'meshax.scipy' has no attribute {name!r}")
