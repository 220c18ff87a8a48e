"""jnp.ufunc objects against JAX 0.12: the fourteen JAX makes (add, maximum, logical_or, ...) and frompyfunc's, their
attributes and methods (reduce, accumulate, outer, at, reduceat) over dtypes, axes and keywords, eagerly and under
jit, with gradients and vmap where JAX defines them; errors of the same class where JAX raises."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.numpy import ufunc_builtins

from differential import check_modes_or_same_error

NAMES = sorted(ufunc_builtins.__all__)
BINARY = [n for n in NAMES if n != "negative"]
DTYPES = ["float32", "int32", "int8", "bool"]
RNG = np.random.default_rng(40)


def uf(L, name):
    """The ufunc `name` of library L (meshax's from its ufunc module, so these tests do not depend on the wiring
    of meshax.numpy, which test_public_names_are_the_ufunc_objects checks)."""
    return getattr(jax.numpy, name) if L is jax else getattr(ufunc_builtins, name)


def sample(shape, dtype):
    values = RNG.integers(-3, 4, size=shape) if dtype != "bool" else RNG.integers(0, 2, size=shape)
    values = values.astype(dtype)
    if dtype == "float32":
        values = values + RNG.random(shape).astype(np.float32)
    return values


compare = check_modes_or_same_error


def test_the_set_of_ufunc_objects_is_jaxs():
    theirs = sorted(n for n in dir(jax.numpy) if isinstance(getattr(jax.numpy, n), jax.numpy.ufunc))
    assert NAMES == theirs


def test_public_names_are_the_ufunc_objects():
    for name in NAMES:
        assert getattr(mnp, name) is getattr(ufunc_builtins, name), name
        assert isinstance(getattr(mnp, name), mnp.ufunc), name
    assert isinstance(mnp.frompyfunc(lambda a: a, 1, 1), mnp.ufunc)


@pytest.mark.parametrize("name", NAMES)
def test_attributes(name):
    ours, theirs = getattr(ufunc_builtins, name), getattr(jax.numpy, name)
    assert (ours.nin, ours.nout, ours.nargs, ours.__name__, repr(ours)) == \
        (theirs.nin, theirs.nout, theirs.nargs, theirs.__name__, repr(theirs))
    assert ours.identity == theirs.identity and type(ours.identity) is type(theirs.identity)
    assert ours == getattr(ufunc_builtins, name) and hash(ours) == hash(getattr(ufunc_builtins, name))
    assert (ours == ufunc_builtins.add) == (name == "add")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_call(name, dtype):
    x, y = sample((2, 3), dtype), sample((3,), dtype)
    args = (x,) if name == "negative" else (x, y)
    compare(lambda L, *a: uf(L, name)(*a), *args, rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("keyword", ["out", "where"])
def test_call_refuses_out_and_where(name, keyword):
    x = np.ones(3, np.float32)
    args = (x,) if name == "negative" else (x, x)
    compare(lambda L, *a: uf(L, name)(*a, **{keyword: a[0]}), *args)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool"])
@pytest.mark.parametrize("axis, keepdims", [(0, False), (-1, True), (None, False), (None, True), ((0, 1), False)])
def test_reduce(name, dtype, axis, keepdims):
    x = sample((3, 4), dtype)
    compare(lambda L, a: uf(L, name).reduce(a, axis=axis, keepdims=keepdims), x, rtol=1e-5)


@pytest.mark.parametrize("name", [n for n in BINARY if n != "logaddexp"])  # JAX's logaddexp.reduce fails with initial
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("masked", [False, True])
def test_reduce_initial_and_where(name, dtype, masked):
    x = sample((3, 4), dtype)
    where = np.array([True, False, True, True])
    keywords = dict(initial=1, where=where) if masked else dict(initial=1)
    compare(lambda L, a: uf(L, name).reduce(a, axis=0, **keywords), x, rtol=1e-5)


@pytest.mark.parametrize("name", BINARY)
def test_reduce_where_needs_an_identity_or_initial_and_booleans(name):
    x = sample((3, 4), "float32")
    compare(lambda L, a: uf(L, name).reduce(a, where=a > 0), x, rtol=1e-5)
    compare(lambda L, a: uf(L, name).reduce(a, where=np.ones(4, np.int32), initial=0), x)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "logaddexp", "bitwise_or"])  # JAX's maximum.reduce
@pytest.mark.parametrize("dtype", ["float32", "int32"])                                    # refuses any dtype=
def test_reduce_dtype(name, dtype):
    x = sample((3, 4), "int8")
    compare(lambda L, a: uf(L, name).reduce(a, axis=1, dtype=dtype), x)


@pytest.mark.parametrize("name", BINARY)
def test_reduce_empty_and_scalar(name):
    compare(lambda L, a: uf(L, name).reduce(a), np.zeros((0, 2), np.float32))
    compare(lambda L, a: uf(L, name).reduce(a), np.float32(2))
    compare(lambda L, a: uf(L, name).reduce(a, axis=None), np.float32(2))


def test_unary_ufunc_methods_raise():
    x = np.ones((2, 3), np.float32)
    for method in ("reduce", "accumulate"):
        compare(lambda L, a: getattr(uf(L, "negative"), method)(a), x)
    compare(lambda L, a: uf(L, "negative").outer(a, a), x)
    compare(lambda L, a: uf(L, "negative").reduceat(a, np.array([0, 1])), x)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype, axis", [("float32", 1), ("int8", 0), ("int32", 1), ("bool", 0)])
def test_accumulate(name, dtype, axis):
    x = sample((3, 5), dtype)
    compare(lambda L, a: uf(L, name).accumulate(a, axis=axis), x, rtol=1e-5)


@pytest.mark.parametrize("name", BINARY)
def test_accumulate_axes_and_dtype(name):
    x = sample((3, 4), "int8")
    compare(lambda L, a: uf(L, name).accumulate(a, axis=None), x)
    compare(lambda L, a: uf(L, name).accumulate(a, axis=-1, dtype="int32"), x)
    compare(lambda L, a: uf(L, name).accumulate(a, out=a), x)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype, shapes", [("float32", ((3,), (4,))), ("int32", ((2, 2), (3,))), ("bool", ((), (2,)))])
def test_outer(name, dtype, shapes):
    compare(lambda L, a, b: uf(L, name).outer(a, b), sample(shapes[0], dtype), sample(shapes[1], dtype), rtol=1e-6)


AT_CASES = [
    (np.array([0, 0, 2]), np.array([1.5, 3.0, 2.0], np.float32)),  # a repeated index
    (np.array([[1, 3], [3, 0]]), np.float32(2.0)),                   # a 2-D index, a scalar value
    (2, np.float32(-1.0)),                                          # a scalar index
]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("case, dtype", [(0, "float32"), (1, "int32"), (2, "float32")])
def test_at(name, case, dtype):
    indices, values = AT_CASES[case]
    a = sample((5,), dtype)
    compare(lambda L, x, v: uf(L, name).at(x, indices, v, inplace=False), a, values.astype(dtype), rtol=1e-6)


def test_at_of_rows_of_a_matrix_and_unary():
    a = sample((3, 4), "float32")
    rows = np.array([0, 2, 0])
    compare(lambda L, x: uf(L, "logaddexp").at(x, (rows,), np.float32(1.0), inplace=False), a)
    compare(lambda L, x: uf(L, "logaddexp").at(x, (rows, np.array([1, 1, 3])), np.float32(1.0), inplace=False), a)
    compare(lambda L, x: uf(L, "negative").at(x, (rows,), inplace=False), a)
    compare(lambda L, x: uf(L, "add").at(x, (rows,), np.float32(1.0), inplace=False), a)


@pytest.mark.parametrize("name", NAMES)
def test_at_inplace_is_refused(name):
    args = () if name == "negative" else (np.float32(1),)
    compare(lambda L, x: uf(L, name).at(x, np.array([0]), *args), np.ones(3, np.float32))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype, axis", [("float32", 0), ("int32", 1), ("bool", 0)])
def test_reduceat(name, dtype, axis):
    x = sample((6, 6), dtype)
    indices = np.array([0, 4, 1, 5])
    compare(lambda L, a: uf(L, name).reduceat(a, indices, axis=axis), x, rtol=1e-5)


def test_reduceat_errors_and_traced_indices():
    x = sample((6,), "float32")
    compare(lambda L, a: uf(L, "add").reduceat(a, np.array([[0, 1]])), x)
    compare(lambda L, a: uf(L, "add").reduceat(a, np.array([0, 1]), axis=None), x)
    compare(lambda L, a: uf(L, "add").reduceat(a[0], np.array([0])), x)
    compare(lambda L, a, i: uf(L, "maximum").reduceat(a, i), x, np.array([0, 2, 2, 5]))


def _affine(a, b):
    return a * b + 1


FROMPY = [(_affine, 2, 1, 1), (_affine, 2, 1, None), (lambda a, b: a - 2 * b, 2, 1, 0)]


@pytest.mark.parametrize("index", range(len(FROMPY)))
def test_frompyfunc_methods(index):
    func, nin, nout, identity = FROMPY[index]
    x = sample((3, 4), "float32")
    rows = np.array([0, 0, 2])

    def make(L):
        return L.numpy.frompyfunc(func, nin, nout, identity=identity)

    assert (make(meshax).nin, make(meshax).nout, make(meshax).nargs, make(meshax).identity,
            repr(make(meshax))) == (make(jax).nin, make(jax).nout, make(jax).nargs, make(jax).identity,
                                    repr(make(jax)))
    compare(lambda L, a: make(L)(a, 2.0), x, rtol=1e-6)
    for axis in (1, None):
        compare(lambda L, a: make(L).reduce(a, axis=axis), x, rtol=1e-5)
    compare(lambda L, a: make(L).reduce(a, axis=1, initial=2.0, where=a > 0.5), x, rtol=1e-5)
    compare(lambda L, a: make(L).accumulate(a, axis=1), x, rtol=1e-5)
    compare(lambda L, a: make(L).outer(a[0], a[1]), x, rtol=1e-6)
    compare(lambda L, a: make(L).reduceat(a, np.array([0, 2, 1]), axis=1), x, rtol=1e-5)
    compare(lambda L, a: make(L).at(a, (rows,), a[1], inplace=False), x, rtol=1e-5)


def test_frompyfunc_of_several_outputs_and_of_scalars():
    x = sample((2, 3), "float32")
    compare(lambda L, a: L.numpy.frompyfunc(lambda v: (v, v + 1), 1, 2)(a), x)
    compare(lambda L, a: L.numpy.frompyfunc(lambda v: L.numpy.sum(v) * 2, 1, 1)(a), x)  # applied per element
    compare(lambda L, a: L.numpy.frompyfunc(_affine, 2, 1)(a[0, 0], 3.0), x)


@pytest.mark.parametrize("name", ["add", "maximum", "logaddexp", "subtract"])
def test_gradients_and_vmap(name):
    x = sample((3, 4), "float32")
    compare(lambda L, a: L.grad(lambda v: uf(L, name).reduce(v, axis=None))(a), x, rtol=1e-5)
    compare(lambda L, a: L.grad(lambda v: uf(L, name).accumulate(v, axis=1).sum())(a), x, rtol=1e-5)
    compare(lambda L, a: L.grad(lambda v: uf(L, name).outer(v[0], v[1]).sum())(a), x, rtol=1e-5)
    compare(lambda L, a: L.vmap(lambda v: uf(L, name).reduce(v))(a), x, rtol=1e-5)
    compare(lambda L, a: L.vmap(lambda v: uf(L, name).at(v, np.array([0, 0]), 1.0, inplace=False))(a), x,
            rtol=1e-5)


def test_frompyfunc_gradient():
    x = sample((3,), "float32")
    compare(lambda L, a: L.grad(lambda v: L.numpy.frompyfunc(_affine, 2, 1)(v, v).sum())(a), x)
    compare(lambda L, a: L.grad(lambda v: L.numpy.frompyfunc(_affine, 2, 1, identity=1).reduce(v))(a), x)
