"""meshax.image: resizing by separable kernels, written with meshax.numpy.

Each resized dimension is one contraction of the image with an (input size, output size) weight matrix. Output
pixel j of a dimension with scale s and translation t samples the input at the centre-aligned coordinate
f_j = (j + 0.5 - t) / s - 0.5; input pixel i gets weight k((i - f_j) / w), where k is the method's kernel and w
widens it by 1/s when antialiasing a downsample. Each column is normalised to sum to one, and columns whose
sample lies outside the input (f_j < -0.5 or f_j > size - 0.5) are zero.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

from .. import numpy as jnp
from ..lax.composite_ops import Precision


class ResizeMethod(enum.Enum):
    """The interpolation kernels `resize` and `scale_and_translate` offer."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        """The method a name such as 'bilinear' or 'lanczos3' stands for."""
        method = _NAMES.get(s)
        if method is None:
            raise ValueError(f'Unknown resize method "{s}"')
        return method


_NAMES = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR, "bilinear": ResizeMethod.LINEAR,
          "trilinear": ResizeMethod.LINEAR, "triangle": ResizeMethod.LINEAR, "cubic": ResizeMethod.CUBIC,
          "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC, "lanczos3": ResizeMethod.LANCZOS3,
          "lanczos5": ResizeMethod.LANCZOS5, "area": ResizeMethod.AREA}


def _method(method: Any) -> ResizeMethod:
    """`method` as a ResizeMethod (a name or a member)."""
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    if not isinstance(method, ResizeMethod):
        raise TypeError(f"method must be a string or a jax.image.ResizeMethod, got {method!r}.")
    return method


def _triangle(x: Any) -> Any:
    """Linear interpolation's tent: 1 - |x| on [-1, 1]."""
    return jnp.maximum(0.0, 1.0 - jnp.abs(x))


def _keys_cubic(x: Any, a: float = -0.5) -> Any:
    """Keys' cubic convolution kernel with parameter `a` (support [-2, 2])."""
    x = jnp.abs(x)
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return jnp.where(x <= 1.0, inner, jnp.where(x < 2.0, outer, 0.0))


def _lanczos(radius: float) -> Callable[[Any], Any]:
    """The Lanczos kernel sinc(x) sinc(x / radius) on [-radius, radius]."""
    def kernel(x: Any) -> Any:
        x = jnp.abs(x)
        near = x < 1e-3  # the closed form's limit at 0 is 1; keep the division away from 0 / 0
        safe = jnp.where(near, 1.0, x)
        value = radius * jnp.sin(np.pi * safe) * jnp.sin(np.pi * safe / radius) / (np.pi ** 2 * safe * safe)
        return jnp.where(x > radius, 0.0, jnp.where(near, 1.0, value))
    return kernel


_KERNELS = {ResizeMethod.LINEAR: _triangle, ResizeMethod.CUBIC: _keys_cubic,
            ResizeMethod.CUBIC_PYTORCH: _keys_cubic, ResizeMethod.LANCZOS3: _lanczos(3.0),
            ResizeMethod.LANCZOS5: _lanczos(5.0)}


def _clamped_cubic(in_size: int, sample: Any) -> Any:
    """PyTorch's bicubic weights without antialiasing: Keys' kernel with a = -0.75 over the four taps around
    each sample; taps on the two pixels of padding past each edge fold onto the edge pixel, farther ones drop."""
    taps = jnp.floor(sample)[None, :] + np.arange(-1.0, 3.0, dtype=np.float32)[:, None]
    reach = (taps >= -2) & (taps <= in_size + 1)  # two pixels of edge padding on each side
    tap_weights = jnp.where(reach, _keys_cubic(taps - sample[None, :], a=-0.75), 0.0)
    pixel = jnp.clip(taps, 0, in_size - 1)
    hits = jnp.arange(in_size, dtype=np.float32)[:, None, None] == pixel[None]
    return _normalised(jnp.sum(jnp.where(hits, tap_weights[None], 0.0), axis=1))


