"""Numerical checks of derivatives (as jax.test_util): check_grads, check_jvp, check_vjp."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from meshax._src.transforms.autodiff import jvp, vjp
from meshax._src.tree.tree_util import tree_flatten, tree_map

__all__ = ["check_grads", "check_jvp", "check_vjp"]

_EPS = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-2, np.dtype(np.float64): 1e-5}
_TOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-5}


def _dtype(x: Any) -> np.dtype:
    return np.dtype(getattr(x, "dtype", np.asarray(x).dtype))


def _default(table: dict, tree: Any, fallback: float) -> float:
    leaves = tree_flatten(tree)[0]
    values = [table.get(_dtype(x), fallback) for x in leaves if np.issubdtype(_dtype(x), np.inexact)]
    return max(values, default=fallback)


def _tolerance(tol: float | None, tree: Any) -> float:
    return tol if tol is not None else _default(_TOL, tree, 1e-5)


def _add(x: Any, scale: float, v: Any) -> Any:
    return tree_map(lambda a, b: np.asarray(a) + scale * np.asarray(b).astype(np.asarray(a).dtype), x, v)


def _random_like(tree: Any, rng: np.random.RandomState) -> Any:
    def draw(x: Any) -> np.ndarray:
        x = np.asarray(x)
        value = rng.standard_normal(x.shape)
        if np.iscomplexobj(x):
            value = value + 1j * rng.standard_normal(x.shape)
        return value.astype(x.dtype)

    return tree_map(draw, tree)


def _inner(xs: Any, ys: Any) -> Any:
    total = 0.0
    for x, y in zip(tree_flatten(xs)[0], tree_flatten(ys)[0]):
        total = total + np.sum(np.asarray(x, np.complex128) * np.conj(np.asarray(y, np.complex128)))
    return total


def _assert_close(actual: Any, expected: Any, atol: float, rtol: float, what: str) -> None:
    for a, e in zip(tree_flatten(actual)[0], tree_flatten(expected)[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=atol, rtol=rtol, err_msg=what)


def check_jvp(f: Callable[..., Any], f_jvp: Callable[..., Any], args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, err_msg: str = "") -> None:
    """`f_jvp(args, tangents)` agrees with central finite differences of `f` along a random tangent."""
    rng = np.random.RandomState(0)
    tangent = _random_like(args, rng)
    eps = eps if eps is not None else _default(_EPS, args, 1e-4)
    _, out_tangent = f_jvp(args, tangent)
    plus = f(*_add(args, eps / 2, tangent))
    minus = f(*_add(args, -eps / 2, tangent))
    numeric = tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / eps, plus, minus)
    _assert_close(out_tangent, numeric, _tolerance(atol, args), _tolerance(rtol, args),
                  f"{err_msg} JVP tangent" if err_msg else "JVP tangent")


def check_vjp(f: Callable[..., Any], f_vjp: Callable[..., Any], args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, err_msg: str = "") -> None:
    """`f_vjp(*args)` is the adjoint of `f`'s JVP: <ct, J t> == <J^T ct, t> for random t and ct."""
    rng = np.random.RandomState(0)
    out, pullback = f_vjp(*args)
    tangent = _random_like(args, rng)
    cotangent = _random_like(out, rng)
    eps = eps if eps is not None else _default(_EPS, args, 1e-4)
    plus = f(*_add(args, eps / 2, tangent))
    minus = f(*_add(args, -eps / 2, tangent))
    numeric = tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / eps, plus, minus)
    pulled = pullback(cotangent)
    lhs = _inner(numeric, cotangent)
    rhs = _inner(tangent, pulled)
    tol = _tolerance(atol, args)
    np.testing.assert_allclose(lhs, rhs, atol=tol, rtol=_tolerance(rtol, args),
                               err_msg=f"{err_msg} VJP" if err_msg else "VJP")


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: float | None = None, rtol: float | None = None, eps: float | None = None) -> None:
    """Check `f`'s derivatives up to `order` (forward and/or reverse mode) against finite differences."""
    args = tuple(args)
    modes = tuple(modes)
    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"Unrecognized mode: {mode}")

    def check(fun: Callable[..., Any], inputs: tuple, level: int) -> None:
        if "fwd" in modes:
            check_jvp(fun, lambda a, t: jvp(fun, tuple(a), tuple(t)), inputs, atol, rtol, eps,
                      f"JVP of order {order - level + 1}")
            if level > 1:
                check(lambda *a: jvp(fun, a, _random_like(a, np.random.RandomState(1)))[1], inputs, level - 1)
        if "rev" in modes:
            check_vjp(fun, lambda *a: vjp(fun, *a), inputs, atol, rtol, eps, f"VJP of order {order - level + 1}")
            if level > 1:
                def pulled_back(*a: Any) -> Any:
                    out, pullback = vjp(fun, *a)
                    return pullback(_random_like(out, np.random.RandomState(2)))

                check(pulled_back, inputs, level - 1)

    check(f, args, order)
