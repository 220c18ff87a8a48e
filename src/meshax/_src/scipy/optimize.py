"""Unconstrained minimization (as jax.scipy.optimize): minimize with BFGS (or JAX's experimental L-BFGS), each a
lax.while_loop around a strong-Wolfe line search, so it runs eagerly, under jit and under vmap."""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from .. import numpy as jnp
from ..lax import control_flow as _cf
from ..numpy import linalg as _linalg
from ..numpy.promotion import _cast
from ..transforms.autodiff import value_and_grad
from .optimize_line_search import line_search


class OptimizeResults(NamedTuple):
    """The result of minimize: the solution x, whether it succeeded and why it stopped (status: 0 converged,
    1 iteration limit, 2+ line search failures, ...), the value and gradient there, BFGS's inverse Hessian
    estimate, and the counts of function and gradient evaluations and of iterations."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


def _counts(*counts: Any) -> list[Any]:
    """Iteration and evaluation counts as weakly typed int32 arrays (as JAX returns them)."""
    return [_cast(c, np.dtype(np.int32), weak=True) for c in counts]


def _bfgs(fun: Callable[[Any], Any], x0: Any, maxiter: int | None = None, norm: Any = np.inf, gtol: float = 1e-5,
          line_search_maxiter: int = 10) -> OptimizeResults:
    """BFGS from x0: quasi-Newton steps along -H g, the inverse Hessian estimate H updated from each step."""
    maxiter = np.size(x0) * 200 if maxiter is None else maxiter
    f0, g0 = value_and_grad(fun)(x0)
    eye = jnp.eye(x0.shape[0], dtype=x0.dtype)
    # state: converged, failed, k, nfev, ngev, x, f, g, H, f_before, status of the last line search
    state = (_linalg.norm(g0, ord=norm) < gtol, jnp.asarray(False), 0, 1, 1, x0, f0, g0, eye,
             f0 + _linalg.norm(g0) / 2, 0)

    def cond(s: tuple) -> Any:
        return ~s[0] & ~s[1] & (s[2] < maxiter)

    def body(s: tuple) -> tuple:
        _, _, k, nfev, ngev, x, f, g, h, f_before, _ = s
        p = -(h @ g)
        ls = line_search(fun, x, p, old_fval=f, old_old_fval=f_before, gfk=g, maxiter=line_search_maxiter)
        step = ls.a_k.astype(x.dtype) * p
        x1, f1, g1 = x + step, ls.f_k, ls.g_k
        y = g1 - g
        rho = jnp.reciprocal(jnp.dot(y, step))
        left = eye - rho * step[:, None] * y[None, :]
        h1 = left @ h @ left.T + rho * step[:, None] * step[None, :]
        h1 = jnp.where(jnp.isfinite(rho), h1, h)
        return (_linalg.norm(g1, ord=norm) < gtol, ls.failed, k + 1, nfev + ls.nfev, ngev + ls.ngev, x1, f1, g1,
                h1, f, ls.status)

    converged, failed, k, nfev, ngev, x, f, g, h, _, ls_status = _cf.while_loop(cond, body, state)
    status = jnp.where(converged, 0, jnp.where(k == maxiter, 1, jnp.where(failed, 2 + ls_status, -1)))
    nfev, ngev, k = _counts(nfev, ngev, k)
    return OptimizeResults(x=x, success=converged & ~failed, status=status, fun=f, jac=g, hess_inv=h, nfev=nfev,
                           njev=ngev, nit=k)


def _two_loop(g: Any, s_hist: Any, y_hist: Any, rho_hist: Any, gamma: Any, k: Any) -> Any:
    """L-BFGS's search direction -H g from the stored steps and gradient changes (newest last)."""
    size = rho_hist.shape[0]
    used = jnp.minimum(k, size)
    q = -jnp.conj(g)
    alphas = jnp.zeros_like(rho_hist)

    def backward(j: Any, carry: tuple) -> tuple:
        q, alphas = carry
        i = size - 1 - j
        a = rho_hist[i] * jnp.real(jnp.vdot(jnp.conj(s_hist[i]), q))
        return q - a * jnp.conj(y_hist[i]), alphas.at[i].set(a)

    q, alphas = _cf.fori_loop(0, used, backward, (q, alphas))
    q = gamma * q

    def forward(j: Any, q: Any) -> Any:
        i = size - used + j
        b = rho_hist[i] * jnp.real(jnp.vdot(y_hist[i], q))
        return q + (alphas[i] - b) * s_hist[i]

    return _cf.fori_loop(0, used, forward, q)


