"""The gamma family of meshax.random (as jax.random): gamma and loggamma (Marsaglia and Tsang's
rejection method, one key per sample), beta, dirichlet, chisquare, f, t, generalized_normal and ball
built on them; poisson (Knuth below rate 10, Hormann's transformed rejection above), binomial
(inversion, or BTRS) and multinomial.

The per-sample while loops of JAX's gamma are run here as one vectorised while loop over all
samples (what jax.vmap makes of them: a sample's state only changes while its own condition holds),
so each sample sees the same sequence of keys and draws as in JAX."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..core import dtypes
from .. import numpy as jnp
from ..lax.control_flow import while_loop
from ..lax.special import lgamma
from .prng import _canonical_shape, _is_array, _key_array, _lift, _single_key, split
from .distributions import _normal_real
from .transformed_distributions import (
    _const, _exp, _exponential, _float, _log, _log1p, _param, _param_shape, _pow, _shape_of, _split2, _sqrt,
    _uniform01, rademacher,
)
from ..core.dtypes import issubdtype
from ..arrays.out_sharding import accepts_out_sharding

__all__ = [
    "gamma", "loggamma", "beta", "dirichlet", "chisquare", "f", "t", "generalized_normal", "ball", "poisson",
    "binomial", "multinomial",
]


# ---- gamma ---------------------------------------------------------------------------------------------------


def _gamma_flat(keys: Any, alpha: Any, log_space: bool) -> Any:
    """One gamma (or log-gamma) sample per key: keys uint32[N, 2], alpha float[N]."""
    dtype = np.dtype(alpha.dtype)
    zero, one = _const(alpha, 0), _const(alpha, 1)
    third = _const(alpha, 1.0 / 3.0)
    boost_mask = jnp.greater_equal(alpha, one)
    alpha_orig = alpha
    alpha = jnp.where(boost_mask, alpha, jnp.add(alpha, one))
    d = jnp.subtract(alpha, third)
    c = jnp.divide(third, _sqrt(d))
    pairs = split(keys)
    keys, subkeys = pairs[:, 0, :], pairs[:, 1, :]

    def rejected(X: Any, V: Any, U: Any) -> Any:
        squeeze = jnp.greater_equal(U, jnp.subtract(one, jnp.multiply(_const(U, 0.0331), jnp.multiply(X, X))))
        bound = jnp.add(jnp.multiply(X, _const(U, 0.5)), jnp.multiply(d, jnp.add(jnp.subtract(one, V), _log(V))))
        return jnp.logical_and(squeeze, jnp.greater_equal(_log(U), bound))

    def outer_cond(state: Any) -> Any:
        _, X, V, U = state
        return jnp.any(rejected(X, V, U))

    def inner_cond(state: Any) -> Any:
        return jnp.any(jnp.less_equal(state[2], zero))

    def inner_body(state: Any) -> Any:
        k, x, v = state
        again = jnp.less_equal(v, zero)
        two = split(k)
        new_k, sub = two[:, 0, :], two[:, 1, :]
        new_x = _normal_real(sub, (), dtype)
        new_v = jnp.add(one, jnp.multiply(new_x, c))
        return (jnp.where(again[:, None], new_k, k), jnp.where(again, new_x, x), jnp.where(again, new_v, v))

    def outer_body(state: Any) -> Any:
        k, X, V, U = state
        again = rejected(X, V, U)
        three = split(k, 3)
        new_k, x_key, u_key = three[:, 0, :], three[:, 1, :], three[:, 2, :]
        _, x, v = while_loop(inner_cond, inner_body, (x_key, jnp.zeros_like(alpha), jnp.full_like(alpha, -1)))
        new_X = jnp.multiply(x, x)
        new_V = jnp.multiply(jnp.multiply(v, v), v)
        new_U = _uniform01(u_key, (), dtype)
        return (jnp.where(again[:, None], new_k, k), jnp.where(again, new_X, X), jnp.where(again, new_V, V),
                jnp.where(again, new_U, U))

    init = (keys, jnp.zeros_like(alpha), jnp.ones_like(alpha), jnp.full_like(alpha, 2))
    _, _, V, _ = while_loop(outer_cond, outer_body, init)
    if log_space:
        log_samples = jnp.negative(_exponential(subkeys, (), dtype))
        skip = jnp.logical_or(boost_mask, jnp.equal(log_samples, zero))
        log_boost = jnp.where(skip, zero, jnp.multiply(log_samples, jnp.divide(one, alpha_orig)))
        return jnp.add(jnp.add(_log(d), _log(V)), log_boost)
    samples = jnp.subtract(one, _uniform01(subkeys, (), dtype))
    boost = jnp.where(boost_mask, one, _pow(samples, jnp.divide(one, alpha_orig)))
    return jnp.multiply(jnp.multiply(d, V), boost)


def _gamma(key: Any, a: Any, shape: Any, dtype: np.dtype, log_space: bool) -> Any:
    shape = tuple(_shape_of(a)) if shape is None else _param_shape("gamma", shape, a)
    batch = tuple(key.shape[:-1])
    keys = split(key, shape)  # one key per sample (JAX splits each key into prod(shape))
    a = _param(a, dtype, batch + shape)
    n = math.prod(batch + shape)
    if n == 0:
        return jnp.zeros(batch + shape, dtype)
    out = _gamma_flat(jnp.reshape(keys, (n, 2)), jnp.reshape(a, (n,)), log_space)
    return jnp.reshape(out, batch + shape)


def _check_method(method: Any, what: str) -> None:
    """JAX 0.12's `method=` of the gamma family: 'exact' (the rejection sampler, implemented here) or
    'approximate' (JAX's loop-free approximation, which meshax does not reproduce)."""
    if method not in ("exact", "approximate"):
        raise ValueError(f"method argument to `{what}` must be one of {{'exact', 'approximate'}}, got {method!r}")
    if method == "approximate":
        raise NotImplementedError(f"{what}(method='approximate') is not implemented in meshax; use the default "
                                  "method='exact'.")


@accepts_out_sharding
def gamma(key: Any, a: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Gamma(a, 1) samples (Marsaglia and Tsang; a < 1 boosted by u ** (1 / a))."""
    key = _key_array(key, "gamma")
    _check_method(method, "gamma")
    return _gamma(key, a, shape, _float(dtype, "gamma"), False)


@accepts_out_sharding
def loggamma(key: Any, a: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """The logarithms of Gamma(a, 1) samples, computed in log space (accurate for small a)."""
    key = _key_array(key, "loggamma")
    _check_method(method, "loggamma")
    return _gamma(key, a, shape, _float(dtype, "loggamma"), True)


@accepts_out_sharding
def beta(key: Any, a: Any, b: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Beta(a, b) samples: G_a / (G_a + G_b) from two log-gamma samples."""
    key = _key_array(key, "beta")
    _check_method(method, "beta")
    dtype = _float(dtype, "beta")
    shape = _param_shape("beta", shape, a, b)
    key_a, key_b = _split2(key)
    a, b = _param(a, dtype, shape), _param(b, dtype, shape)
    log_a = _gamma(key_a, a, shape, dtype, True)
    log_b = _gamma(key_b, b, shape, dtype, True)
    log_max = jnp.maximum(log_a, log_b)
    ga, gb = _exp(jnp.subtract(log_a, log_max)), _exp(jnp.subtract(log_b, log_max))
    return jnp.divide(ga, jnp.add(ga, gb))


@accepts_out_sharding
def dirichlet(key: Any, alpha: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Dirichlet(alpha) samples along the last axis: the softmax of log-gamma samples."""
    key = _key_array(key, "dirichlet")
    dtype = _float(dtype, "dirichlet")
    ashape = _shape_of(alpha)
    if len(ashape) < 1:
        raise ValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {len(ashape)}")
    shape = ashape[:-1] if shape is None else _param_shape("dirichlet", shape, np.empty(ashape[:-1]))
    alpha = _param(alpha, dtype)
    log_g = _gamma(key, alpha, shape + ashape[-1:], dtype, True)
    peak = jnp.max(log_g, axis=-1, keepdims=True, initial=-np.inf)  # the softmax of log_g, as jax.nn.softmax computes it
    unnormalized = jnp.exp(jnp.subtract(log_g, peak))
    return jnp.divide(unnormalized, jnp.sum(unnormalized, axis=-1, keepdims=True))


def _chisquare(key: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    df = _param(df, dtype)
    two = np.asarray(2, dtype)
    log_g = _gamma(key, jnp.divide(df, two), shape, dtype, True)
    return jnp.multiply(_exp(log_g), two)


@accepts_out_sharding
def chisquare(key: Any, df: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Chi-square samples with df degrees of freedom: 2 * Gamma(df / 2)."""
    key = _key_array(key, "chisquare")
    _check_method(method, "chisquare")
    dtype = _float(dtype, "chisquare")
    return _chisquare(key, df, _param_shape("chisquare", shape, df), dtype)


@accepts_out_sharding
def f(key: Any, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None) -> Any:
    """F-distribution samples: (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)."""
    key = _key_array(key, "f")
    dtype = _float(dtype, "f")
    shape = _param_shape("f", shape, dfnum, dfden)
    dfnum, dfden = _param(dfnum, dtype), _param(dfden, dtype)
    key_den, key_num = _split2(key)
    num = jnp.divide(_chisquare(key_num, dfnum, shape, dtype), dfnum)
    den = jnp.divide(_chisquare(key_den, dfden, shape, dtype), dfden)
    return jnp.divide(num, den)


@accepts_out_sharding
def t(key: Any, df: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Student's t samples: n * sqrt((df / 2) / Gamma(df / 2))."""
    key = _key_array(key, "t")
    dtype = _float(dtype, "t")
    shape = _param_shape("t", shape, df)
    df = _param(df, dtype)
    key_n, key_g = _split2(key)
    n = _normal_real(key_n, shape, dtype)
    half_df = jnp.divide(df, np.asarray(2, dtype))
    g = _gamma(key_g, half_df, shape, dtype, False)
    return jnp.multiply(n, _sqrt(jnp.divide(half_df, g)))


def _generalized_normal(key: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    k_gamma, k_sign = _split2(key)
    inv_p = 1 / p if not _is_array(p) else jnp.divide(1, p)
    g = _gamma(k_gamma, inv_p, shape, dtype, False)
    r = rademacher(k_sign, shape, dtype)
    return jnp.multiply(r, _pow(g, inv_p))


@accepts_out_sharding
def generalized_normal(key: Any, p: float, shape: Any = (), dtype: Any = None) -> Any:
    """Generalized normal samples of power p: a random sign times Gamma(1 / p) ** (1 / p)."""
    key = _key_array(key, "generalized_normal")
    return _generalized_normal(key, p, _canonical_shape(shape), _float(dtype, "generalized_normal"))


@accepts_out_sharding
def ball(key: Any, d: int, p: float = 2, shape: Any = (), dtype: Any = None) -> Any:
    """Samples uniform in the d-dimensional unit p-ball (generalized normals over their p-norm plus an
    exponential)."""
    key = _key_array(key, "ball")
    dtype = _float(dtype, "ball")
    shape = _canonical_shape(shape)
    d = int(d)
    k1, k2 = _split2(key)
    g = _generalized_normal(k1, p, (*shape, d), dtype)
    e = _exponential(k2, shape, dtype)
    absg = jnp.abs(g)
    if isinstance(p, (int, np.integer)) and not isinstance(p, bool) and int(p) == 2:
        powered = jnp.multiply(absg, absg)
    else:
        powered = _pow(absg, p)
    inv_p = 1 / p if not _is_array(p) else jnp.divide(1, p)
    norm = _pow(jnp.add(jnp.sum(powered, axis=-1), e), inv_p)
    return jnp.divide(g, jnp.expand_dims(norm, -1))


# ---- poisson -------------------------------------------------------------------------------------------------

def _lgamma_positive(x: Any) -> Any:
    """log Gamma(x) for x >= 0.5, in x's float dtype. JAX 0.12's lgamma is accurate to about an ulp (XLA's
    Lanczos approximation, which JAX 0.10 used, was not), so the rejection test of poisson uses meshax's lgamma,
    computed in float64 and rounded: the accept / reject decisions, and so the samples, then agree with JAX's."""
    return lgamma(x)


def _poisson_knuth(key: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    neg_lam = jnp.negative(lam)

    def cond(state: Any) -> Any:
        return jnp.any(jnp.greater(state[2], neg_lam))

    def body(state: Any) -> Any:
        k, rng, log_prod = state
        rng, sub = _split2(rng)
        k = jnp.where(jnp.greater(log_prod, neg_lam), jnp.add(k, np.asarray(1, dtype)), k)
        u = _uniform01(sub, shape, np.dtype(np.float32))
        return k, rng, jnp.add(log_prod, _log(u))

    init = (jnp.zeros(shape, dtype), key, jnp.zeros(shape, np.float32))
    k = while_loop(cond, body, init)[0]
    return jnp.astype(jnp.subtract(k, np.asarray(1, dtype)), dtype)


def _poisson_rejection(key: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    c = lambda v: np.asarray(v, np.float32)  # noqa: E731
    log_lam = _log(lam)
    b = jnp.add(c(0.931), jnp.multiply(c(2.53), _sqrt(lam)))
    a = jnp.add(c(-0.059), jnp.multiply(c(0.02483), b))
    inv_alpha = jnp.add(c(1.1239), jnp.divide(c(1.1328), jnp.subtract(b, c(3.4))))
    v_r = jnp.subtract(c(0.9277), jnp.divide(c(3.6224), jnp.subtract(b, c(2))))

    def propose(u: Any, v: Any) -> tuple[Any, Any]:
        u = jnp.subtract(u, c(0.5))
        us = jnp.subtract(c(0.5), jnp.abs(u))
        k = jnp.floor(jnp.add(jnp.add(jnp.multiply(jnp.add(jnp.divide(jnp.multiply(c(2), a), us), b), u), lam),
                              c(0.43)))
        s = _log(jnp.divide(jnp.multiply(v, inv_alpha), jnp.add(jnp.divide(a, jnp.multiply(us, us)), b)))
        kp1 = jnp.add(k, c(1))
        lg = _lgamma_positive(jnp.where(jnp.less(kp1, c(0.5)), c(1), kp1))
        t = jnp.subtract(jnp.add(jnp.negative(lam), jnp.multiply(k, log_lam)), lg)
        accept1 = jnp.logical_and(jnp.greater_equal(us, c(0.07)), jnp.less_equal(v, v_r))
        reject = jnp.logical_or(jnp.less(k, c(0)), jnp.logical_and(jnp.less(us, c(0.013)), jnp.greater(v, us)))
        accept = jnp.logical_or(accept1, jnp.logical_and(jnp.logical_not(reject), jnp.less_equal(s, t)))
        return k, accept

    return _transformed_rejection(key, shape, np.dtype(np.float32), dtype, propose)


def _transformed_rejection(key: Any, shape: tuple, fdtype: Any, dtype: Any,
                           propose: Callable[[Any, Any], tuple[Any, Any]]) -> Any:
    """Hormann's transformed rejection: draw uniform pairs (u, v) until every element accepts its proposal."""

    def cond(state: Any) -> Any:
        return jnp.any(jnp.logical_not(state[1]))

    def body(state: Any) -> Any:
        k_out, accepted, rng = state
        three = split(rng, 3)
        rng, k0, k1 = three[0], three[1], three[2]
        k, accept = propose(_uniform01(k0, shape, fdtype), _uniform01(k1, shape, fdtype))
        return jnp.where(accept, k, k_out), jnp.logical_or(accepted, accept), rng

    init = (jnp.full(shape, -1, fdtype), jnp.zeros(shape, np.bool_), key)
    return jnp.astype(while_loop(cond, body, init)[0], dtype)


@accepts_out_sharding
def poisson(key: Any, lam: Any, shape: Any = None, dtype: Any = None, *, method: str = "exact") -> Any:
    """Poisson(lam) samples: Knuth's multiplication method for lam < 10, Hormann's transformed rejection
    above (computed in float32). method="approximate" (JAX 0.12's loop-free approximation) is not implemented."""
    if method not in ("exact", "approximate"):
        raise ValueError(f"method argument to `poisson` must be one of {{'exact', 'approximate'}}, got {method!r}")
    if method == "approximate":
        raise NotImplementedError("poisson(method='approximate') is not implemented in meshax; use the default "
                                  "method='exact'.")
    key = _single_key(key, "poisson")
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_int_dtype())
    if not issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `poisson` must be an int dtype, got {dtype}")
    shape = _shape_of(lam) if shape is None else _canonical_shape(shape)
    lam = _param(lam, np.dtype(np.float32), shape)
    with np.errstate(all="ignore"):
        use_knuth = jnp.logical_or(jnp.isnan(lam), jnp.less(lam, np.float32(10)))
        lam_knuth = jnp.where(use_knuth, lam, np.float32(0))
        lam_rejection = jnp.where(use_knuth, np.float32(1e5), lam)
        result = jnp.where(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype),
                           _poisson_rejection(key, lam_rejection, shape, dtype))
        return jnp.where(jnp.equal(lam, np.float32(0)), np.asarray(0, dtype), result)


# ---- binomial and multinomial --------------------------------------------------------------------------------

_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: Any) -> Any:
    """The tail of Stirling's series for log k!: a table for k <= 9 (and, as in JAX, the series evaluated at
    k clipped to 9 beyond)."""
    table = jnp.asarray(np.asarray(_STIRLING_TAIL, k.dtype))
    use_table = jnp.less_equal(k, _const(k, 9))
    k = jnp.clip(k, _const(k, 0), _const(k, 9))
    k1 = jnp.add(k, _const(k, 1))
    kp1sq = jnp.multiply(k1, k1)
    inner = jnp.subtract(_const(k, 1.0 / 360), jnp.divide(_const(k, 1.0 / 1260), kp1sq))
    approx = jnp.divide(jnp.subtract(_const(k, 1.0 / 12), jnp.divide(inner, kp1sq)), k1)
    idx = jnp.astype(jnp.floor(k), np.int32)
    return jnp.where(use_table, jnp.take(table, idx), approx)


def _binomial_inversion(key: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    fdtype = np.dtype(prob.dtype)
    log_q = _log1p(jnp.negative(prob))

    def cond(state: Any) -> Any:
        return jnp.any(jnp.less_equal(state[1], count))

    def body(state: Any) -> Any:
        num, geom_sum, rng = state
        keys = split(rng)
        sub, rng = keys[0], keys[1]
        num = jnp.where(jnp.less_equal(geom_sum, count), jnp.add(num, _const(num, 1)), num)
        u = _uniform01(sub, shape, fdtype)
        geom = jnp.ceil(jnp.divide(_log(u), log_q))
        return num, jnp.add(geom_sum, geom), rng

    init = (jnp.zeros(shape, fdtype), jnp.zeros(shape, fdtype), key)
    k = while_loop(cond, body, init)[0]
    return jnp.astype(jnp.subtract(k, _const(k, 1)), dtype)


def _btrs(key: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    fdtype = np.dtype(prob.dtype)
    c_ = lambda v: np.asarray(v, fdtype)  # noqa: E731
    one = c_(1)
    stddev = _sqrt(jnp.multiply(jnp.multiply(count, prob), jnp.subtract(one, prob)))
    b = jnp.add(c_(1.15), jnp.multiply(c_(2.53), stddev))
    a = jnp.add(jnp.add(c_(-0.0873), jnp.multiply(c_(0.0248), b)), jnp.multiply(c_(0.01), prob))
    c = jnp.add(jnp.multiply(count, prob), c_(0.5))
    v_r = jnp.subtract(c_(0.92), jnp.divide(c_(4.2), b))
    r = jnp.divide(prob, jnp.subtract(one, prob))
    alpha = jnp.multiply(jnp.add(c_(2.83), jnp.divide(c_(5.1), b)), stddev)
    m = jnp.floor(jnp.multiply(jnp.add(count, one), prob))
    cm1 = jnp.add(jnp.subtract(count, m), one)

    def propose(u: Any, v: Any) -> tuple[Any, Any]:
        u = jnp.subtract(u, c_(0.5))
        us = jnp.subtract(c_(0.5), jnp.abs(u))
        accept1 = jnp.logical_and(jnp.greater_equal(us, c_(0.07)), jnp.less_equal(v, v_r))
        k = jnp.floor(jnp.add(jnp.multiply(jnp.add(jnp.divide(jnp.multiply(c_(2), a), us), b), u), c))
        reject = jnp.logical_or(jnp.less(k, c_(0)), jnp.greater(k, count))
        v = _log(jnp.divide(jnp.multiply(v, alpha), jnp.add(jnp.divide(a, jnp.multiply(us, us)), b)))
        ck1 = jnp.add(jnp.subtract(count, k), one)
        ub = jnp.multiply(jnp.add(m, c_(0.5)), _log(jnp.divide(jnp.add(m, one), jnp.multiply(r, cm1))))
        ub = jnp.add(ub, jnp.multiply(jnp.add(count, one), _log(jnp.divide(cm1, ck1))))
        ub = jnp.add(ub, jnp.multiply(jnp.add(k, c_(0.5)),
                                      _log(jnp.divide(jnp.multiply(r, ck1), jnp.add(k, one)))))
        ub = jnp.add(ub, _stirling_tail(m))
        ub = jnp.add(ub, _stirling_tail(jnp.subtract(count, m)))
        ub = jnp.subtract(ub, _stirling_tail(k))
        ub = jnp.subtract(ub, _stirling_tail(jnp.subtract(count, k)))
        accept = jnp.logical_or(accept1, jnp.logical_and(jnp.logical_not(reject), jnp.less_equal(v, ub)))
        return k, accept

    return _transformed_rejection(key, shape, fdtype, dtype, propose)


def _promote_float(x: Any) -> Any:
    x = _lift(x)
    if not issubdtype(x.dtype, np.inexact):
        x = jnp.astype(x, dtypes.default_float_dtype()) if _is_array(x) else np.asarray(
            x, dtypes.default_float_dtype())
    return x


def _binomial(key: Any, count: Any, prob: Any, shape: Any, dtype: np.dtype) -> Any:
    if shape is None:
        shape = tuple(np.broadcast_shapes(_shape_of(count), _shape_of(prob)))
    else:
        shape = _param_shape("binomial", shape, count, prob)
    prob = _promote_float(prob)
    fdtype = np.dtype(prob.dtype)
    c_ = lambda v: np.asarray(v, fdtype)  # noqa: E731
    count = _param(count, fdtype, shape)
    prob = _param(prob, fdtype, shape)
    with np.errstate(all="ignore"):
        p_lt_half = jnp.less(prob, c_(0.5))
        q = jnp.where(p_lt_half, prob, jnp.subtract(c_(1), prob))
        count_nan_or_neg = jnp.logical_or(jnp.isnan(count), jnp.less(count, c_(0)))
        count_inf = jnp.isinf(count)
        q_is_nan = jnp.isnan(q)
        q_l_0 = jnp.less(q, c_(0))
        q = jnp.where(jnp.logical_or(q_is_nan, q_l_0), c_(0.01), q)
        use_inversion = jnp.logical_or(count_nan_or_neg, jnp.less_equal(jnp.multiply(count, q), c_(10)))
        count = jnp.floor(count)
        count_inv = jnp.where(use_inversion, count, c_(0))
        count_btrs = jnp.where(use_inversion, c_(1e4), count)
        q_btrs = jnp.where(use_inversion, c_(0.5), q)
        samples = jnp.where(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype),
                            _btrs(key, count_btrs, q_btrs, shape, dtype))
        invalid = jnp.logical_or(jnp.logical_or(q_l_0, q_is_nan), count_nan_or_neg)
        samples = jnp.where(invalid, np.asarray(np.nan, dtype), samples)
        samples = jnp.where(jnp.logical_and(count_inf, jnp.logical_not(invalid)), np.asarray(np.inf, dtype), samples)
        keep = jnp.logical_or(jnp.logical_or(p_lt_half, count_nan_or_neg), jnp.logical_or(q_is_nan, count_inf))
        return jnp.where(keep, samples, jnp.subtract(jnp.astype(count, dtype), samples))


def binomial(key: Any, n: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Binomial(n, p) samples as floats: inversion (sums of geometric draws) when n * min(p, 1-p) <= 10,
    else the BTRS transformed rejection."""
    key = _single_key(key, "binomial")
    dtype = _float(dtype, "binomial")
    return _binomial(key, n, p, shape, dtype)


def multinomial(key: Any, n: Any, p: Any, *, shape: Any = None, dtype: Any = None, unroll: Any = 1) -> Any:
    """Multinomial(n, p) counts along the last axis: one binomial draw per category, of the remaining count
    with probability p_i / (p_i + ... + p_last). `shape`, if given, is the batch shape: the result's shape is
    shape + p.shape[-1:]."""
    key = _single_key(key, "multinomial")
    n, p = jnp._promote_inexact(_lift(n), _lift(p))
    if not _is_array(p):
        p = jnp.asarray(p)
    if not _is_array(n):
        n = jnp.asarray(n)
    if shape is None:
        shape = tuple(p.shape)
    else:  # `shape` is the batch shape (JAX 0.12): the result is shape + (number of categories,)
        batch = _canonical_shape(shape)
        broadcast = jnp.broadcast_shapes(batch, tuple(n.shape), tuple(p.shape[:-1]))
        if broadcast != batch:
            raise ValueError("multinomial parameter shapes must be broadcast-compatible with shape argument, and "
                             "the result of broadcasting the shapes must equal the shape argument, but got result "
                             f"{broadcast} for shape argument {batch}.")
        shape = (*batch, p.shape[-1])
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.broadcast_to(p, shape)
    p = jnp.moveaxis(p, -1, 0)
    remaining = jnp.flip(jnp.cumsum(jnp.flip(p, 0), axis=0), 0)
    zero, one = _const(remaining, 0), _const(remaining, 1)
    ratios = jnp.divide(p, jnp.where(jnp.equal(remaining, zero), one, remaining))
    keys = split(key, p.shape[0])
    remainder = n
    counts = []
    for i in range(p.shape[0]):
        count = _binomial(keys[i], remainder, jnp.clip(ratios[i], zero, one), None, np.dtype(remainder.dtype))
        remainder = jnp.subtract(remainder, count)
        counts.append(count)
    out = jnp.moveaxis(jnp.stack(counts), 0, -1)
    return jnp.astype(out, dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype))
