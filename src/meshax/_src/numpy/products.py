"""meshax.numpy's products and matrix structure: matmul, dot, tensordot, einsum (and the order of its
contractions), vecdot, kron and cross, diagonals and triangles."""
from __future__ import annotations

import builtins
import math
import operator
import string
from typing import Any, Sequence

import numpy as np

from ..arrays import partition
from ..primitives import array_primitives as P
from ..arrays.array import Array
from ..core.core import Tracer, aval_of
from ..sharding.shardings import Sharding
from .promotion import ArrayLike, _as_array, _axes, _cast, _dtype, _lift, _ndim, _promote, _shape, _weak
from .ufuncs import astype, conjugate, multiply, subtract
from .shape_ops import (
    broadcast_arrays, broadcast_to, expand_dims, moveaxis, pad, ravel, reshape, squeeze, stack, transpose,
)
from .reductions import sum
from .searching import where
from ..core.dtypes import issubdtype


def _dot_general(a: Any, b: Any, contract: tuple[Sequence[int], Sequence[int]],
                 batch: tuple[Sequence[int], Sequence[int]] = ((), ()), out_sharding: Any = None,
                 preferred_element_type: Any = None) -> Any:
    """One dot_general. `out_sharding` lays out the result: a PartitionSpec over the operands' mesh, or a
    NamedSharding (uncommitted operands elsewhere are multiplied where they are, and the product moved);
    `preferred_element_type` is the result's dtype (the products are summed in it, or in the operands' type if
    wider). `precision` arguments are accepted and ignored: NumPy computes every product in full precision."""
    a, b = _promote(a, b)
    numbers = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
    spec, target = out_sharding, None
    if isinstance(out_sharding, Sharding):
        spec, target = out_sharding.spec, out_sharding
        mesh = None if isinstance(a, Tracer) or isinstance(b, Tracer) else partition.choose_mesh([a, b])
        if mesh is not None and mesh != target.mesh:
            if builtins.any(isinstance(x, Array) and x.committed for x in (a, b)):
                raise ValueError(
                    f"out_sharding is on the mesh {target.mesh.short_repr()}, but the operands are on "
                    f"{mesh.short_repr()}; device_put them onto the out_sharding's mesh, or pass a PartitionSpec."
                )
            spec = None
    params = {} if spec is None else {"out_sharding": spec}
    if preferred_element_type is not None:
        params["preferred_element_type"] = _dtype(preferred_element_type)
    result = P.dot_general.bind(a, b, dimension_numbers=numbers, **params)
    if target is not None and getattr(result, "sharding", None) != target:
        result = P.sharding_constraint.bind(result, sharding=target)
    return result


def _out_sharding(out_sharding: Any, name: str) -> Any:
    """A contraction's out_sharding= checked: a NamedSharding, or a PartitionSpec (over the mesh of `with mesh:`
    when one is entered, else over the operands' mesh)."""
    from ..sharding.mesh import current_mesh
    from ..sharding.shardings import NamedSharding, PartitionSpec

    if isinstance(out_sharding, PartitionSpec) and current_mesh() is not None:
        return NamedSharding(current_mesh(), out_sharding)
    if out_sharding is None or isinstance(out_sharding, (NamedSharding, PartitionSpec)):
        return out_sharding
    raise TypeError(f"{name}: out_sharding must be a NamedSharding or a PartitionSpec; got {out_sharding!r} of type "
                    f"{type(out_sharding).__name__}.")


