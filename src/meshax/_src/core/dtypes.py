"""JAX's dtype rules over NumPy dtypes: x64 canonicalization, weak types and type promotion.

Conventions, as in JAX:

* With ``jax_enable_x64`` off (the default), the 64-bit types int64, uint64,
  float64 and complex128 are "canonicalized" to their 32-bit counterparts.  The
  flag is read from ``meshax._src.config.config`` every time it matters, never
  cached, so ``config.update("jax_enable_x64", ...)`` takes effect immediately.
* Python scalars ``int``, ``float`` and ``complex`` (the exact types, not
  subclasses such as ``np.float64``) are *weakly typed*: they adopt the dtype
  of the typed operand they are combined with (``int8_array + 3`` stays int8,
  ``float16_array + 1.0`` stays float16).  Python ``bool`` is not weak.  Arrays
  may also carry a weak flag (an attribute ``weak_type``).
* Promotion follows JAX's type-promotion lattice rather than NumPy's value
  based rules.  The lattice (``a -> b`` meaning ``a`` promotes to ``b``):

      bool -> i*
      i*   -> uint8, int8 and the sub-byte integers (int1/2/4, uint1/2/4)
      uint8 -> int16, uint16;  uint16 -> int32, uint32;  uint32 -> int64, uint64
        (with x64 off, uint32 -> int32 instead of int64: as in JAX, uint32 with
        a signed type of at most 32 bits promotes to int32 there)
      int8 -> int16 -> int32 -> int64
      uint64, int64 -> f*
      f*   -> float16, bfloat16, the 4/6/8-bit floats, c*
      float16, bfloat16 -> float32 -> float64, complex64
      float64 -> complex128;  c* -> complex64 -> complex128

  where ``i*``, ``f*`` and ``c*`` are the weak (Python scalar) int, float and
  complex types.  The promotion of two types is their least upper bound; when
  none exists (e.g. int4 with int8, float8_e4m3fn with float16) a
  :class:`TypePromotionError` is raised.

The ml_dtypes extended types (bfloat16, float8_*, int4, ...) take part like NumPy's own: bfloat16 and the
narrow floats are floating types (:func:`issubdtype` says so, where ``np.issubdtype`` does not), int4 etc. integers.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable

import numpy as np

from meshax._src.config import config

import ml_dtypes as _ml_dtypes  # the extended dtypes (bfloat16, float8, int4, ...)

__all__ = [
    "TypePromotionError",
    "bfloat16",
    "canonicalize_dtype",
    "default_complex_dtype",
    "default_float_dtype",
    "default_int_dtype",
    "default_uint_dtype",
    "dtype_of",
    "finfo",
    "iinfo",
    "is_bool",
    "is_complex",
    "is_floating",
    "is_integer",
    "is_signed_integer",
    "is_unsigned_integer",
    "is_weakly_typed",
    "issubdtype",
    "promote_types",
    "result_type",
    "x64_enabled",
]


class TypePromotionError(ValueError):
    """Two or more dtypes have no common type on the promotion lattice."""


# ---------------------------------------------------------------------------
# The set of supported dtypes.

_BOOL = np.dtype(np.bool_)
_INT8, _INT16, _INT32, _INT64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
_UINT8, _UINT16, _UINT32, _UINT64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
_FLOAT16, _FLOAT32, _FLOAT64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
_COMPLEX64, _COMPLEX128 = np.dtype(np.complex64), np.dtype(np.complex128)

# The weak (Python scalar) lattice nodes; concrete dtypes are keyed by their name.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "int*", "float*", "complex*"
_WEAK_NODE_DTYPE = {_WEAK_INT: _INT64, _WEAK_FLOAT: _FLOAT64, _WEAK_COMPLEX: _COMPLEX128}

_PYTHON_SCALAR_DTYPES = {bool: _BOOL, int: _INT64, float: _FLOAT64, complex: _COMPLEX128}
_WEAK_PYTHON_TYPES = (int, float, complex)

# Sub-byte integers and narrow (<16-bit) floats from ml_dtypes: each sits
# directly above the weak type of its kind and promotes to nothing else.
_SUBBYTE_INT_NAMES = ("int1", "uint1", "int2", "uint2", "int4", "uint4")
_NARROW_FLOAT_NAMES = (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
)


def _ml_dtype(name: str) -> np.dtype | None:
    if not hasattr(_ml_dtypes, name):
        return None
    try:
        return np.dtype(getattr(_ml_dtypes, name))
    except TypeError:  # pragma: no cover - not a numpy dtype
        return None


bfloat16: np.dtype | None = _ml_dtype("bfloat16")
_SUBBYTE_INTS = {n: d for n in _SUBBYTE_INT_NAMES if (d := _ml_dtype(n)) is not None}
_NARROW_FLOATS = {n: d for n in _NARROW_FLOAT_NAMES if (d := _ml_dtype(n)) is not None}

# name -> (dtype, category); category is one of "b", "i", "u", "f", "c".
_DTYPES: dict[str, tuple[np.dtype, str]] = {}
for _dt in (_BOOL,):
    _DTYPES[_dt.name] = (_dt, "b")
for _dt in (_INT8, _INT16, _INT32, _INT64):
    _DTYPES[_dt.name] = (_dt, "i")
for _dt in (_UINT8, _UINT16, _UINT32, _UINT64):
    _DTYPES[_dt.name] = (_dt, "u")
for _dt in (_FLOAT16, _FLOAT32, _FLOAT64):
    _DTYPES[_dt.name] = (_dt, "f")
for _dt in (_COMPLEX64, _COMPLEX128):
    _DTYPES[_dt.name] = (_dt, "c")
if bfloat16 is not None:
    _DTYPES["bfloat16"] = (bfloat16, "f")
for _name, _dt in _SUBBYTE_INTS.items():
    _DTYPES[_name] = (_dt, "u" if _name.startswith("u") else "i")
for _name, _dt in _NARROW_FLOATS.items():
    _DTYPES[_name] = (_dt, "f")

# ---------------------------------------------------------------------------
# The promotion lattice.

_EDGES: dict[str, list[str]] = {
    "bool": [_WEAK_INT],
    _WEAK_INT: ["uint8", "int8", *_SUBBYTE_INTS],
    "uint8": ["int16", "uint16"],
    "uint16": ["int32", "uint32"],
    "uint32": ["int64", "uint64"],
    "uint64": [_WEAK_FLOAT],
    "int8": ["int16"],
    "int16": ["int32"],
    "int32": ["int64"],
    "int64": [_WEAK_FLOAT],
    _WEAK_FLOAT: ["float16", *(["bfloat16"] if bfloat16 is not None else []), *_NARROW_FLOATS, _WEAK_COMPLEX],
    "float16": ["float32"],
    "float32": ["float64", "complex64"],
    "float64": ["complex128"],
    _WEAK_COMPLEX: ["complex64"],
    "complex64": ["complex128"],
    "complex128": [],
}
if bfloat16 is not None:
    _EDGES["bfloat16"] = ["float32"]
for _name in (*_SUBBYTE_INTS, *_NARROW_FLOATS):
    _EDGES[_name] = []


def _upper_closure(edges: dict[str, list[str]]) -> dict[str, frozenset[str]]:
    """For every node, the set of nodes it can be promoted to (including itself)."""
    closure: dict[str, frozenset[str]] = {}

    def visit(node: str) -> frozenset[str]:
        if node not in closure:
            above: set[str] = {node}
            for parent in edges[node]:
                above |= visit(parent)
            closure[node] = frozenset(above)
        return closure[node]

    for node in edges:
        visit(node)
    return closure


_UPPER_X64 = _upper_closure(_EDGES)
_UPPER_X32 = _upper_closure({**_EDGES, "uint32": ["int32", "uint64"]})


def _least_upper_bound(nodes: frozenset[str]) -> str:
    """The least node above every node in `nodes`; TypePromotionError if there is none."""
    return _least_upper_bound_in(nodes, x64_enabled())


@functools.lru_cache(maxsize=4096)
def _least_upper_bound_in(nodes: frozenset[str], x64: bool) -> str:
    upper = _UPPER_X64 if x64 else _UPPER_X32
    common = frozenset.intersection(*(upper[n] for n in nodes))
    for candidate in common:
        if upper[candidate] == common:
            return candidate
    names = ", ".join(repr(_node_describe(n)) for n in sorted(nodes, key=_node_sort_key))
    message = f"Input dtypes ({names}) have no implicit type promotion path."
    if any(n in _NARROW_FLOATS for n in nodes):
        message += " Floats narrower than 16 bits are never promoted implicitly."
    elif any(n in _SUBBYTE_INTS for n in nodes):
        message += " Sub-byte integers are never promoted implicitly."
    message += " Convert explicitly, e.g. with x.astype('float32')."
    raise TypePromotionError(message)


def _node_describe(node: str) -> str:
    return {_WEAK_INT: "int", _WEAK_FLOAT: "float", _WEAK_COMPLEX: "complex"}.get(node, node)


def _node_sort_key(node: str) -> str:
    return _node_describe(node)


def _lattice_node(dtype: np.dtype, weak: bool, *, error: type[Exception] = TypeError) -> str:
    """The lattice node of `dtype`; a weak non-bool dtype maps to the weak node of its kind."""
    category = _category(dtype, error=error)
    if weak and category != "b":
        return {"i": _WEAK_INT, "u": _WEAK_INT, "f": _WEAK_FLOAT, "c": _WEAK_COMPLEX}[category]
    return dtype.name


def _category(dtype: np.dtype, *, error: type[Exception] = TypeError) -> str:
    try:
        return _categories[dtype]
    except (KeyError, TypeError):
        pass
    entry = _DTYPES.get(dtype.name) if dtype.isnative or dtype.byteorder == "|" else None
    if entry is None or entry[0] != dtype:
        raise error(f"dtype {dtype!r} is not a valid dtype for meshax type promotion.")
    _categories[entry[0]] = entry[1]
    return entry[1]


# each valid dtype's category, asked for every value traced and promoted (`dtype.name` alone costs 1-2 us: a tenth
# of tracing a small optimizer step)
_categories: dict[np.dtype, str] = {}


# ---------------------------------------------------------------------------
# x64 and canonicalization.


def x64_enabled() -> bool:
    """Whether 64-bit types are enabled (`jax_enable_x64`), read now."""
    return bool(config.read("jax_enable_x64"))


_X32_CANONICAL = {_INT64: _INT32, _UINT64: _UINT32, _FLOAT64: _FLOAT32, _COMPLEX128: _COMPLEX64}


def _to_dtype(dtype: Any) -> np.dtype:
    """np.dtype(dtype), with Python's scalar types mapped platform-independently."""
    if isinstance(dtype, type) and dtype in _PYTHON_SCALAR_DTYPES:
        return _PYTHON_SCALAR_DTYPES[dtype]
    return np.dtype(dtype)


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """The dtype meshax actually uses for `dtype`: 64-bit types become 32-bit unless x64 is on.

    Accepts anything ``np.dtype`` accepts, and the Python types ``bool``, ``int``,
    ``float`` and ``complex`` (which mean the default dtype of their kind).
    """
    dt = _to_dtype(dtype)
    if x64_enabled():
        return dt
    return _X32_CANONICAL.get(dt, dt)


