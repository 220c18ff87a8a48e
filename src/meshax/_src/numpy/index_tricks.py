"""meshax.numpy's print options (NumPy's, as JAX's), elementwise functions composed from the ufuncs (angle,
bitwise_count, frexp, gcd, lcm, spacing), dtype kinds (isdtype) and index helpers (ix_, *_indices_from,
unravel_index, ravel_multi_index, fill_diagonal)."""
from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import finfo, issubdtype
from ..tree.tree_util import tree_map
from .promotion import ArrayLike, _cast, _dtype, _promote, _promote_inexact, _shape, _weak
from .ufuncs import (_where, absolute, add, arctan2, astype, bitwise_and, clip, equal, exp2, floor, floor_divide,
                     greater_equal, imag, isfinite, less, log2, multiply, nextafter, not_equal, rad2deg, real,
                     remainder, right_shift, signbit, subtract)
from .shape_ops import broadcast_to, expand_dims, ravel, reshape
from .creation import arange, asarray, diag_indices, indices, tril_indices, triu_indices, zeros, zeros_like
from .indexing import take

__all__ = ["angle", "apply_over_axes", "array_str", "bitwise_count", "diag_indices_from", "fill_diagonal", "frexp", "frombuffer", "fromfunction", "fromiter",
           "fromstring", "gcd", "get_printoptions",
           "isdtype", "ix_", "lcm", "printoptions", "ravel_multi_index", "resize", "set_printoptions", "spacing",
           "tril_indices_from", "triu_indices_from", "unravel_index"]

# Arrays print through NumPy, so NumPy's print options are theirs (as in JAX).
get_printoptions = np.get_printoptions


def set_printoptions(*args: Any, **kwargs: Any) -> None:
    """NumPy's set_printoptions (JAX 0.12's alias takes *args, **kwargs and passes them on)."""
    return np.set_printoptions(*args, **kwargs)


printoptions = np.printoptions


