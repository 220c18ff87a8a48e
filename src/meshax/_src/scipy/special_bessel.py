"""Bessel functions of the first kind of integer order (bessel_jn, by Miller's backward recurrence as in JAX) and
spherical harmonics (sph_harm_y) of jax.scipy.special."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..core.core import aval_of
from ..core.dtypes import issubdtype
from ..interpreters.ad import defjvp
from ..numpy import _promote_inexact
from .special_kernels import const, kernel

__all__ = ["bessel_jn", "sph_harm_y"]


def bessel_jn(z: Any, *, v: int, n_iter: int = 50) -> Any:
    """J_0(z) ... J_v(z) stacked along a new first axis: Miller's backward recurrence from order `n_iter`, started
    at 1e-16 and normalized by 1 = J_0 + 2 (J_2 + J_4 + ...), in z's precision (so NaN where it overflows, as at
    z = 0 and for small or negative z, as in JAX)."""
    (z,) = _promote_inexact(z)
    if issubdtype(aval_of(z).dtype, np.complexfloating):
        raise ValueError(f"bessel_jn takes real z; got dtype {aval_of(z).dtype}: pass real values.")
    v, n_iter = operator.index(v), int(n_iter)
    previous, current = jnp.zeros_like(z), jnp.full_like(z, 1e-16)
    norm = jnp.zeros_like(z)
    orders = [None] * (n_iter + 1)
    for k in range(n_iter, -1, -1):
        value = const(2.0 * (k + 1.0), z) * current / z - previous
        if k % 2 == 0:
            norm = norm + const(2.0, z) * value
        previous, current = current, value
        orders[k] = value
    return jnp.stack(orders[: v + 1]) / (norm - orders[0])


def _legendre(theta: np.ndarray, n: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The orthonormalized associated Legendre function of cos(theta), degree n and order m >= 0 (0 for m > n)."""
    import scipy.special

    return scipy.special.sph_harm_y(n.astype(np.int64), m.astype(np.int64), theta, 0.0).real


_legendre_p = kernel("sph_legendre", _legendre)


def _legendre_dtheta(g: Any, ans: Any, theta: Any, n: Any, m: Any) -> Any:
    """d/dtheta P(n, m) = m cot(theta) P(n, m) + sqrt((n - m)(n + m + 1)) P(n, m + 1)."""
    raising = jnp.sqrt(jnp.maximum((n - m) * (n + m + 1), 0)) * _legendre_p.bind(theta, n, m + 1)
    return g * (m * jnp.cos(theta) / jnp.sin(theta) * ans + raising)


defjvp(_legendre_p, _legendre_dtheta, None, None)


def sph_harm_y(n: Any, m: Any, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """The spherical harmonic Y_n^m(theta, phi) (theta the colatitude, phi the longitude) of 1-D n, m, theta and
    phi; degrees and orders above `n_max` (default max(n)) are clipped to it, as in JAX."""
    if diff_n is not None:
        raise NotImplementedError(f"sph_harm_y's diff_n (got {diff_n}) is not supported, as in JAX; leave it None.")
    if np.ndim(theta) == 0:
        theta = jnp.asarray([theta])
    if n_max is None:
        n_max = np.max(np.asarray(n))
    n_max = int(n_max)
    n, m = jnp.asarray(n), jnp.asarray(m)
    theta, phi = _promote_inexact(theta, phi)
    dtype = aval_of(theta).dtype
    order = jnp.abs(m)
    legendre = _legendre_p.bind(theta, jnp.clip(n, 0, n_max).astype(dtype), jnp.clip(order, 0, n_max).astype(dtype))
    angle = order.astype(dtype) * phi
    harmonic = legendre * (jnp.cos(angle) + 1j * jnp.sin(angle))
    sign = jnp.where(order % 2 == 0, 1.0, -1.0).astype(dtype)
    return jnp.where(m < 0, sign * jnp.conj(harmonic), harmonic)