def default_int_dtype() -> np.dtype:
    return _INT64 if x64_enabled() else _INT32


def default_uint_dtype() -> np.dtype:
    return _UINT64 if x64_enabled() else _UINT32


def default_float_dtype() -> np.dtype:
    return _FLOAT64 if x64_enabled() else _FLOAT32


def default_complex_dtype() -> np.dtype:
    return _COMPLEX128 if x64_enabled() else _COMPLEX64


def _default_dtype(category: str) -> np.dtype:
    return {
        "b": _BOOL,
        "i": default_int_dtype(),
        "u": default_uint_dtype(),
        "f": default_float_dtype(),
        "c": default_complex_dtype(),
    }[category]


# ---------------------------------------------------------------------------
# Weak types and the dtype of a value.


def is_weakly_typed(x: Any) -> bool:
    """True for Python int/float/complex scalars and for arrays whose ``weak_type`` is true."""
    if type(x) in _WEAK_PYTHON_TYPES:
        return True
    if type(x) is bool or isinstance(x, type):
        return False
    return bool(getattr(x, "weak_type", False))


def _is_dtype_specifier(x: Any) -> bool:
    return isinstance(x, (np.dtype, str, type))


def _value_dtype(x: Any) -> tuple[np.dtype, bool]:
    """The (uncanonicalized dtype, weak) of a scalar or array value (not a sequence)."""
    tx = type(x)
    if tx is bool:
        return _BOOL, False
    if tx in _WEAK_PYTHON_TYPES:
        return _PYTHON_SCALAR_DTYPES[tx], True
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype), bool(getattr(x, "weak_type", False))
    if isinstance(x, (list, tuple)) or x is None:
        raise TypeError(f"Cannot determine dtype of {x!r}")
    dt = np.asarray(x).dtype
    if dt.kind in "OSUVMm":
        raise TypeError(f"Cannot determine dtype of {x!r}")
    return dt, False


