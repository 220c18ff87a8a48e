"""Weight initializers (as jax.nn.initializers), drawn with meshax.random so that they equal JAX's for the same key.

An initializer is called as `init(key, shape, dtype=None, out_sharding=None)`; the `dtype` default is the one
given to the function that built it, else the default float type. `zeros` and `ones` are initializers
themselves; the others are built by functions of their hyperparameters. The values are JAX's wherever
meshax.random's distributions are (uniform bit for bit, normal and truncated normal to float rounding, see
meshax.random); `orthogonal` takes its QR factor by Gram-Schmidt rather than LAPACK's Householder
reflections, so it agrees with JAX's to rounding for well-conditioned draws (any random matrix, nearly always).
`out_sharding` takes a `Sharding` (a bare PartitionSpec needs JAX's mesh context, which meshax has not).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Literal, Protocol, Sequence, runtime_checkable

import numpy as np

import meshax.numpy as jnp

from ..core import dtypes
from .. import random
from ..arrays.placement import device_put
from ..sharding.shardings import Sharding

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones", "orthogonal",
    "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]

Axes = int | Sequence[int]

# Standard deviation of a standard normal truncated to (-2, 2), and of a complex standard normal whose modulus is
# truncated to 2: variance_scaling divides by them so that the truncated draws have the variance asked for.
_TRUNCATED_STDDEV = 0.87962566103423978
_COMPLEX_TRUNCATED_STDDEV = 0.95311164380491208


@runtime_checkable
class Initializer(Protocol):
    """What the functions of this module build: `init(key, shape, dtype=None, out_sharding=None) -> Array`."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
        ...


def _dtype(dtype: Any) -> Any:
    return dtypes.default_float_dtype() if dtype is None else dtype


def _shape(shape: Any) -> tuple[int, ...]:
    try:
        return tuple(operator.index(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    except TypeError:
        raise TypeError(f"An initializer's shape must be a sequence of integers, got {shape!r}.") from None


def _placed(x: Any, out_sharding: Any) -> Any:
    """`x` on `out_sharding` (a Sharding), or as it is if that is None."""
    if out_sharding is None:
        return x
    if not isinstance(out_sharding, Sharding):
        raise TypeError(f"out_sharding must be a Sharding such as a NamedSharding, got {out_sharding!r}; meshax has "
                        "no mesh context to complete a bare PartitionSpec.")
    return device_put(x, out_sharding)


def zeros(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of zeros (the key is ignored)."""
    return _placed(jnp.zeros(_shape(shape), _dtype(dtype)), out_sharding)


def ones(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of ones (the key is ignored)."""
    return _placed(jnp.ones(_shape(shape), _dtype(dtype)), out_sharding)


def constant(value: Any, dtype: Any = None) -> Initializer:
    """An initializer filling its arrays with `value`."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        return _placed(jnp.full(_shape(shape), value, dtype=_dtype(dtype)), out_sharding)
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing uniformly from [0, scale)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dtype = _dtype(dtype)
        return _placed(random.uniform(key, _shape(shape), dtype) * jnp.array(scale, dtype), out_sharding)
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """An initializer drawing from a normal distribution of mean 0 and standard deviation `stddev`."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dtype = _dtype(dtype)
        return _placed(random.normal(key, _shape(shape), dtype) * jnp.array(stddev, dtype), out_sharding)
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0, upper: Any = 2.0) -> Initializer:
    """An initializer drawing `stddev` times a standard normal truncated to (lower, upper).

    Unlike variance_scaling, it does not correct `stddev` for the truncation.
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        dtype = _dtype(dtype)
        draws = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return _placed(draws * jnp.array(stddev, dtype), out_sharding)
    return init


def _size(shape: tuple[int, ...], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[a] for a in axes)


def _compute_fans(shape: tuple[int, ...], in_axis: Axes = -2, out_axis: Axes = -1,
                  batch_axis: Axes = ()) -> tuple[float, float]:
    """(fan_in, fan_out) of a weights shape: the input and output sizes times the receptive field's (every
    axis not named as input, output or batch)."""
    if in_axis == -2 and len(shape) < 2:
        raise ValueError(f"The fans of a weights shape {shape} of rank {len(shape)} are unknown with the default "
                         "in_axis=-2; use a shape of rank 2 or more, or give in_axis.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive_field = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive_field, out_size * receptive_field


def _real_dtype(dtype: Any) -> np.dtype:
    return np.zeros((), dtype).real.dtype


def _complex_uniform(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Uniform draws from the complex disk of mean 0 and variance 1."""
    key_r, key_theta = random.split(key)
    real = _real_dtype(dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(dtype)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...], dtype: Any) -> Any:
    """Complex normal draws of variance 1 (before truncation) whose modulus is below `upper`."""
    key_r, key_theta = random.split(key)
    real = _real_dtype(dtype)
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), dtype))) * random.uniform(key_r, shape, real).astype(dtype)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * jnp.exp(1j * theta)


