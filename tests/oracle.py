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