def _canonical(dtype: np.dtype, weak: bool) -> tuple[np.dtype, bool]:
    dt = canonicalize_dtype(dtype)
    _category(dt)  # validate
    return dt, weak and dt != _BOOL


def _iter_leaves(x: Any) -> Iterable[Any]:
    stack = [x]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        else:
            yield item


def dtype_of(x: Any) -> tuple[np.dtype, bool]:
    """The (dtype, weak_type) that ``meshax.numpy.asarray(x)`` has, following JAX.

    * Python ``int``/``float``/``complex`` give the default dtype of their kind, weak;
      Python ``bool`` gives bool, not weak.
    * NumPy scalars and arrays give their dtype, canonicalized, not weak.
    * Objects with a ``dtype`` attribute give it, canonicalized, weak if their
      ``weak_type`` attribute is true.
    * Lists and tuples (nested) give the :func:`result_type` of their leaves, not
      weak (so ``[np.int8(1), 2]`` is int8); an empty one gives the default float.
    """
    if isinstance(x, str):  # a string value, e.g. jnp.asarray("x"): as JAX says it
        raise TypeError(f"Value {x!r:.100} with dtype {np.asarray(x).dtype} is not a valid JAX array type. Only "
                        "arrays of numeric types are supported by JAX.")
    if _is_dtype_specifier(x):
        raise TypeError(
            f"dtype_of expects a value, not the dtype specifier {x!r}; use canonicalize_dtype for that."
        )
    if isinstance(x, (list, tuple)):
        pairs = {_canonical(*_value_dtype(leaf)) for leaf in _iter_leaves(x)}
        if not pairs:
            return default_float_dtype(), False
        return _combine(list(pairs))[0], False
    return _canonical(*_value_dtype(x))


