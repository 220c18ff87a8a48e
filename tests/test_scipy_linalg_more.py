"""meshax.scipy.linalg's names at JAX 0.12's level against jax.scipy.linalg: every name and signature; values, shapes,
dtypes and output structures eagerly and under jit over dtypes, sizes, batch shapes and keywords; derivatives and
vmap where JAX defines them; JAX's exception classes where it raises."""
from __future__ import annotations

import inspect
import warnings

import jax
import jax.numpy as jjnp
import jax.scipy.linalg as J
import numpy as np
import pytest

import meshax
import meshax.numpy as mjnp
import meshax.scipy.linalg as M

jax.config.update("jax_platforms", "cpu")

FLOAT, COMPLEX = np.float32, np.complex64


def matrix(shape, dtype=FLOAT, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.normal(size=shape)
    if shift:
        x = x + shift * np.eye(shape[-1])
    return x.astype(dtype)


def run_jax(case, *args):
    """case(scipy.linalg module, numpy module, *arrays) in JAX (eagerly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return case(J, jjnp, *[jjnp.asarray(a) for a in args])


def run_meshax(case, *args, mode="eager"):
    """case(scipy.linalg module, numpy module, *arrays) in meshax, eagerly or under jit."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arrays = [mjnp.asarray(a) for a in args]
        return meshax.jit(lambda *xs: case(M, mjnp, *xs))(*arrays) if mode == "jit" else case(M, mjnp, *arrays)


def same(ours, theirs, rtol=2e-4, atol=2e-4):
    """Same tree, shapes, dtypes, weak types and values."""
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for o, t in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert np.shape(o) == np.shape(t), (np.shape(o), np.shape(t))
        assert np.asarray(o).dtype == np.asarray(t).dtype, (np.asarray(o).dtype, np.asarray(t).dtype)
        assert bool(getattr(o, "weak_type", False)) == bool(getattr(t, "weak_type", False))
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=rtol, atol=atol, equal_nan=True)


def check(case, *args, modes=("eager", "jit"), **tol):
    """meshax in each mode against one run of JAX."""
    theirs = run_jax(case, *args)
    for mode in modes:
        same(run_meshax(case, *args, mode=mode), theirs, **tol)


def raises_as_jax(exception, case, *args):
    for lib, numpy_module in ((J, jjnp), (M, mjnp)):
        with pytest.raises(exception):
            case(lib, numpy_module, *[numpy_module.asarray(a) for a in args])


def test_names_and_signatures_are_jaxs():
    public = sorted(n for n in dir(J) if not n.startswith("_"))
    assert sorted(M.__all__) == public
    for name in public:
        ours = [(n, p.kind, p.default) for n, p in inspect.signature(getattr(M, name)).parameters.items()]
        theirs = [(n, p.kind, p.default) for n, p in inspect.signature(getattr(J, name)).parameters.items()]
        assert ours == theirs, name


# ---- special matrices ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hilbert", "invhilbert", "pascal", "invpascal", "helmert", "dft"])
@pytest.mark.parametrize("n", [4])
def test_matrices_of_a_size(name, n):
    check(lambda L, _: getattr(L, name)(n), modes=("eager",), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["symmetric", "lower", "upper"])
@pytest.mark.parametrize("name", ["pascal", "invpascal"])
def test_pascal_kinds(kind, name):
    check(lambda L, _: getattr(L, name)(4, kind), modes=("eager",))


def test_pascal_unknown_kind_raises_as_jax():
    with pytest.raises(ValueError):
        J.pascal(3, "diagonal")
    with pytest.raises(ValueError):
        M.pascal(3, "diagonal")


@pytest.mark.parametrize("scale,dtype", [(None, None), ("n", np.complex64), ("sqrtn", None)])
def test_dft(scale, dtype):
    check(lambda L, _: L.dft(4, scale, dtype=dtype), modes=("eager",), atol=1e-6)


@pytest.mark.parametrize("n,dtype", [(1, int), (2, np.float32), (8, np.int8), (4, int)])
def test_hadamard(n, dtype):
    check(lambda L, _: L.hadamard(n, dtype), modes=("eager",))


def test_hadamard_of_a_non_power_of_two_raises_as_jax():
    for lib in (J, M):
        with pytest.raises(ValueError):
            lib.hadamard(6)


@pytest.mark.parametrize("full", [True, False])
def test_helmert_full(full):
    check(lambda L, _: L.helmert(5, full=full), modes=("eager",))