def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None,
           out_sharding: Any = None) -> Any:
    """Matrix product with NumPy's broadcasting of leading dimensions; `out_sharding` lays out the result."""
    out_sharding = _out_sharding(out_sharding, "matmul")
    a, b = _lift(a), _lift(b)
    a_nd, b_nd = _ndim(a), _ndim(b)
    if a_nd == 0 or b_nd == 0:
        raise ValueError("matmul: operands must have at least one dimension; use multiply for scalars.")
    if a_nd == 1:
        return _dot_general(a, b, ((0,), (builtins.max(b_nd - 2, 0),)), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    if b_nd == 1:
        return _dot_general(a, b, ((a_nd - 1,), (0,)), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    if a_nd == 2 and b_nd == 2:
        return _dot_general(a, b, ((1,), (0,)), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    batch = np.broadcast_shapes(_shape(a)[:-2], _shape(b)[:-2])
    if out_sharding is None:
        return _unbroadcast_matmul(a, b, batch, preferred_element_type)
    a = broadcast_to(a, batch + _shape(a)[-2:])
    b = broadcast_to(b, batch + _shape(b)[-2:])
    n = len(batch)
    return _dot_general(a, b, ((n + 1,), (n,)), (tuple(range(n)), tuple(range(n))), out_sharding=out_sharding,
                        preferred_element_type=preferred_element_type)


def _unbroadcast_matmul(a: Any, b: Any, batch: tuple[int, ...], preferred_element_type: Any) -> Any:
    """A batched matmul as JAX emits it: a leading dimension both operands have (of one size other than 1) is a
    batch dimension of the product; one only an operand has (the other lacks it or has size 1) is a free
    dimension of that operand, never broadcast (x @ W with a 2-D W is one product over every row of x).
    The result is put in matmul's order, with its size-1 dimensions, by a transpose and a reshape."""
    nb = len(batch)

    def labels(shape: tuple[int, ...], last: tuple[Any, Any]) -> list[Any]:
        lead = (1,) * (nb + 2 - len(shape)) + shape[:-2]
        return [i for i in range(nb) if lead[i] != 1] + list(last)
    a_lead = (1,) * (nb + 2 - _ndim(a)) + _shape(a)[:-2]
    b_lead = (1,) * (nb + 2 - _ndim(b)) + _shape(b)[:-2]
    a_labels, b_labels = labels(_shape(a), (nb, "k")), labels(_shape(b), ("k", nb + 1))
    a = reshape(a, [a_lead[i] for i in a_labels[:-2]] + list(_shape(a)[-2:]))
    b = reshape(b, [b_lead[i] for i in b_labels[:-2]] + list(_shape(b)[-2:]))
    shared = [label for label in a_labels[:-2] if label in b_labels]
    a_free = [label for label in a_labels if label not in shared and label != "k"]
    b_free = [label for label in b_labels if label not in shared and label != "k"]
    product = _dot_general(a, b, ((a_labels.index("k"),), (b_labels.index("k"),)),
                           ([a_labels.index(x) for x in shared], [b_labels.index(x) for x in shared]),
                           preferred_element_type=preferred_element_type)
    order = shared + a_free + b_free
    ranked = sorted(range(len(order)), key=lambda position: order[position])
    if ranked != list(range(len(order))):
        product = transpose(product, ranked)
    final = batch + _shape(product)[-2:]  # the rows and columns come last once the labels are in order
    return product if _shape(product) == final else reshape(product, final)


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None,
        out_sharding: Any = None) -> Any:
    """NumPy's dot: a scalar scales, otherwise the last axis of `a` meets the second-to-last (or only) of `b`."""
    out_sharding = _out_sharding(out_sharding, "dot")
    a, b = _lift(a), _lift(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return _dot_general(a, b, ((), ()), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    if _ndim(b) == 1:
        return _dot_general(a, b, ((_ndim(a) - 1,), (0,)), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 2,)), out_sharding=out_sharding,
                        preferred_element_type=preferred_element_type)


def vdot(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    a = _lift(a)
    if issubdtype(aval_of(a).dtype, np.complexfloating):
        a = conjugate(a)
    return dot(ravel(a), ravel(b), preferred_element_type=preferred_element_type)


def inner(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    a, b = _lift(a), _lift(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        product = multiply(a, b)
        return product if preferred_element_type is None else astype(product, preferred_element_type)
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 1,)), preferred_element_type=preferred_element_type)


def outer(a: ArrayLike, b: ArrayLike, out: None = None) -> Any:
    """A broadcast product, as JAX's (so its result is split as an elementwise product's)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.outer is not supported; use the returned array.")
    return multiply(expand_dims(ravel(a), 1), expand_dims(ravel(b), 0))


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2, *, precision: Any = None,
              preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Contract the last `axes` dimensions of `a` with the first of `b`, or the listed pairs of axes."""
    out_sharding = _out_sharding(out_sharding, "tensordot")
    a, b = _lift(a), _lift(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        return _dot_general(a, b, (tuple(range(_ndim(a) - n, _ndim(a))), tuple(range(n))), out_sharding=out_sharding,
                            preferred_element_type=preferred_element_type)
    left, right = axes
    left = (left,) if isinstance(left, (int, np.integer)) else tuple(left)
    right = (right,) if isinstance(right, (int, np.integer)) else tuple(right)
    return _dot_general(a, b, (_axes(left, _ndim(a)), _axes(right, _ndim(b))), out_sharding=out_sharding,
                        preferred_element_type=preferred_element_type)


def einsum(subscripts: Any, /, *operands: ArrayLike, out: None = None, optimize: Any = "auto", precision: Any = None,
           preferred_element_type: Any = None, _dot_general: Any = None, out_sharding: Any = None) -> Any:
    """Einstein summation, as a chain of two-operand contractions (each a dot_general); `out_sharding` lays out
    the result (given to the last contraction; with a single operand, a PartitionSpec needs `with mesh:`).
    Subscripts are a string, or interleaved: einsum(x, [0, 1], y, [1, 2], [0, 2]) (Ellipsis allowed).
    `_dot_general` (JAX's hook) replaces lax.dot_general in the contractions: it is called as JAX calls it,
    `_dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type=..., [out_sharding=...])`."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported; use the returned array.")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved(subscripts, operands)
    out_sharding = _out_sharding(out_sharding, "einsum")
    inputs, output = _parse_einsum(subscripts, [_shape(o) for o in operands])
    if out_sharding is not None and len(_spec_of(out_sharding).normalized()) > len(output):
        raise ValueError(f"einsum: out_sharding {out_sharding} has {len(_spec_of(out_sharding))} entries but the "
                         f"result {output!r} has rank {len(output)}; give at most one entry per result dimension.")
    operands = _broadcast_labels(inputs, list(_promote(*operands)))
    dot = None if _dot_general is None else (_dot_general, precision, preferred_element_type)
    if preferred_element_type is not None and dot is None:  # products summed in the wider type, as dot_general's
        wide = _dtype(np.promote_types(operands[0].dtype, _dtype(preferred_element_type)))
        operands = [astype(o, wide) for o in operands]
    terms = list(zip(inputs, operands))
    while len(terms) > 1:
        in_order = optimize is False  # left to right, as JAX's; else the cheapest pair first, as opt_einsum's
        i, j = (0, 1) if in_order else _cheapest_pair(terms, output)
        (sa, a), (sb, b) = terms[i], terms[j]
        others = [t for k, t in enumerate(terms) if k not in (i, j)]
        rest = "".join(s for s, _ in others) + output
        merged = _contract_pair(sa, a, sb, b, rest, (output, out_sharding) if len(terms) == 2 else None, dot)
        terms = [merged] + others if in_order else others + [merged]
    letters, value = terms[0]
    value, letters = _sum_out(value, letters, output)
    if preferred_element_type is not None:
        value = astype(value, preferred_element_type)
    if letters != output:
        value = transpose(value, [letters.index(c) for c in output])
    if len(operands) == 1 and out_sharding is not None:
        from ..sharding.shardings import to_sharding

        value = P.sharding_constraint.bind(value, sharding=to_sharding(out_sharding))
    return value


def _broadcast_labels(inputs: Sequence[str], operands: list[Any]) -> list[Any]:
    """Operands whose dimensions of size 1 meet a larger size of the same label elsewhere, broadcast to it."""
    sizes: dict[str, int] = {}
    for term, operand in zip(inputs, operands):
        for c, n in zip(term, _shape(operand)):
            sizes[c] = n if n != 1 else sizes.get(c, 1)
    return [o if all(sizes[c] == n for c, n in zip(term, _shape(o))) else broadcast_to(o, [sizes[c] for c in term])
            for term, o in zip(inputs, operands)]


def _interleaved(first: Any, rest: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """einsum's interleaved arguments (operand, sublist, operand, sublist, ..., [output sublist]) as a
    subscripts string and the operands."""
    args = (first,) + tuple(rest)
    output = args[-1] if len(args) % 2 else None
    operands, sublists = args[:len(args) - len(args) % 2:2], args[1::2][:len(args) // 2]

    def letters(sublist: Any) -> str:
        try:
            return "".join("..." if s is Ellipsis else string.ascii_letters[operator.index(s)] for s in sublist)
        except (TypeError, IndexError):
            raise TypeError(f"einsum: a sublist holds integers in [0, 52) and Ellipsis; got {sublist!r}.") from None

    inputs = ",".join(letters(s) for s in sublists)
    return (inputs if output is None else inputs + "->" + letters(output)), tuple(operands)


def _cheapest_pair(terms: Sequence[tuple[str, Any]], output: str) -> tuple[int, int]:
    """The pair to contract first on the way that takes the fewest multiplications in all (the first such
    way on ties; every way is tried up to four terms, beyond that the cheapest next pair is taken)."""
    sizes = {c: n for letters, value in terms for c, n in zip(letters, _shape(value))}
    return _cheapest_order([letters for letters, _ in terms], output, sizes, exhaustive=len(terms) <= 4)[1]


def _cheapest_order(terms: list[str], output: str, sizes: dict[str, int], exhaustive: bool
                    ) -> tuple[int, tuple[int, int]]:
    """(multiplications, first pair) of the cheapest contraction order of `terms` (results go last)."""
    best: tuple[int, tuple[int, int]] | None = None
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            others = [t for k, t in enumerate(terms) if k not in (i, j)]
            keep = set("".join(others) + output)
            cost = math.prod(sizes[c] for c in set(terms[i] + terms[j]))
            if exhaustive and len(others) > 0:
                merged = "".join(sorted(set(terms[i] + terms[j]) & keep))
                cost += _cheapest_order(others + [merged], output, sizes, exhaustive)[0]
            if best is None or cost < best[0]:
                best = (cost, (i, j))
    assert best is not None
    return best


def _spec_of(out_sharding: Any) -> Any:
    return out_sharding.spec if isinstance(out_sharding, Sharding) else out_sharding


def _reordered(out_sharding: Any, source: Sequence[int]) -> Any:
    """`out_sharding` of a result, as the layout of a value whose dimension d is the result's dimension source[d]."""
    from ..sharding.shardings import NamedSharding, PartitionSpec

    spec = _spec_of(out_sharding)
    entries = tuple(spec) + (None,) * (len(source) - len(spec))
    reordered = PartitionSpec(*(entries[s] for s in source), unreduced=spec.unreduced, reduced=spec.reduced)
    return NamedSharding(out_sharding.mesh, reordered) if isinstance(out_sharding, Sharding) else reordered


def _parse_einsum(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> tuple[list[str], str]:
    ndims = [len(shape) for shape in shapes]
    spec = subscripts.replace(" ", "")
    left, arrow, right = spec.partition("->")
    inputs = left.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"einsum: {subscripts!r} names {len(inputs)} operands but {len(ndims)} were given.")
    fill = ""  # the letters standing for the ellipsis' dimensions
    if "." in spec:
        spare = [c for c in string.ascii_letters if c not in spec]
        width = builtins.max((n - len(s.replace("...", "")) for s, n in zip(inputs, ndims) if "..." in s), default=0)
        fill = "".join(spare[:width])
        inputs = [s.replace("...", fill[len(fill) - (n - len(s.replace('...', ''))):]) if "..." in s else s
                  for s, n in zip(inputs, ndims)]
        right = right.replace("...", fill) if arrow else None
    for term, n in zip(inputs, ndims):
        if len(term) != n:
            raise ValueError(f"einsum: subscripts {term!r} do not match an operand of rank {n}.")
    sizes: dict[str, tuple[int, int]] = {}  # label: (size, the operand that first gave it)
    for k, (term, shape) in enumerate(zip(inputs, shapes)):
        for c, size in zip(term, shape):
            first, where = sizes.setdefault(c, (size, k))
            if first != size and 1 not in (size, first):
                raise ValueError(f"einsum: label {c!r} has size {first} in operand {where} but size {size} in "
                                 f"operand {k}; make the sizes of each label agree.")
    if not arrow:  # implicit output: the broadcast (ellipsis) dimensions, then the letters used once, sorted
        counts = {c: "".join(inputs).count(c) for c in "".join(inputs)}
        right = fill + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in fill))
    return inputs, right


def _sum_out(value: Any, letters: str, keep: str) -> tuple[Any, str]:
    """Sum over letters not in `keep`; take diagonals of repeated letters first."""
    for c in set(letters):
        while letters.count(c) > 1:
            i = letters.index(c)
            j = letters.index(c, i + 1)
            value = diagonal(value, axis1=i, axis2=j)
            letters = letters[:i] + letters[i + 1:j] + letters[j + 1:] + c
    drop = tuple(i for i, c in enumerate(letters) if c not in keep)
    if drop:
        value = sum(value, axis=drop)
        letters = "".join(c for c in letters if c in keep)
    return value, letters


def _contract_pair(sa: str, a: Any, sb: str, b: Any, rest: str, last: Any = None,
                   dot: Any = None) -> tuple[str, Any]:
    """Contract two einsum terms; `last` is (output letters, out_sharding) when this is the final contraction;
    `dot` is (einsum's _dot_general, precision, preferred_element_type) when the user gave one."""
    a, sa = _sum_out(a, sa, sb + rest)
    b, sb = _sum_out(b, sb, sa + rest)
    contract = [c for c in sa if c in sb and c not in rest]
    batch = [c for c in sa if c in sb and c in rest]
    out = batch + [c for c in sa if c not in sb] + [c for c in sb if c not in sa]
    out_sharding = None
    if last is not None and last[1] is not None:
        output, out_sharding = last
        out_sharding = _reordered(out_sharding, [output.index(c) for c in out])
    numbers = (([sa.index(c) for c in contract], [sb.index(c) for c in contract]),
               ([sa.index(c) for c in batch], [sb.index(c) for c in batch]))
    if dot is not None:
        function, precision, preferred = dot
        numbers = tuple(tuple(tuple(side) for side in pair) for pair in numbers)
        value = function(a, b, numbers, precision, preferred_element_type=preferred,
                         **({} if out_sharding is None else {"out_sharding": out_sharding}))
        return "".join(out), value
    value = _dot_general(a, b, *numbers, out_sharding=out_sharding)
    return "".join(out), value


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    a = _as_array(_promote(a)[0])
    n = a.ndim
    if n < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions; got shape {a.shape}.")
    axis1, axis2 = _axes(axis1, n)[0], _axes(axis2, n)[0]
    if axis1 == axis2:
        raise ValueError(f"diagonal: axis1 and axis2 are both {axis1}; they must differ.")
    size = builtins.max(0, builtins.min(a.shape[axis1] - builtins.max(0, -offset), a.shape[axis2] - builtins.max(0, offset)))
    rows = np.arange(size) + builtins.max(0, -offset)
    cols = np.arange(size) + builtins.max(0, offset)
    moved = moveaxis(a, (axis1, axis2), (-2, -1))
    return moved[..., rows, cols]


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: None = None) -> Any:
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.trace is not supported; use the returned array.")
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _triangle(m: ArrayLike, k: int, lower: bool) -> Any:
    m = _promote(m)[0]
    if m.ndim < 2:
        raise ValueError("tril/triu need an array of rank at least 2.")
    rows, cols = m.shape[-2:]
    mask = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
    return where(mask, m, _cast(0, m.dtype, _weak(m)))