# ---------------------------------------------------------------------------
# Promotion.


def _promotion_node(x: Any) -> str:
    if isinstance(x, type) and x in _WEAK_PYTHON_TYPES:
        return {int: _WEAK_INT, float: _WEAK_FLOAT, complex: _WEAK_COMPLEX}[x]
    return _lattice_node(_to_dtype(x), False, error=ValueError)


def promote_types(a: Any, b: Any) -> np.dtype:
    """The dtype that a binary operation on dtypes `a` and `b` computes in, as ``jnp.promote_types``.

    `a` and `b` are dtype specifiers.  As in JAX the Python types ``int``, ``float``
    and ``complex`` are weak (``promote_types(int, np.int8)`` is int8) and the
    result is *not* canonicalized by the x64 flag (``promote_types(int, float)``
    is float64 either way; the flag only changes uint32 with int8/16/32, which
    gives int32 with x64 off and int64 with it on); apply :func:`canonicalize_dtype` to get the dtype an
    array would actually have, or use :func:`result_type`.
    """
    node = _least_upper_bound(frozenset((_promotion_node(a), _promotion_node(b))))
    return np.dtype(_DTYPES[node][0]) if node in _DTYPES else _WEAK_NODE_DTYPE[node]


def _arg_dtype(x: Any) -> tuple[np.dtype, bool]:
    """The canonical (dtype, weak) of one `result_type` argument."""
    if x is None:
        return _canonical(_FLOAT64, False)
    if isinstance(x, type) and x in _WEAK_PYTHON_TYPES:
        return _canonical(_PYTHON_SCALAR_DTYPES[x], True)
    if _is_dtype_specifier(x):
        try:
            dt = _to_dtype(x)
        except TypeError as e:
            raise TypeError(f"Cannot determine dtype of {x!r}") from e
        return _canonical(dt, False)
    return _canonical(*_value_dtype(x))