VECTOR_CASES = {
    "circulant": lambda L, _, x, y: L.circulant(x),
    "toeplitz": lambda L, _, x, y: L.toeplitz(x),
    "toeplitz_r": lambda L, _, x, y: L.toeplitz(x, y),
    "hankel": lambda L, _, x, y: L.hankel(x),
    "hankel_r": lambda L, _, x, y: L.hankel(x, y),
    "companion": lambda L, _, x, y: L.companion(x),
    "fiedler": lambda L, _, x, y: L.fiedler(x),
    "fiedler_companion": lambda L, _, x, y: L.fiedler_companion(x),
    "leslie": lambda L, _, x, y: L.leslie(x, x[..., 1:]),
    "convolution_full": lambda L, _, x, y: L.convolution_matrix(x, 3),
    "convolution_same": lambda L, _, x, y: L.convolution_matrix(x, 4, "same"),
    "convolution_valid": lambda L, _, x, y: L.convolution_matrix(x, 2, "valid"),
    "convolution_wide": lambda L, _, x, y: L.convolution_matrix(x, 7, "same"),
}


@pytest.mark.parametrize("name", sorted(VECTOR_CASES))
@pytest.mark.parametrize("dtype,batch,n", [(FLOAT, (2, 1), 5), (COMPLEX, (), 2)])
def test_matrices_from_vectors(name, dtype, batch, n):
    x = (matrix(batch + (n,), FLOAT) * 3).astype(dtype) + (3 if name.endswith("companion") else 0)
    if name == "fiedler" and dtype == COMPLEX:
        pytest.skip("fiedler takes real values")
    y = (matrix(batch + (3,), FLOAT, seed=1) * 3).astype(dtype)
    check(VECTOR_CASES[name], x, y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["circulant", "toeplitz_r", "hankel", "companion", "fiedler", "fiedler_companion",
                                  "leslie", "convolution_valid"])
def test_matrices_from_integer_vectors(name):
    x, y = np.arange(1, 6, dtype=np.int32), np.arange(3, dtype=np.int32) - 1
    check(VECTOR_CASES[name], x, y, modes=("eager",))


@pytest.mark.parametrize("name", ["circulant", "toeplitz_r", "hankel_r", "companion", "fiedler_companion", "leslie",
                                  "convolution_same"])
def test_matrices_from_vectors_grad_and_vmap(name):
    case = VECTOR_CASES[name]
    x, y = matrix((3, 4)) + 3, matrix((3, 3), seed=1)
    ours = meshax.vmap(lambda a, b: case(M, mjnp, a, b))(mjnp.asarray(x), mjnp.asarray(y))
    same(ours, jax.vmap(lambda a, b: case(J, jjnp, a, b))(x, y))
    loss = lambda lib, numpy_module: lambda a: numpy_module.sum(case(lib, numpy_module, a, y[0]) ** 2)
    same(meshax.grad(loss(M, mjnp))(mjnp.asarray(x[0])), jax.grad(loss(J, jjnp))(x[0]), rtol=1e-4, atol=1e-4)


# ---- decompositions ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX, np.int32])
@pytest.mark.parametrize("shape,permute_l", [((4, 4), False), ((3, 5), True), ((5, 3), False), ((2, 4, 4), True)])
def test_lu(dtype, shape, permute_l):
    a = (matrix(shape, FLOAT) * 4).astype(dtype) if dtype == np.int32 else matrix(shape, dtype)
    check(lambda L, _, x: L.lu(x, permute_l=permute_l), a)
    check(lambda L, _, x: L.lu_factor(x), a)


@pytest.mark.parametrize("dtype,trans", [(FLOAT, 0), (COMPLEX, 1), (COMPLEX, 2)])
@pytest.mark.parametrize("shapes", [((4, 4), (4,)), ((2, 4, 4), (4,)), ((2, 4, 4), (2, 4, 3))])
def test_lu_solve(dtype, trans, shapes):
    a, b = matrix(shapes[0], dtype, shift=1.0), matrix(shapes[1], dtype, seed=1)
    check(lambda L, _, x, y: L.lu_solve(L.lu_factor(x), y, trans=trans), a, b, rtol=1e-3, atol=1e-3)


def test_lu_solve_bad_trans_raises_as_jax():
    raises_as_jax(ValueError, lambda L, _, x: L.lu_solve(L.lu_factor(x), x, trans=3), matrix((3, 3)))