def array_str(a: ArrayLike, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    """The data of `a` as NumPy prints it (no type name)."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    """An array of the values in a bytes-like `buffer` (as NumPy reads them), in JAX's dtype for `dtype`."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Any:
    """An array of the numbers in the text `string`, separated by `sep`."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromiter(*args: Any, **kwargs: Any) -> Any:
    """Refused, as in JAX: consuming an iterator is a side effect that jit would run only once."""
    raise NotImplementedError("jnp.fromiter() is not implemented because it may be non-pure and thus unsafe for use "
                              "with jit; use jnp.asarray(np.fromiter(...)) instead.")


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """`function` called once on the coordinate grids (of `dtype`) of an array of `shape`; a result that does not
    depend on the coordinates is broadcast to `shape`, as JAX's (mapped over each coordinate) gives it."""
    dims = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    result = function(*indices(dims, dtype=dtype), **kwargs)
    return tree_map(lambda leaf: broadcast_to(leaf, dims) if np.ndim(leaf) == 0 else leaf, result)


def angle(z: ArrayLike, deg: bool = False) -> Any:
    """The argument of each (complex) element, in radians or, with `deg`, degrees."""
    (z,) = _promote_inexact(z)
    if issubdtype(aval_of(z).dtype, np.complexfloating):
        result = arctan2(imag(z), real(z))
    else:  # a real argument's angle is strongly typed (as JAX's), a complex one's keeps its weak type
        result = arctan2(zeros_like(z), z)
        result = _cast(result, aval_of(result).dtype, False)
    return rad2deg(result) if deg else result


def bitwise_count(x: ArrayLike, /) -> Any:
    """The number of set bits of each element's absolute value, as uint8 (as JAX's)."""
    (x,) = _promote(x)
    dtype = aval_of(x).dtype
    if not (issubdtype(dtype, np.integer) or dtype == np.bool_):
        raise TypeError(f"bitwise_count requires integer or boolean arguments; got {dtype}.")
    bits = 1 if dtype == np.bool_ else dtype.itemsize * 8
    unsigned = np.dtype(f"uint{max(bits, 8)}")
    u = astype(absolute(x) if issubdtype(dtype, np.signedinteger) else x, unsigned)
    count = zeros_like(u)
    for shift in range(bits):  # one step per bit of the type, never per element
        count = add(count, bitwise_and(right_shift(u, _cast(shift, unsigned)), _cast(1, unsigned)))
    return astype(count, np.uint8)


def frexp(x: ArrayLike, /) -> tuple[Any, Any]:
    """Each element as mantissa * 2**exponent with 0.5 <= |mantissa| < 1 (0, inf and nan have exponent 0)."""
    (x,) = _promote_inexact(x)
    dtype = aval_of(x).dtype
    if issubdtype(dtype, np.complexfloating):
        raise TypeError("frexp does not support complex dtypes; apply it to the real and imaginary parts.")
    weak = _weak(x)
    # subnormal inputs flushed to signed zero first, as JAX 0.12's frexp does
    x = _where(less(absolute(x), _cast(finfo(dtype).tiny, dtype, weak)),
               _where(signbit(x), _cast(-0.0, dtype, weak), _cast(0.0, dtype, weak)), x)
    regular = _regular(x)
    magnitude = _where(regular, absolute(x), _cast(1, dtype, weak))
    exponent = add(floor(log2(magnitude)), _cast(1, dtype, weak))
    mantissa = _scaled(magnitude, exponent)
    exponent = _where(greater_equal(mantissa, 1), add(exponent, _cast(1, dtype, weak)), exponent)
    exponent = _where(less(mantissa, _cast(0.5, dtype, weak)), subtract(exponent, _cast(1, dtype, weak)),
                      exponent)
    mantissa = _scaled(magnitude, exponent)
    mantissa = _where(signbit(x), multiply(mantissa, _cast(-1, dtype, weak)), mantissa)
    mantissa = _cast(_where(regular, mantissa, x), dtype, False)  # never weak, as JAX 0.12's
    return mantissa, astype(_where(regular, exponent, _cast(0, dtype, weak)), np.int32)


def _regular(x: Any) -> Any:
    """Whether each element is finite and nonzero."""
    return bitwise_and(isfinite(x), not_equal(x, _cast(0, aval_of(x).dtype, _weak(x))))


def _scaled(magnitude: Any, exponent: Any) -> Any:
    """magnitude / 2**exponent, in two halves so that neither power of two overflows nor underflows."""
    half = floor_divide(exponent, 2)
    return multiply(multiply(magnitude, exp2(-half)), exp2(subtract(half, exponent)))


def _euclid_steps(dtype: np.dtype) -> int:
    """An upper bound on Euclid's steps for operands of `dtype` (Lamé: about 1.44 per bit, plus slack)."""
    return int(1.45 * dtype.itemsize * 8) + 2


def gcd(x1: ArrayLike, x2: ArrayLike) -> Any:
    """The greatest common divisor of the absolute values, elementwise (integers only)."""
    x1, x2 = _promote(x1, x2)
    dtype = aval_of(x1).dtype
    if not issubdtype(dtype, np.integer):
        raise ValueError(f"Arguments to jax.numpy.gcd must be integers; got {dtype}.")
    a, b = absolute(x1), absolute(x2)
    zero, one = _cast(0, dtype, _weak(x1)), _cast(1, dtype, _weak(x1))
    for _ in range(_euclid_steps(dtype)):  # a fixed number of steps, each over all elements at once
        done = equal(b, zero)
        a, b = _where(done, a, b), _where(done, zero, remainder(a, _where(done, one, b)))
    return a


def lcm(x1: ArrayLike, x2: ArrayLike) -> Any:
    """The least common multiple of the absolute values, elementwise (0 if either is 0)."""
    x1, x2 = _promote(x1, x2)
    divisor = gcd(x1, x2)
    zero = _cast(0, aval_of(divisor).dtype, _weak(divisor))
    safe = _where(equal(divisor, zero), _cast(1, aval_of(divisor).dtype, _weak(divisor)), divisor)
    return _where(equal(divisor, zero), zero, multiply(absolute(x1), floor_divide(absolute(x2), safe)))


def spacing(x: ArrayLike, /) -> Any:
    """The distance from each element to the next representable number away from zero (signed like it)."""
    (x,) = _promote_inexact(x)
    dtype = aval_of(x).dtype
    if issubdtype(dtype, np.complexfloating):
        raise TypeError("spacing does not support complex dtypes.")
    weak = _weak(x)
    if dtype == np.float16:  # JAX's float16 spacing always steps towards +inf (so it is never negative)
        away = _cast(np.inf, dtype, weak)
    else:
        away = _where(signbit(x), _cast(-np.inf, dtype, weak), _cast(np.inf, dtype, weak))
    result = subtract(nextafter(x, away), x)
    if dtype != np.float16:  # a subnormal spacing flushes to zero (runtime/denormals.py): as JAX, give instead
        smallest = finfo(dtype).smallest_subnormal  # the smallest subnormal, signed like x
        # made here, in `dtype`: converted from a float64 inside a computation it would flush to zero too
        signed = _where(signbit(x), np.array(-smallest, dtype), np.array(smallest, dtype))
        result = _where(equal(result, _cast(0, dtype, weak)), signed, result)
    return _cast(result, dtype, False)


_KINDS = {"bool": (np.bool_,), "signed integer": (np.signedinteger,), "unsigned integer": (np.unsignedinteger,),
          "integral": (np.integer,), "real floating": (np.floating,), "complex floating": (np.complexfloating,),
          "numeric": (np.integer, np.inexact)}


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether `dtype` is of `kind`: a dtype, one of the array API's kind names, or a tuple of those."""
    dtype = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"Unrecognized kind={k!r} expected one of {list(_KINDS)}, or a compatible input "
                                 f"for jnp.dtype()")
            if dtype != np.bool_ or k == "bool":
                if any(issubdtype(dtype, parent) for parent in _KINDS[k]):
                    return True
        elif isinstance(k, (np.dtype, type)) or hasattr(k, "dtype"):
            if dtype == np.dtype(k):
                return True
        else:
            raise TypeError(f"Expected kind to be a dtype, string, or tuple; got kind={k!r}")
    return False