def _combine(pairs: list[tuple[np.dtype, bool]]) -> tuple[np.dtype, bool]:
    """Promote canonical (dtype, weak) pairs; the result is canonical."""
    dtypes = {dt for dt, _ in pairs}
    all_weak = all(weak for _, weak in pairs)
    if len(pairs) == 1 or (len(dtypes) == 1 and all_weak):
        out, weak = pairs[0]
    else:
        if all_weak:
            # Promote the strong counterparts, then the result is weak.
            node = _least_upper_bound(frozenset(_lattice_node(dt, False) for dt in dtypes))
            weak = True
        else:
            node = _least_upper_bound(frozenset(_lattice_node(dt, weak) for dt, weak in pairs))
            weak = node in _WEAK_NODE_DTYPE
        out = _DTYPES[node][0] if node in _DTYPES else _WEAK_NODE_DTYPE[node]
    weak = weak and out != _BOOL
    if weak:
        return _default_dtype(_category(out)), True
    return canonicalize_dtype(out), False


def result_type(*args: Any) -> tuple[np.dtype, bool]:
    """The (dtype, weak_type) of an operation combining `args`, as JAX computes it.

    Arguments may be values (Python scalars, NumPy scalars and arrays, objects
    with ``dtype`` and optionally ``weak_type``), dtype specifiers, the Python
    types ``int``/``float``/``complex`` (weak) and ``bool``, or ``None`` (float).
    Each is canonicalized by the x64 flag first.  Weak arguments do not widen
    typed ones: ``int8 array + 3`` is int8, ``int32 array + 2.0`` is the default
    float (weak).  If the result is weak its dtype is the default dtype of its
    kind.  Lists and tuples are rejected, as in JAX.
    """
    if not args:
        raise ValueError("at least one array or dtype is required")
    return _combine([_arg_dtype(a) for a in args])


# ---------------------------------------------------------------------------
# Predicates and numeric limits.


def _dtype_for_predicate(x: Any) -> np.dtype:
    if _is_dtype_specifier(x):
        return _to_dtype(x)
    return dtype_of(x)[0]


def _predicate_category(x: Any) -> str | None:
    entry = _DTYPES.get(_dtype_for_predicate(x).name)
    return entry[1] if entry is not None else None


def is_bool(x: Any) -> bool:
    """Whether `x` (a dtype specifier or a value) is of boolean dtype."""
    return _predicate_category(x) == "b"


def is_integer(x: Any) -> bool:
    """Whether `x` (a dtype specifier or a value) is of signed or unsigned integer dtype (not bool)."""
    return _predicate_category(x) in ("i", "u")


