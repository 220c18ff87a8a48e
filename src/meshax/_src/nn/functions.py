"""meshax.nn: activation functions and friends, written with meshax.numpy."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import numpy as jnp
from ..arrays.out_sharding import reshard
from ..primitives import array_primitives as P
from ..transforms.autodiff import stop_gradient
from ..transforms.custom_derivatives import custom_jvp


@custom_jvp
def relu(x: Any) -> Any:
    return jnp.maximum(x, 0)


# as JAX's: the derivative is 0 at x == 0 (not the 0.5 of maximum's), and one select of the tangent
relu.defjvps(lambda g, ans, x: jnp.where(jnp.greater(x, 0), g, 0))


def relu6(x: Any) -> Any:
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


def sigmoid(x: Any) -> Any:
    (x,) = jnp._promote_inexact(x)
    return P.UNARY["logistic"].bind(x)


def silu(x: Any) -> Any:
    x = jnp.asarray(x)
    return jnp.multiply(x, sigmoid(x))


swish = silu


def gelu(x: Any, approximate: bool = True) -> Any:
    (x,) = jnp._promote_inexact(x)
    if approximate:
        inner = jnp.multiply(np.sqrt(2 / np.pi).astype(x.dtype), jnp.add(x, jnp.multiply(0.044715, jnp.power(x, 3))))
        return jnp.multiply(jnp.multiply(0.5, x), jnp.add(1, jnp.tanh(inner)))
    return jnp.multiply(jnp.multiply(0.5, x), jnp.add(1, P.UNARY["erf"].bind(jnp.divide(x, np.sqrt(2)))))


def tanh(x: Any) -> Any:
    return jnp.tanh(x)


def softplus(x: Any) -> Any:
    return jnp.logaddexp(x, 0)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """log(sum(b * exp(a))) along `axis`, computed stably (as jax.nn.logsumexp).

    Entries whose scale `b` is 0 take no part (not even in the shift by the maximum, so one huge entry with
    b == 0 cannot swamp the others); entries outside `where` neither. With `return_sign` the result is
    (log|sum|, sign of sum); without it a negative real sum gives NaN, and a complex sum its complex log.
    """
    if b is None:
        (a,) = jnp._promote_inexact(a)
    else:
        a, b = jnp._promote_inexact(a, b)
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)
    real = jnp.real(a) if jnp.iscomplexobj(a) else a
    peak = jnp.max(real, axis=axis, keepdims=True, initial=-np.inf, where=where)
    peak = stop_gradient(jnp.where(jnp.isfinite(peak), peak, 0))
    scaled = jnp.exp(jnp.subtract(a, jnp.astype(peak, a.dtype)))
    if b is not None:
        scaled = jnp.multiply(scaled, b)
    total = jnp.sum(scaled, axis=axis, keepdims=True, where=where)
    sign = jnp.sign(total)
    out = jnp.add(jnp.log(jnp.absolute(total)), peak)
    if not return_sign:
        if jnp.iscomplexobj(a):
            out = jnp.add(out, jnp.log(sign))
        else:
            out = jnp.where(jnp.less(sign, 0), np.nan, out)
    if not keepdims:
        axes = jnp._axes(axis, a.ndim)
        out = jnp.squeeze(out, axes)
        sign = jnp.squeeze(sign, axes)
    return (out, sign) if return_sign else out


def softmax(x: Any, axis: Any = -1, where: Any = None, initial: Any = -np.inf) -> Any:
    """exp(x - max) normalized along `axis`; entries outside `where` are 0 (as in jax.nn.softmax)."""
    (x,) = jnp._promote_inexact(x)
    peak = jnp.max(x, axis=axis, keepdims=True, initial=-np.inf, where=where)
    safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(jnp.subtract(safe, peak))
    result = jnp.divide(unnormalized, jnp.sum(unnormalized, axis=axis, keepdims=True, where=where))
    return result if where is None else jnp.where(where, result, 0)


def log_softmax(x: Any, axis: Any = -1, where: Any = None, initial: Any = None) -> Any:
    """x - logsumexp(x) along `axis`; entries outside `where` are -inf (as in jax.nn.log_softmax)."""
    (x,) = jnp._promote_inexact(x)
    peak = jnp.max(x, axis=axis, keepdims=True, initial=-np.inf, where=where)
    safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = jnp.subtract(safe, peak)
    total = jnp.sum(jnp.exp(shifted), axis=axis, keepdims=True, where=where)
    result = jnp.subtract(shifted, jnp.log(total))
    return result if where is None else jnp.where(where, result, -np.inf)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1, out_sharding: Any = None) -> Any:
    """1 where the new `axis` (of `num_classes` entries) equals x's value, else 0 (float32 by default); the result
    laid out as `out_sharding` when given."""
    if out_sharding is not None:
        return reshard(one_hot(x, num_classes, dtype=dtype, axis=axis), out_sharding)
    x = jnp._lift(x)
    classes = jnp.arange(num_classes)
    expanded = jnp.expand_dims(x, axis)
    shape = [1] * (jnp._ndim(x) + 1)
    shape[axis] = num_classes
    hits = jnp.equal(expanded, jnp.reshape(classes, shape))
    return jnp.astype(hits, dtype if dtype is not None else np.float32)


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """(x - mean) / sqrt(variance + epsilon) along `axis` (as jax.nn.standardize): the mean and variance not given
    are taken over the entries in `where` (all of them by default); the variance is mean(x^2) - mean^2 clipped at 0
    with algorithm "fast", mean((x - mean)^2) with "stable"."""
    (x,) = jnp._promote_inexact(x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        variance = _variance(x, mean, axis, where, algorithm)
    return jnp.multiply(jnp.subtract(x, mean), jnp.power(jnp.add(variance, epsilon), -0.5))


def _variance(x: Any, mean: Any, axis: Any, where: Any, algorithm: str) -> Any:
    """standardize's variance of `x` about `mean` over `axis` and `where`, by `algorithm` ("fast" or "stable")."""
    if algorithm == "fast":
        second_moment = jnp.mean(jnp.square(x), axis, keepdims=True, where=where)
        return jnp.maximum(jnp.subtract(second_moment, jnp.square(mean)), 0)
    if algorithm == "stable":
        return jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
    raise ValueError(f"Unknown algorithm {algorithm!r}. Expected 'fast' or 'stable'.")