def _rounded(x: Any, dtype: Any) -> Any:
    """`x` rounded to `dtype`: meshax.numpy returns bfloat16 square roots and quotients in float32, where JAX rounds
    them back to bfloat16 (the float32 result, rounded: this)."""
    return jnp.astype(x, dtypes.canonicalize_dtype(dtype))


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale: Any, mode: Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"],
                     distribution: Literal["truncated_normal", "normal", "uniform"], in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """An initializer of variance scale / n, n the fan of `mode` (fan_in, fan_out, their mean or geometric mean).

    Axes not named in in_axis, out_axis or batch_axis count as the receptive field (a convolution's kernel).
    `distribution` is "truncated_normal" (truncated at two standard deviations, rescaled to the variance),
    "normal" or "uniform" (an interval, or the disk for complex dtypes).
    """
    if mode not in _MODES:
        raise ValueError(f"variance_scaling's mode {mode!r} is unknown; use one of {', '.join(_MODES)}.")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling's distribution {distribution!r} is unknown; use one of "
                         f"{', '.join(_DISTRIBUTIONS)}.")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        shape, dtype = _shape(shape), _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = jnp.array(scale / denominator, dtype=dtype)
        is_real = dtypes.is_floating(dtypes.canonicalize_dtype(dtype))
        if distribution == "truncated_normal" and is_real:
            stddev = _rounded(_rounded(jnp.sqrt(variance), dtype) / jnp.array(_TRUNCATED_STDDEV, dtype), dtype)
            out = random.truncated_normal(key, -2, 2, shape, dtype) * stddev
        elif distribution == "truncated_normal":
            stddev = jnp.sqrt(variance) / jnp.array(_COMPLEX_TRUNCATED_STDDEV, dtype)
            out = _complex_truncated_normal(key, 2, shape, dtype) * stddev
        elif distribution == "normal":
            out = random.normal(key, shape, dtype) * _rounded(jnp.sqrt(variance), dtype)
        elif is_real:
            out = random.uniform(key, shape, dtype, -1) * _rounded(jnp.sqrt(3 * variance), dtype)
        else:
            out = _complex_uniform(key, shape, dtype) * jnp.sqrt(variance)
        return _placed(out, out_sharding)
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Glorot (Xavier) uniform: variance_scaling(1.0, "fan_avg", "uniform")."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Glorot (Xavier) normal: variance_scaling(1.0, "fan_avg", "truncated_normal")."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """LeCun uniform: variance_scaling(1.0, "fan_in", "uniform")."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """LeCun normal: variance_scaling(1.0, "fan_in", "truncated_normal")."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """He (Kaiming) uniform: variance_scaling(2.0, "fan_in", "uniform")."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """He (Kaiming) normal: variance_scaling(2.0, "fan_in", "truncated_normal")."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def _orthonormal_columns(z: Any) -> Any:
    """The Q of z = QR whose R has a real positive diagonal (z of shape (n, m), n >= m): classical Gram-Schmidt,
    each column orthogonalized twice against the previous ones, which keeps float32 columns orthogonal."""
    columns: list[Any] = []
    for j in range(z.shape[1]):
        v = z[:, j]
        if columns:
            q = jnp.stack(columns, axis=1)
            for _ in range(2):
                v = v - jnp.matmul(q, jnp.matmul(jnp.conj(q).T, v))
        columns.append(v / jnp.sqrt(jnp.real(jnp.vdot(v, v))))
    return jnp.stack(columns, axis=1)


def _check_no_sharding(out_sharding: Any, what: str) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"{what} does not take an out_sharding (as in JAX), got {out_sharding!r}; "
                                  "device_put its result instead.")


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of uniformly distributed (Haar) orthogonal matrices times `scale`.

    The array is a matrix of its `column_axis` against all other axes together; its rows or its columns,
    whichever are fewer, are orthonormal.
    """
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _check_no_sharding(out_sharding, "orthogonal")
        shape, dtype = _shape(shape), _dtype(dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal needs a shape of rank 2 or more, got {shape}.")
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = _orthonormal_columns(random.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), dtype))
        if n_rows < n_cols:
            q = q.T
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.array(scale, dtype) * _rounded(jnp.moveaxis(q, -1, column_axis), dtype)
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """An initializer of convolution kernels (rank 3, 4 or 5) that are zero except for an orthogonal matrix
    (as `orthogonal` makes it, over the last two axes) at the kernel's centre."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _check_no_sharding(out_sharding, "delta_orthogonal")
        shape, dtype = _shape(shape), _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal needs a shape of rank 3, 4 or 5, got {shape}.")
        if shape[-1] < shape[-2]:
            raise ValueError(f"delta_orthogonal needs as many outputs as inputs (shape[-1] >= shape[-2]), got shape "
                             f"{shape}.")
        matrix = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return jnp.zeros(shape, dtype).at[centre].set(matrix)
    return init