def tril(m: ArrayLike, k: int = 0) -> Any:
    return _triangle(m, k, True)


def triu(m: ArrayLike, k: int = 0) -> Any:
    return _triangle(m, k, False)


def diag(v: ArrayLike, k: int = 0) -> Any:
    v = _promote(v)[0]
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("diag needs a 1-D or 2-D array.")
    n = v.shape[0] + builtins.abs(k)
    padded = pad(v, (0, k) if k >= 0 else (-k, 0))
    return where(np.eye(n, k=k, dtype=bool), reshape(padded, (n, 1)), _cast(0, v.dtype, _weak(v)))


def diagflat(v: ArrayLike, k: int = 0) -> Any:
    return diag(ravel(v), k)


def kron(a: ArrayLike, b: ArrayLike) -> Any:
    a, b = _promote(a, b)
    n = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (n - a.ndim) + tuple(a.shape))
    b = reshape(b, (1,) * (n - b.ndim) + tuple(b.shape))
    product = multiply(reshape(a, [x for d in a.shape for x in (d, 1)]),
                       reshape(b, [x for d in b.shape for x in (1, d)]))
    return reshape(product, [x * y for x, y in zip(a.shape, b.shape)])


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _promote(a, b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] != 3 or b.shape[-1] != 3:  # JAX 0.12 takes 3-vectors only (NumPy also 2-vectors)
        raise ValueError("Dimension must be 3 for cross product")
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)), subtract(multiply(a2, b0), multiply(a0, b2)), z],
              axis=-1)
    return moveaxis(c, -1, axisc)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    x1, x2 = _promote(x1, x2)
    x1, x2 = broadcast_arrays(x1, x2)
    if issubdtype(x1.dtype, np.complexfloating):
        x1 = conjugate(x1)
    (axis,) = _axes(axis, x1.ndim)
    batch = tuple(d for d in range(x1.ndim) if d != axis)
    return _dot_general(x1, x2, ((axis,), (axis,)), (batch, batch), preferred_element_type=preferred_element_type)


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    return squeeze(matmul(x1, expand_dims(x2, -1)), -1)


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    x1 = _lift(x1)
    if issubdtype(aval_of(x1).dtype, np.complexfloating):
        x1 = conjugate(x1)
    return squeeze(matmul(expand_dims(x1, -2), x2), -2)
