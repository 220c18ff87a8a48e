"""meshax.nn: activation functions and friends, written with meshax.numpy."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import numpy_api as jnp
from . import primitives as P


def relu(x: Any) -> Any:
    return jnp.maximum(x, 0)


def relu6(x: Any) -> Any:
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


def sigmoid(x: Any) -> Any:
    (x,) = jnp._promote_inexact(x)
    return P.UNARY["logistic"].bind(x)


def silu(x: Any) -> Any:
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
    (a,) = jnp._promote_inexact(a)
    peak = jnp.max(a, axis=axis, keepdims=True, initial=-np.inf, where=where)
    peak = jnp.where(jnp.isfinite(peak), peak, 0)
    shifted = jnp.exp(jnp.subtract(a, peak))
    if b is not None:
        shifted = jnp.multiply(shifted, b)
    total = jnp.sum(shifted, axis=axis, keepdims=True, where=where)
    sign = jnp.sign(total)
    out = jnp.add(jnp.log(jnp.absolute(total)), peak)
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


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    x = jnp._lift(x)
    classes = jnp.arange(num_classes)
    expanded = jnp.expand_dims(x, axis)
    shape = [1] * (jnp._ndim(x) + 1)
    shape[axis] = num_classes
    hits = jnp.equal(expanded, jnp.reshape(classes, shape))
    return jnp.astype(hits, dtype if dtype is not None else np.float32)


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: float = 1e-5) -> Any:
    mean = jnp.mean(x, axis, keepdims=True) if mean is None else mean
    variance = jnp.var(x, axis, keepdims=True) if variance is None else variance
    return jnp.multiply(jnp.subtract(x, mean), jnp.power(jnp.add(variance, epsilon), -0.5))
