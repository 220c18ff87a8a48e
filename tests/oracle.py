"""Comparing meshax with JAX, the test oracle: the same program written once for both libraries."""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jjnp
import numpy as np

import meshax
import meshax.numpy as mnp


def assert_same_tree(ours: Any, theirs: Any, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    """The same tree structure, the same shapes, and values equal to the tolerances."""
    ours_leaves, ours_tree = jax.tree_util.tree_flatten(ours)
    theirs_leaves, theirs_tree = jax.tree_util.tree_flatten(theirs)
    assert ours_tree == theirs_tree
    for a, b in zip(ours_leaves, theirs_leaves):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def check_against_jax(case: Callable[[Any, Any], Any], jitted: bool, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    """`case(library, numpy_module)` run with meshax and with JAX (both jitted, or both eager), compared."""
    if jitted:
        ours, theirs = meshax.jit(lambda: case(meshax, mnp))(), jax.jit(lambda: case(jax, jjnp))()
    else:
        ours, theirs = case(meshax, mnp), case(jax, jjnp)
    assert_same_tree(ours, theirs, rtol, atol)


def ulp_distance(a: Any, b: Any) -> int:
    """Largest distance in units in the last place between float arrays a and b (NaNs and infinities must
    coincide)."""
    a, b = np.atleast_1d(np.asarray(a)), np.atleast_1d(np.asarray(b))
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert (np.isnan(a.astype(np.float32)) == np.isnan(b.astype(np.float32))).all()
    finite = np.isfinite(a.astype(np.float32)) & np.isfinite(b.astype(np.float32))
    assert (a[~finite] == b[~finite]).all() or np.isnan(a[~finite]).all()
    if not finite.any():
        return 0
    ints = {2: np.int16, 4: np.int32}[a.dtype.itemsize]
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)

    def ordered(x):
        i = x.view(ints).astype(np.int64)
        return np.where(i < 0, -(i & (sign - 1)), i)

    return int(np.abs(ordered(a) - ordered(b))[finite].max())
