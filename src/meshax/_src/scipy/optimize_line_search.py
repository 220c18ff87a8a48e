"""A line search satisfying the strong Wolfe conditions (Nocedal & Wright, algorithms 3.5 and 3.6), as one
lax.while_loop: it brackets a step by growing it, then narrows the bracket by safeguarded bisection."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from .. import numpy as jnp
from ..lax import control_flow as _cf
from ..transforms.autodiff import value_and_grad


class LineSearchResult(NamedTuple):
    """The accepted step and the function's value and gradient there; evaluation counts; failure."""
    failed: Any
    nfev: Any
    ngev: Any
    a_k: Any
    f_k: Any
    g_k: Any
    status: Any


def _real_dot(a: Any, b: Any) -> Any:
    return jnp.real(jnp.vdot(a, b))


def line_search(f: Callable[[Any], Any], xk: Any, pk: Any, old_fval: Any, gfk: Any, old_old_fval: Any = None,
                c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResult:
    """A step a along pk from xk with f(xk + a pk) <= f(xk) + c1 a f'(0) and |f'(a)| <= c2 |f'(0)|.
    status: 0 found, 1 too many iterations, 3 not a descent direction."""
    fg = value_and_grad(f)
    dphi0 = _real_dot(gfk, pk)
    first = jnp.ones((), dphi0.dtype)
    if old_old_fval is not None:
        guess = 1.01 * 2 * (old_fval - old_old_fval) / dphi0
        first = jnp.where((dphi0 != 0) & (guess > 0) & jnp.isfinite(guess), jnp.minimum(first, guess), first)
    zero = jnp.zeros((), dphi0.dtype)
    # state: i, done, zooming, a_prev, f_prev, dphi_prev, a_lo, f_lo, dphi_lo, a_hi, a_next, a*, f*, g*
    state = (0, jnp.asarray(False), jnp.asarray(False), zero, old_fval.astype(dphi0.dtype), dphi0, zero,
             old_fval.astype(dphi0.dtype), dphi0, zero, first, zero, old_fval, gfk)

    def cond(s: tuple) -> Any:
        return (s[0] < maxiter) & ~s[1] & (dphi0 < 0)

    def body(s: tuple) -> tuple:
        i, _, zooming, a_prev, f_prev, dphi_prev, a_lo, f_lo, dphi_lo, a_hi, a_next, *_ = s
        a = jnp.where(zooming, (a_lo + a_hi) / 2, a_next)
        value, grad = fg(xk + a.astype(pk.dtype) * pk)
        value = jnp.real(value)
        dphi = _real_dot(grad, pk)
        armijo_fails = value > old_fval + c1 * a * dphi0
        curvature_ok = jnp.abs(dphi) <= -c2 * dphi0
        # bracketing phase
        to_zoom_high = armijo_fails | ((i > 0) & (value >= f_prev))
        to_zoom_low = ~to_zoom_high & ~curvature_ok & (dphi >= 0)
        found_b = ~to_zoom_high & curvature_ok
        # zooming phase
        shrink_high = armijo_fails | (value >= f_lo)
        found_z = ~shrink_high & curvature_ok
        flip = ~shrink_high & ~found_z & (dphi * (a_hi - a_lo) >= 0)
        found = jnp.where(zooming, found_z, found_b)
        new_lo = jnp.where(zooming, ~shrink_high, to_zoom_low)
        lo_from_prev = ~zooming & to_zoom_high
        a_lo2 = jnp.where(new_lo, a, jnp.where(lo_from_prev, a_prev, a_lo))
        f_lo2 = jnp.where(new_lo, value, jnp.where(lo_from_prev, f_prev, f_lo))
        dphi_lo2 = jnp.where(new_lo, dphi, jnp.where(lo_from_prev, dphi_prev, dphi_lo))
        a_hi2 = jnp.where(zooming, jnp.where(shrink_high, a, jnp.where(flip, a_lo, a_hi)),
                          jnp.where(to_zoom_high, a, jnp.where(to_zoom_low, a_prev, a_hi)))
        zooming2 = zooming | to_zoom_high | to_zoom_low
        return (i + 1, found, zooming2, a, value, dphi, a_lo2, f_lo2, dphi_lo2, a_hi2, 2 * a,
                jnp.where(found, a, s[11]), jnp.where(found, value, s[12]), jnp.where(found, grad, s[13]))

    out = _cf.while_loop(cond, body, state)
    failed = ~out[1]
    status = jnp.where(dphi0 >= 0, 3, jnp.where(failed, 1, 0))
    return LineSearchResult(failed=failed, nfev=out[0], ngev=out[0], a_k=out[11], f_k=out[12], g_k=out[13],
                            status=status)