def ix_(*args: ArrayLike) -> tuple[Any, ...]:
    """Open-mesh index arrays: the i-th argument (1-D) reshaped to lie along axis i of len(args) axes."""
    results = []
    for i, a in enumerate(args):
        a = asarray(a)
        if len(_shape(a)) != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {_shape(a)}")
        if aval_of(a).dtype == np.bool_:
            raise TypeError("Boolean arguments to jax.numpy.ix_ are not supported; pass jnp.nonzero(mask)[0].")
        results.append(reshape(a, tuple(-1 if j == i else 1 for j in range(len(args)))))
    return tuple(results)


def _shape_of(arr: Any) -> tuple[int, ...]:
    return tuple(arr.shape) if hasattr(arr, "shape") else np.shape(arr)


def diag_indices_from(arr: ArrayLike) -> tuple[Any, ...]:
    """The indices of the main diagonal of `arr`, whose dimensions must all be equal (and at least 2)."""
    shape = _shape_of(arr)
    if len(shape) < 2:
        raise ValueError(f"input array must be at least 2-d; got shape {shape}.")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))


def _matrix_shape(arr: Any) -> tuple[int, int]:
    shape = _shape_of(arr)
    if len(shape) != 2:
        raise ValueError("Only 2-D inputs are accepted")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """The indices of the lower triangle (below diagonal `k`) of the 2-D `arr`."""
    n, m = _matrix_shape(arr)
    return tril_indices(n, k=k, m=m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    """The indices of the upper triangle (above diagonal `k`) of the 2-D `arr`."""
    n, m = _matrix_shape(arr)
    return triu_indices(n, k=k, m=m)


def unravel_index(indices: ArrayLike, shape: Sequence[int]) -> tuple[Any, ...]:
    """The coordinates in `shape` of each flat index; negative indices count from the end and out-of-range ones
    are clipped (as JAX's, which cannot raise)."""
    dims = tuple(operator.index(d) for d in shape)
    (indices,) = _promote(indices)
    dtype, weak = aval_of(indices).dtype, _weak(indices)
    if not issubdtype(dtype, np.integer):
        raise TypeError(f"unravel_index requires integer indices; got {dtype}.")
    size = int(np.prod(dims, dtype=np.int64))
    flat = _where(less(indices, _cast(0, dtype, weak)), add(indices, _cast(size, dtype, weak)), indices)
    flat = clip(flat, _cast(0, dtype, weak), _cast(max(size - 1, 0), dtype, weak))
    coordinates = []
    for d in reversed(dims):
        coordinates.append(remainder(flat, _cast(d, dtype, weak)) if d else flat)
        flat = floor_divide(flat, _cast(d, dtype, weak)) if d else flat
    return tuple(reversed(coordinates))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int], mode: str = "raise",
                      order: str = "C", *, dtype: Any = None) -> Any:
    """The flat index in an array of shape `dims` of each coordinate tuple; out-of-range coordinates raise (known
    values only), wrap or clip as `mode` says."""
    dims = tuple(operator.index(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index got {len(multi_index)} index arrays for {len(dims)} dimensions; pass "
                         f"one per dimension.")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"invalid mode={mode!r}; expected one of 'raise', 'wrap', 'clip'.")
    if order not in ("C", "F"):
        raise ValueError(f"invalid order={order!r}; expected 'C' or 'F'.")
    coordinates = _promote(*multi_index)
    for c in coordinates:
        if not issubdtype(aval_of(c).dtype, np.integer):
            raise ValueError(f"ravel_multi_index needs integer coordinates; got dtype={aval_of(c).dtype}.")
    out = _dtype(dtype) if dtype is not None else aval_of(coordinates[0]).dtype if coordinates else _dtype(int)
    if not issubdtype(out, np.integer):
        raise ValueError(f"dtype={out} is not an integer type; pass an integer dtype.")
    coordinates = [astype(c, out) for c in coordinates]
    coordinates = [_bounded(c, d, mode) for c, d in zip(coordinates, dims)]
    axes = range(len(dims)) if order == "F" else reversed(range(len(dims)))
    result, stride = None, 1
    for axis in axes:
        term = multiply(coordinates[axis], _cast(stride, out))
        result = term if result is None else add(result, term)
        stride *= dims[axis]
    return asarray(0, dtype=out) if result is None else result