def _normalised(weights: Any) -> Any:
    """`weights` with each column divided by its sum (columns summing to about zero become zero)."""
    total = jnp.sum(weights, axis=0, keepdims=True)
    tiny = 1000.0 * float(np.finfo(np.float32).eps)
    return jnp.where(jnp.abs(total) > tiny, weights / jnp.where(total == 0, 1.0, total), 0.0)


def _weights(in_size: int, out_size: int, scale: Any, translation: Any, method: ResizeMethod,
             antialias: bool) -> Any:
    """The float32 (in_size, out_size) weight matrix of one resized dimension."""
    inv_scale = 1.0 / scale
    sample = (jnp.arange(out_size, dtype=np.float32) + 0.5 - translation) * inv_scale - 0.5
    offset = jnp.arange(in_size, dtype=np.float32)[:, None] - sample[None, :]
    if method is ResizeMethod.CUBIC_PYTORCH and not antialias:
        return _clamped_cubic(in_size, sample)
    if method is ResizeMethod.AREA:
        # the overlap of each input pixel with the output pixel's footprint (half-width inv_scale / 2)
        half = 0.5 * inv_scale
        weights = jnp.maximum(0.0, jnp.minimum(offset + 0.5, half) - jnp.maximum(offset - 0.5, -half))
    else:
        width = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
        weights = _KERNELS[method](offset / width)
    weights = _normalised(weights)
    inside = (sample >= -0.5) & (sample <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0.0).astype(np.float32)


def _contract(image: Any, dim: int, weights: Any, precision: Any) -> Any:
    """`image` with dimension `dim` replaced by its product with the (in, out) matrix `weights`."""
    out = jnp.tensordot(image, weights.astype(image.dtype), axes=([dim], [0]), precision=precision)
    return jnp.moveaxis(out, -1, dim)


def _float_image(image: Any) -> Any:
    """`image` as an inexact array (integers and booleans become float32)."""
    image = jnp.asarray(image)
    if not jnp.issubdtype(image.dtype, np.inexact):
        image = image.astype(np.float32)
    return image


def _check_shape(image: Any, shape: Sequence[int]) -> tuple[int, ...]:
    """`shape` as a tuple, checked to have one entry per dimension of `image`."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {tuple(image.shape)}")
    return shape


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int], scale: Any,
                        translation: Any, method: str | ResizeMethod, antialias: bool = True,
                        precision: Any = Precision.HIGHEST) -> Any:
    """`image` resampled to `shape`: each of `spatial_dims` scaled by `scale[i]` and shifted by
    `translation[i]` output pixels, through the kernel of `method` (not 'nearest')."""
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    image = _float_image(image)
    shape = _check_shape(image, shape)
    scale = jnp.asarray(scale, dtype=np.float32)
    translation = jnp.asarray(translation, dtype=np.float32)
    for i, dim in enumerate(spatial_dims):
        dim = dim % image.ndim
        weights = _weights(image.shape[dim], shape[dim], scale[i], translation[i], method, antialias)
        image = _contract(image, dim, weights, precision)
    return image


def _nearest(image: Any, shape: tuple[int, ...]) -> Any:
    """`image` resized to `shape` by taking, for each output pixel, the input pixel its centre falls in."""
    for dim, (in_size, out_size) in enumerate(zip(image.shape, shape)):
        if in_size == out_size:
            continue
        centres = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * np.float32(in_size / out_size)
        index = np.minimum(np.floor(centres).astype(np.int32), in_size - 1)
        image = jnp.take(image, index, axis=dim)
    return image


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision: Any = Precision.HIGHEST) -> Any:
    """`image` resized to `shape` with the interpolation `method`, antialiasing downsamples when `antialias`."""
    method = _method(method)
    image = jnp.asarray(image)
    shape = _check_shape(image, shape)
    if method is ResizeMethod.NEAREST:
        return _nearest(image, shape)
    image = _float_image(image)
    for dim, (in_size, out_size) in enumerate(zip(image.shape, shape)):
        if in_size == out_size:
            continue
        weights = _weights(in_size, out_size, out_size / in_size, 0.0, method, antialias)
        image = _contract(image, dim, weights, precision)
    return image