def identity(x: Any) -> Any:
    return jnp.asarray(x)


def elu(x: Any, alpha: Any = 1.0) -> Any:
    # the formulas below are jax.nn's, operation for operation, so that dtypes and weak types agree
    x = jnp.asarray(x)
    positive = jnp.greater(x, 0)
    return jnp.where(positive, x, jnp.multiply(alpha, jnp.expm1(jnp.where(positive, 0.0, x))))


def celu(x: Any, alpha: Any = 1.0) -> Any:
    return jnp.add(jnp.maximum(x, 0.0), jnp.multiply(alpha, jnp.expm1(jnp.divide(jnp.minimum(x, 0.0), alpha))))


def selu(x: Any) -> Any:
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return jnp.multiply(scale, elu(x, alpha))


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    x = jnp.asarray(x)
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


def hard_tanh(x: Any) -> Any:
    x = jnp.asarray(x)
    return jnp.where(jnp.greater(x, 1), 1, jnp.where(jnp.less(x, -1), -1, x))


def hard_sigmoid(x: Any) -> Any:
    return jnp.divide(relu6(jnp.add(x, 3.0)), 6.0)


def hard_silu(x: Any) -> Any:
    x = jnp.asarray(x)
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def log_sigmoid(x: Any) -> Any:
    return jnp.negative(softplus(jnp.negative(jnp.asarray(x))))


def mish(x: Any) -> Any:
    x = jnp.asarray(x)
    return jnp.multiply(x, jnp.tanh(softplus(x)))


def soft_sign(x: Any) -> Any:
    x = jnp.asarray(x)
    return jnp.divide(x, jnp.add(jnp.absolute(x), 1))


def squareplus(x: Any, b: Any = 4) -> Any:
    x = jnp.asarray(x)
    return jnp.divide(jnp.add(x, jnp.sqrt(jnp.add(jnp.square(x), b))), 2)


def sparse_plus(x: Any) -> Any:
    x = jnp.asarray(x)
    middle = jnp.divide(jnp.power(jnp.add(x, 1.0), 2), 4)
    return jnp.where(jnp.less_equal(x, -1.0), 0.0, jnp.where(jnp.greater_equal(x, 1.0), x, middle))