def is_signed_integer(x: Any) -> bool:
    return _predicate_category(x) == "i"


def is_unsigned_integer(x: Any) -> bool:
    return _predicate_category(x) == "u"


def is_floating(x: Any) -> bool:
    """Whether `x` is of real floating dtype (including bfloat16 and the narrow floats)."""
    return _predicate_category(x) == "f"


def is_complex(x: Any) -> bool:
    return _predicate_category(x) == "c"


_ML_DTYPE_NAMES = frozenset({"bfloat16", *_NARROW_FLOATS, *_SUBBYTE_INTS})
_ABSTRACT_TYPES = (np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
                   np.floating, np.complexfloating, np.flexible, np.character)
_EXTENDED_PARENTS = {
    "f": (np.floating, np.inexact, np.number, np.generic),
    "i": (np.signedinteger, np.integer, np.number, np.generic),
    "u": (np.unsignedinteger, np.integer, np.number, np.generic),
}


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """``np.issubdtype`` that also places ml_dtypes' types in NumPy's hierarchy, as JAX does: bfloat16 and the
    float8 types are ``np.floating`` (and so ``np.inexact``), int4 is ``np.signedinteger``, uint4 unsigned."""
    try:
        return _subdtypes[arg1, arg2]
    except (KeyError, TypeError):
        pass
    result = _issubdtype(arg1, arg2)
    if isinstance(arg1, np.dtype) and isinstance(arg2, (type, np.dtype)) and not hasattr(arg1, "_meshax_issubdtype") \
            and not hasattr(arg2, "_meshax_extended"):
        if len(_subdtypes) >= 4096:
            _subdtypes.clear()
        _subdtypes[arg1, arg2] = result
    return result


# (NumPy dtype, type or dtype) -> issubdtype's answer: every conversion asks two or three, always about the same
# few types (3.6 us each uncached, 0.16 cached: a third of a small optimizer step's time went there)
_subdtypes: dict[tuple[np.dtype, Any], bool] = {}


def _issubdtype(arg1: Any, arg2: Any) -> bool:
    hook = getattr(arg1, "_meshax_issubdtype", None) or getattr(getattr(arg1, "dtype", None), "_meshax_issubdtype",
                                                                 None)
    if hook is not None:
        return hook(arg2)
    if getattr(arg2, "_meshax_extended", False):
        return False
    if not (isinstance(arg2, type) and arg2 in _ABSTRACT_TYPES) or (isinstance(arg1, type) and arg1 in _ABSTRACT_TYPES):
        return bool(np.issubdtype(arg1, arg2))
    dt = _to_dtype(arg1)
    if dt.name in _ML_DTYPE_NAMES and dt == _DTYPES[dt.name][0]:
        return arg2 in _EXTENDED_PARENTS[_DTYPES[dt.name][1]]
    return bool(np.issubdtype(dt, arg2))


def is_inexact(dtype: Any) -> bool:
    """Whether `dtype` is a floating or complex type (bfloat16 and the float8 types included)."""
    return issubdtype(dtype, np.inexact)


def iinfo(int_type: Any) -> Any:
    """Machine limits of an integer type: ``np.iinfo``, or ``ml_dtypes.iinfo`` for int4 etc."""
    dt = _dtype_for_predicate(int_type)
    if dt.name in _SUBBYTE_INTS:
        return _ml_dtypes.iinfo(dt)
    return np.iinfo(dt)


def finfo(float_type: Any) -> Any:
    """Machine limits of a float type: ``np.finfo``, or ``ml_dtypes.finfo`` for bfloat16 etc."""
    dt = _dtype_for_predicate(float_type)
    if dt.name in _NARROW_FLOATS or (bfloat16 is not None and dt == bfloat16):
        return _ml_dtypes.finfo(dt)
    return np.finfo(dt)


float0 = np.dtype([("float0", np.void, 0)])  # the dtype of tangents of integer and boolean values, as JAX's
