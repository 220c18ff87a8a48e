"""Running one case in meshax three ways (eager, under jit, inside shard_map) and in JAX, and comparing.

A case is `case(L, *args)` where `L` is a module namespace (meshax or jax: `L.numpy`, `L.nn`, `L.grad`, ...).
Arguments are NumPy values: each library gets them as its own arrays. shard_map runs the case on every device of
an 8-device mesh with replicated inputs and outputs, so every device computes the whole case.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import jax
import numpy as np

import meshax
from meshax.sharding import Mesh, PartitionSpec

MODES = ("eager", "jit", "shard_map")


def run_meshax(case: Callable[..., Any], args: tuple, mode: str) -> Any:
    """`case(meshax, *args)` eagerly, jitted, or in a shard_map over all devices (replicated in and out)."""
    arrays = tuple(meshax.numpy.asarray(a) for a in args)
    if mode == "eager":
        return case(meshax, *arrays)
    if mode == "jit":
        return meshax.jit(lambda *xs: case(meshax, *xs))(*arrays)
    mesh = Mesh(np.array(meshax.devices()), ("x",))
    mapped = meshax.shard_map(lambda *xs: case(meshax, *xs), mesh=mesh, in_specs=PartitionSpec(),
                              out_specs=PartitionSpec(), check_vma=False)
    return mapped(*arrays)


def run_jax(case: Callable[..., Any], args: tuple, jitted: bool = False) -> Any:
    """`case(jax, *args)`, eagerly or (`jitted`: one compilation instead of one per operation, for values that
    agree with the eager ones far within the case's tolerances) under jax.jit."""
    arrays = tuple(jax.numpy.asarray(a) for a in args)
    if jitted:
        return jax.jit(lambda *xs: case(jax, *xs))(*arrays)
    return case(jax, *arrays)


def assert_matches(ours: Any, theirs: Any, rtol: float = 2e-6, atol: float = 1e-6, check_weak: bool = True) -> None:
    """Same tree, shapes, dtypes, weak types and values (NaNs and infinities in the same places)."""
    ours_leaves, ours_tree = jax.tree_util.tree_flatten(ours)
    theirs_leaves, theirs_tree = jax.tree_util.tree_flatten(theirs)
    assert ours_tree == theirs_tree, (ours_tree, theirs_tree)
    for a, b in zip(ours_leaves, theirs_leaves):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype, (np.asarray(a).dtype, np.asarray(b).dtype)
        if check_weak:
            assert bool(getattr(a, "weak_type", False)) == bool(getattr(b, "weak_type", False)), (a, b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, equal_nan=True)


def check_case(case: Callable[..., Any], args: tuple, mode: str, **tolerances: Any) -> None:
    """`case` in meshax (in `mode`) and in JAX (eagerly) agree."""
    assert_matches(run_meshax(case, args, mode), run_jax(case, args), **tolerances)


def check_modes(case: Callable[..., Any], *args: Any, modes: tuple[str, ...] = ("eager", "jit"),
                jax_jitted: bool = False, **tolerances: Any) -> Any:
    """`case(L, *args)` in meshax (each mode) and in JAX (eagerly, or under jit: `run_jax`) agree: values, shapes,
    dtypes and weak types (NumPy's runtime warnings of the cases' edge values silenced). Returns JAX's result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = run_jax(case, args, jax_jitted)
    check_against(theirs, case, *args, modes=modes, **tolerances)
    return theirs


def check_against(theirs: Any, case: Callable[..., Any], *args: Any, modes: tuple[str, ...] = ("eager", "jit"),
                  **tolerances: Any) -> None:
    """check_modes given JAX's result of the case already (`run_jax(case, args)`), so JAX runs once."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for mode in modes:
            assert_matches(run_meshax(case, args, mode), theirs, **tolerances)


def random_data(shape: tuple[int, ...], dtype: Any, seed: int = 0, scale: float = 3.0) -> np.ndarray:
    """Normal values times `scale` of `shape` and `dtype` (complex dtypes get a random imaginary part too)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * scale
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


def raises_like_jax(case: Callable[..., Any], *args: Any) -> None:
    """JAX raises for `case(jax, *args)`; meshax must raise the same exception class."""
    import pytest

    with pytest.raises(Exception) as theirs:
        case(jax, *args)
    with pytest.raises(theirs.type):
        case(meshax, *args)


def check_modes_or_same_error(case: Callable[..., Any], *args: Any, modes: tuple[str, ...] = ("eager", "jit"),
                              **tolerances: Any) -> None:
    """`case` in meshax and JAX agree; where JAX raises, meshax raises the same class of error in every mode."""
    import pytest

    try:
        run_jax(case, args)
    except Exception as error:  # noqa: BLE001  (any error JAX raises, meshax must raise too)
        for mode in modes:
            with pytest.raises(type(error)):
                run_meshax(case, args, mode)
        return
    check_modes(case, *args, modes=modes, **tolerances)