def _bounded(c: Any, size: int, mode: str) -> Any:
    """Coordinate `c` brought into [0, size) as `mode` says (checking known values for 'raise')."""
    dtype = aval_of(c).dtype
    if mode == "wrap":
        return remainder(c, _cast(size, dtype))
    if mode == "clip":
        return clip(c, _cast(0, dtype), _cast(size - 1, dtype))
    try:
        value = np.asarray(c)
    except Exception as error:
        raise ValueError("ravel_multi_index with mode='raise' needs known index values (they are traced here); "
                         "use mode='wrap' or mode='clip' under jit.") from error
    if np.any((value < 0) | (value >= size)):
        raise ValueError("invalid entry in coordinates array")
    return c


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *, inplace: bool = True) -> Any:
    """A copy of `a` with its main diagonal set to `val` (repeated as needed); `inplace=False` is required."""
    if inplace:
        raise NotImplementedError("JAX arrays are immutable, must use inplace=False")
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    a = asarray(a)
    shape = _shape(a)
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(shape)
    val = astype(asarray(val), aval_of(a).dtype)
    if len(_shape(val)) != 0:
        flat = ravel(val)
        val = take(flat, remainder(arange(n), _shape(flat)[0])) if _shape(flat)[0] else flat
    return a.at[diag_indices(n, len(shape))].set(val)


def resize(a: ArrayLike, new_shape: Any) -> Any:
    """An array of `new_shape` filled with `a`'s elements in order, repeated as needed (zeros if `a` is empty)."""
    dims = (operator.index(new_shape),) if np.ndim(new_shape) == 0 else tuple(operator.index(d) for d in new_shape)
    if any(d < 0 for d in dims):
        raise ValueError("all elements of `new_shape` must be non-negative")
    flat = ravel(asarray(a))
    size, available = int(np.prod(dims, dtype=np.int64)), _shape(flat)[0]
    if available == 0:
        return zeros(dims, aval_of(flat).dtype)
    return reshape(take(flat, remainder(arange(size), available)), dims)


def apply_over_axes(func: Callable[[Any, int], Any], a: ArrayLike, axes: Sequence[int]) -> Any:
    """`func(a, axis)` applied for each axis in turn, each result kept at `a`'s rank (a reduced axis restored)."""
    a = asarray(a)
    for axis in axes:
        b = asarray(func(a, axis))
        if len(_shape(b)) == len(_shape(a)) - 1:
            b = expand_dims(b, axis)
        elif len(_shape(b)) != len(_shape(a)):
            raise ValueError("function is not returning an array of the correct shape")
        a = b
    return a