def sparse_sigmoid(x: Any) -> Any:
    return jnp.multiply(0.5, jnp.clip(jnp.add(x, 1.0), 0.0, 2.0))


def glu(x: Any, axis: int = -1) -> Any:
    x = jnp.asarray(x)
    size = x.shape[axis]
    if size % 2:
        raise ValueError(f"glu: axis {axis} of size {size} must have an even size.")
    first, second = jnp.split(x, 2, axis)
    return jnp.multiply(first, sigmoid(second))


def log1mexp(x: Any) -> Any:
    """log(1 - exp(-x)), accurate on both sides of log 2."""
    x = jnp.asarray(x)
    small = jnp.log(jnp.negative(jnp.expm1(jnp.negative(x))))
    large = jnp.log1p(jnp.negative(jnp.exp(jnp.negative(x))))
    return jnp.where(jnp.less(x, jnp.log(2.0)), small, large)


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    (x,) = jnp._promote_inexact(x)
    total = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    if where is None:
        count = np.prod([x.shape[d] for d in jnp._axes(axis, x.ndim)])
        return jnp.subtract(total, jnp.log(jnp.asarray(count, dtype=x.dtype)))
    count = jnp.sum(jnp.broadcast_to(where, x.shape), axis=axis, keepdims=keepdims, dtype=x.dtype)
    return jnp.subtract(total, jnp.log(count))


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None, *,
                          scale: Any = None, is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None, local_window_size: Any = None,
                          implementation: Any = None, return_residual: bool = False) -> Any:
    """softmax(q k^T * scale + bias, masked) v over [batch, length, heads, head_dim] arrays (as jax.nn's
    XLA implementation: logits and softmax in float32, grouped-query heads when key has fewer heads); with
    `return_residual`, the pair (that, the logsumexp of the masked logits over the keys, [batch, length, heads],
    through which no gradient flows, as in JAX)."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not available; use 'xla'.")
    if query_seq_lengths is not None or key_value_seq_lengths is not None or local_window_size is not None:
        raise NotImplementedError("dot_product_attention: sequence lengths and local windows are not supported.")
    query, key, value = jnp._promote_inexact(query, key, value)
    unbatched = query.ndim == 3
    if unbatched:
        query, key, value = (jnp.expand_dims(t, 0) for t in (query, key, value))
    batch, q_len, heads, head_dim = query.shape
    _, kv_len, kv_heads, _ = key.shape
    if heads % kv_heads:
        raise ValueError(f"dot_product_attention: {heads} query heads are not a multiple of {kv_heads} key heads.")
    groups = heads // kv_heads
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale
    grouped = jnp.reshape(query, (batch, q_len, kv_heads, groups, head_dim))
    logits = jnp.einsum("btkgh,bskh->bkgts", grouped, key)
    logits = jnp.astype(jnp.reshape(logits, (batch, heads, q_len, kv_len)), np.float32)
    logits = jnp.multiply(logits, np.float32(scale))
    if bias is not None:
        bias = jnp.asarray(bias)
        logits = jnp.add(logits, jnp.astype(bias if not unbatched else jnp.expand_dims(bias, 0), np.float32))
    keep = None
    if mask is not None:
        mask = jnp.asarray(mask)
        keep = jnp.astype(mask if not unbatched else jnp.expand_dims(mask, 0), np.bool_)
    if is_causal:
        causal = np.tril(np.ones((q_len, kv_len), np.bool_))
        keep = causal if keep is None else jnp.logical_and(keep, causal)
    if keep is not None:
        logits = jnp.where(keep, logits, np.float32(0.7 * np.finfo(np.float32).min))
    probs = jnp.astype(softmax(logits, axis=-1), query.dtype)
    probs = jnp.reshape(probs, (batch, kv_heads, groups, q_len, kv_len))
    encoded = jnp.reshape(jnp.einsum("bkgts,bskh->btkgh", probs, value), (batch, q_len, heads, head_dim))
    if not return_residual:
        return encoded[0] if unbatched else encoded
    # JAX returns the residual for kernels' backward passes; no gradient flows through it (it is 0 in JAX too)
    residual = stop_gradient(jnp.astype(jnp.transpose(logsumexp(logits, axis=-1), (0, 2, 1)), query.dtype))
    return (encoded[0], residual[0]) if unbatched else (encoded, residual)