def test_lu_and_lu_solve_grad():
    a, b = matrix((4, 4), shift=3.0), matrix((4, 2), seed=1)
    for argnum in (0, 1):
        def loss(L, n):
            return lambda x, y: n.sum(L.lu_solve(L.lu_factor(x), y) ** 2) + n.sum(L.lu(x)[1] * L.lu(x)[2])
        ours = meshax.grad(loss(M, mjnp), argnums=argnum)(mjnp.asarray(a), mjnp.asarray(b))
        same(ours, jax.grad(loss(J, jjnp), argnums=argnum)(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("shape,calc_q", [((1, 1), True), ((4, 4), False), ((2, 5, 5), True)])
def test_hessenberg(dtype, shape, calc_q):
    check(lambda L, _, x: L.hessenberg(x, calc_q=calc_q), matrix(shape, dtype))


@pytest.mark.parametrize("dtype,shape", [(FLOAT, (4, 4)), (COMPLEX, (2, 3, 3))])
@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_and_rsf2csf(dtype, shape, output):
    a = matrix(shape, dtype)
    check(lambda L, _, x: L.schur(x, output), a)
    if dtype == FLOAT and output == "real":
        check(lambda L, _, x: L.rsf2csf(*L.schur(x)), np.stack([a, a.T]), rtol=1e-3, atol=1e-3)


def test_schur_errors_as_jax():
    raises_as_jax(ValueError, lambda L, _, x: L.schur(x, "upper"), matrix((3, 3)))
    raises_as_jax(TypeError, lambda L, _, x: L.schur(x), np.eye(3, dtype=np.int32))


@pytest.mark.parametrize("a_shape", [(5, 3), (3, 5)])
@pytest.mark.parametrize("mode", ["right", "left"])
@pytest.mark.parametrize("dtype,pivoting,conjugate,vector", [(FLOAT, False, False, False), (COMPLEX, True, True, False),
                                                             (FLOAT, False, True, True)])
def test_qr_multiply(dtype, a_shape, mode, pivoting, conjugate, vector):
    m, n = a_shape
    k = min(m, n)
    c_shape = ((m,) if vector else (2, m)) if mode == "right" else ((k,) if vector else (k, 2))
    a, c = matrix(a_shape, dtype), matrix(c_shape, dtype, seed=1)
    check(lambda L, _, x, y: L.qr_multiply(x, y, mode=mode, pivoting=pivoting, conjugate=conjugate), a, c)


def test_qr_multiply_errors_as_jax():
    raises_as_jax(ValueError, lambda L, _, x: L.qr_multiply(x, x, mode="up"), matrix((3, 3)))
    raises_as_jax(ValueError, lambda L, _, x, y: L.qr_multiply(x, y), matrix((4, 3)), matrix((2, 3)))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("mode", ["full", "economic", "r"])
@pytest.mark.parametrize("shape,pivoting", [((5, 3), False), ((2, 4, 3), True)])
def test_qr(dtype, mode, shape, pivoting):
    check(lambda L, _, x: L.qr(x, mode=mode, pivoting=pivoting), matrix(shape, dtype))


@pytest.mark.parametrize("dtype,shape,side", [(FLOAT, (4, 4), "right"), (COMPLEX, (5, 3), "right"),
                                              (COMPLEX, (3, 5), "left"), (FLOAT, (2, 4, 3), "right")])
@pytest.mark.parametrize("method", ["qdwh", "svd"])
def test_polar(dtype, shape, side, method):
    check(lambda L, _, x: L.polar(x, side, method=method), matrix(shape, dtype), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape,side", [((3, 5), "right"), ((4, 4), "left")])
def test_polar_qdwh_shape_limits_raise_as_jax(shape, side):
    raises_as_jax(NotImplementedError, lambda L, _, x: L.polar(x, side), matrix(shape))


def test_polar_svd_grad():
    a = matrix((4, 3))
    loss = lambda L, n: lambda x: n.sum(L.polar(x, method="svd")[1] ** 2)
    same(meshax.grad(loss(M, mjnp))(mjnp.asarray(a)), jax.grad(loss(J, jjnp))(a), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype,n,select", [(FLOAT, 1, "a"), (COMPLEX, 5, "a"), (FLOAT, 5, "i"), (COMPLEX, 2, "i")])
def test_eigh_tridiagonal(dtype, n, select):
    d, e = matrix((n,), FLOAT).astype(dtype), matrix((n - 1,), dtype, seed=1)
    select_range = (0, n - 1) if n == 1 else (1, n - 1)
    kw = dict(select=select, select_range=select_range if select == "i" else None)
    check(lambda L, _, x, y: L.eigh_tridiagonal(x, y, eigvals_only=True, **kw), d, e, rtol=1e-4, atol=1e-4)
    if select == "a":
        check(lambda L, n_, x, y: [n_.abs(v) for v in L.eigh_tridiagonal(x, y)], d, e, rtol=1e-3, atol=1e-3)


def test_eigh_tridiagonal_errors_as_jax():
    raises_as_jax(NotImplementedError, lambda L, _, x, y: L.eigh_tridiagonal(x, y, select="v", select_range=(0, 1)),
                  matrix((3,)), matrix((2,)))
    raises_as_jax(TypeError, lambda L, _, x, y: L.eigh_tridiagonal(x, y), np.ones(3, np.int32), np.ones(2, np.int32))
    raises_as_jax(TypeError, lambda L, _, x, y: L.eigh_tridiagonal(x, y), np.ones(3, FLOAT), np.ones(2, COMPLEX))


# ---- matrix functions and equations ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,shape,compute_expm", [(FLOAT, (3, 3), True), (COMPLEX, (2, 4, 4), False)])
def test_expm_frechet(dtype, shape, compute_expm):
    a, e = matrix(shape, dtype) * 0.5, matrix(shape, dtype, seed=1)
    check(lambda L, _, x, y: L.expm_frechet(x, y, compute_expm=compute_expm), a, e, rtol=1e-3, atol=1e-3)


def test_expm_frechet_grad():
    a, e = matrix((3, 3)) * 0.5, matrix((3, 3), seed=1)
    loss = lambda L, n: lambda x: n.sum(L.expm_frechet(x, e, compute_expm=False))
    same(meshax.grad(loss(M, mjnp))(mjnp.asarray(a)), jax.grad(loss(J, jjnp))(a), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("kind,n", [("general", 4), ("spd", 4), ("triangular", 1)])
def test_sqrtm(dtype, kind, n):
    a = matrix((n, n), dtype)
    if kind == "spd":
        a = (a @ np.conj(a.T) + np.eye(n)).astype(dtype)
    elif kind == "triangular":
        a = np.triu(a) + 3 * np.eye(n, dtype=dtype)
    check(lambda L, _, x: L.sqrtm(x), a, rtol=1e-3, atol=1e-3)


def test_sqrtm_errors_as_jax():
    raises_as_jax(NotImplementedError, lambda L, _, x: L.sqrtm(x, blocksize=2), matrix((3, 3)))


@pytest.mark.parametrize("dtype,func,n", [(FLOAT, "sin", 4), (COMPLEX, "exp", 4), (FLOAT, "cos", 1)])
def test_funm(dtype, func, n):
    a = matrix((n, n), dtype)
    check(lambda L, numpy_module, x: L.funm(x, getattr(numpy_module, func)), a, rtol=1e-3, atol=1e-3)


def test_funm_error_estimate():
    a = matrix((4, 4))
    check(lambda L, numpy_module, x: L.funm(x, numpy_module.exp, disp=False), a, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype,method", [(FLOAT, "schur"), (COMPLEX, "eigen")])
@pytest.mark.parametrize("shapes", [((4, 4), (3, 3)), ((2, 3, 3), (3, 3))])
def test_solve_sylvester(dtype, shapes, method):
    (sa, sb) = shapes
    a, b = matrix(sa, dtype, shift=3.0), matrix(sb, dtype, seed=1, shift=3.0)
    c = matrix(sa[:-1] + sb[-1:], dtype, seed=2)
    check(lambda L, _, x, y, z: L.solve_sylvester(x, y, z, method=method), a, b, c, rtol=1e-3, atol=1e-3)


def test_solve_sylvester_singular_is_nan_as_jax():
    a = matrix((3, 3))
    check(lambda L, _, x: L.solve_sylvester(x, -x, x), a)


def test_solve_sylvester_errors_as_jax():
    raises_as_jax(ValueError, lambda L, _, x: L.solve_sylvester(x, x, x, method="qz"), matrix((3, 3)))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("eigh_type", [1, 2, 3])
@pytest.mark.parametrize("lower", [True, False])
def test_generalized_eigh(dtype, eigh_type, lower):
    x, y = matrix((4, 4), dtype), matrix((4, 4), dtype, seed=1)
    a = (x + np.conj(x.T)).astype(dtype)
    b = (y @ np.conj(y.T) + 4 * np.eye(4)).astype(dtype)
    check(lambda L, _, p, q: L.eigh(p, q, lower=lower, type=eigh_type, eigvals_only=True), a, b, rtol=1e-3, atol=1e-3)
    check(lambda L, n, p, q: n.abs(L.eigh(p, q, lower=lower, type=eigh_type)[1]), a, b, rtol=1e-3, atol=1e-3)


def test_solve_checks_assume_a_as_jax():
    raises_as_jax(ValueError, lambda L, _, x: L.solve(x, x, assume_a="banded"), matrix((3, 3)))
    for assume_a in ("gen", "sym", "her"):
        a = matrix((3, 3), shift=3.0)
        check(lambda L, _, x: L.solve(x + x.T, x, assume_a=assume_a), a, rtol=1e-4, atol=1e-4)