def _lbfgs(fun: Callable[[Any], Any], x0: Any, maxiter: float | None = None, norm: Any = np.inf, maxcor: int = 10,
           ftol: float = 2.220446049250313e-09, gtol: float = 1e-5, maxfun: float | None = None,
           maxgrad: float | None = None, maxls: int = 20) -> OptimizeResults:
    """Limited-memory BFGS from x0 keeping the last `maxcor` steps (JAX's experimental method)."""
    d = x0.shape[0]
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    f0, g0 = value_and_grad(fun)(x0)
    real = np.finfo(x0.dtype).dtype
    state = (_linalg.norm(g0, ord=norm) < gtol, jnp.asarray(False), 0, 1, 1, x0, f0, g0,
             jnp.zeros((maxcor, d), x0.dtype), jnp.zeros((maxcor, d), x0.dtype), jnp.zeros((maxcor,), real),
             jnp.ones((), x0.dtype), 0)

    def cond(s: tuple) -> Any:
        return ~s[0] & ~s[1]

    def body(s: tuple) -> tuple:
        _, _, k, nfev, ngev, x, f, g, s_hist, y_hist, rho_hist, gamma, _ = s
        p = _two_loop(g, s_hist, y_hist, rho_hist, gamma, k)
        ls = line_search(fun, x, p, old_fval=f, gfk=g, maxiter=maxls)
        step = ls.a_k.astype(x.dtype) * p
        x1, f1, g1 = x + step, ls.f_k, ls.g_k
        y = g1 - g
        rho_inv = jnp.real(jnp.vdot(y, step))
        gamma1 = (rho_inv / jnp.real(jnp.vdot(y, y))).astype(x.dtype)
        status = jnp.where(ls.failed, 5, jnp.where(k >= maxiter, 1, jnp.where(
            nfev + ls.nfev >= maxfun, 2, jnp.where(ngev + ls.ngev >= maxgrad, 3, jnp.where(f - f1 < ftol, 4, 0)))))
        converged = _linalg.norm(g1, ord=norm) < gtol
        s_hist = jnp.roll(s_hist, -1, axis=0).at[-1].set(step)
        y_hist = jnp.roll(y_hist, -1, axis=0).at[-1].set(y)
        rho_hist = jnp.roll(rho_hist, -1, axis=0).at[-1].set(1 / rho_inv)
        return (converged, (status > 0) & ~converged, k + 1, nfev + ls.nfev, ngev + ls.ngev, x1.astype(x.dtype),
                f1.astype(f.dtype), g1.astype(g.dtype), s_hist, y_hist, rho_hist, gamma1,
                jnp.where(converged, 0, status))

    converged, failed, k, nfev, ngev, x, f, g, *_, status = _cf.while_loop(cond, body, state)
    nfev, ngev, k = _counts(nfev, ngev, k)
    return OptimizeResults(x=x, success=converged & ~failed, status=status, fun=f, jac=g, hess_inv=None,
                           nfev=nfev, njev=ngev, nit=k)


def minimize(fun: Callable, x0: Any, args: tuple = (), *, method: str, tol: float | None = None,
             options: Mapping[str, Any] | None = None) -> OptimizeResults:
    """Minimize fun(x, *args) over the 1-D x from x0 by `method` ('BFGS', or JAX's
    'l-bfgs-experimental-do-not-rely-on-this'); `options` are the method's keywords (maxiter, gtol, norm, ...)."""
    options = {} if options is None else dict(options)
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, got {args}")
    objective = lambda x: fun(x, *args)  # noqa: E731
    x0 = jnp.asarray(x0)
    if method.lower() == "bfgs":
        return _bfgs(objective, x0, **options)
    if method.lower() == "l-bfgs-experimental-do-not-rely-on-this":
        return _lbfgs(objective, x0, **options)
    raise ValueError(f"Method {method} not recognized; pass method='BFGS'.")
