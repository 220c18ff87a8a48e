"""jax.lax.linalg's public surface (meshax._src.lax.linalg_api) against JAX 0.12: every name, its signature, values,
shapes, dtypes and output structure eagerly and under jit, over dtypes, batch shapes and keywords; derivatives and
vmap where JAX defines them; JAX's exception classes where it raises. Decompositions that are unique (LU, QR,
Hessenberg, tridiagonal, Schur from the same LAPACK drivers) compare exactly; eigenvectors and singular vectors up
to the phase of each vector, with a reconstruction."""
from __future__ import annotations

import inspect
import warnings

import jax
import jax.lax.linalg as J
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mjnp
from meshax._src.lax import linalg_api as M

jax.config.update("jax_platforms", "cpu")

FLOAT, COMPLEX = np.float32, np.complex64
BATCHES = [(), (2, 3)]


def matrix(shape, dtype=FLOAT, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.normal(size=shape)
    if shift:
        x = x + shift * np.eye(shape[-1])
    return x.astype(dtype)


def hermitian(shape, dtype=FLOAT, seed=0):
    x = matrix(shape, dtype, seed)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def run(case, *args, mode="eager"):
    """case(linalg module, numpy module, *arrays) in meshax (eager or jit) and in JAX."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = case(J, jjnp, *[jjnp.asarray(a) for a in args])
        ours_args = [mjnp.asarray(a) for a in args]
        if mode == "jit":
            ours = meshax.jit(lambda *xs: case(M, mjnp, *xs))(*ours_args)
        else:
            ours = case(M, mjnp, *ours_args)
    return ours, theirs


def same(ours, theirs, rtol=2e-4, atol=2e-4):
    """Same tree (lists stay lists, tuples tuples), shapes, dtypes, weak types and values."""
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
    for o, t in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert np.shape(o) == np.shape(t), (np.shape(o), np.shape(t))
        assert np.asarray(o).dtype == np.asarray(t).dtype, (np.asarray(o).dtype, np.asarray(t).dtype)
        assert bool(getattr(o, "weak_type", False)) == bool(getattr(t, "weak_type", False))
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=rtol, atol=atol, equal_nan=True)


def check(case, *args, modes=("eager", "jit"), **tol):
    for mode in modes:
        same(*run(case, *args, mode=mode), **tol)


def unphased(v):
    """Each column divided by the phase of its largest entry (eigenvectors and singular vectors up to phase)."""
    v = np.asarray(v)
    index = np.argmax(np.abs(v), axis=-2)[..., None, :]
    pivot = np.take_along_axis(v, index, axis=-2)
    return v * (np.abs(pivot) / np.where(pivot == 0, 1, pivot))


def test_the_names_and_signatures_are_jaxs():
    public = sorted(n for n in dir(J) if not n.startswith("_"))
    assert sorted(M.__all__) == public
    for name in public:
        theirs = getattr(J, name)
        if callable(theirs) and not isinstance(theirs, type) and not name.endswith("_p"):
            ours_params = list(inspect.signature(getattr(M, name)).parameters.items())
            theirs_params = list(inspect.signature(theirs).parameters.items())
            assert [(n, p.kind, p.default) for n, p in ours_params] == \
                [(n, p.kind, p.default) for n, p in theirs_params], name
    for enum_name in ("EigImplementation", "EighImplementation", "SvdAlgorithm"):
        assert {m.name: m.value for m in getattr(M, enum_name)} == {m.name: m.value for m in getattr(J, enum_name)}


# ---- decompositions that are unique: exact comparisons ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("mn", [(4, 4), (3, 5), (5, 3), (1, 1)])
def test_lu(dtype, batch, mn):
    check(lambda L, n, a: L.lu(a), matrix(batch + mn, dtype))


@pytest.mark.parametrize("batch", [(), (3,)])
@pytest.mark.parametrize("size", [3, 5])
def test_lu_pivots_to_permutation(batch, size):
    pivots = np.random.default_rng(1).integers(0, 3, size=batch + (3,)).astype(np.int32)
    pivots = np.maximum(pivots, np.arange(3, dtype=np.int32))  # LAPACK's pivots never point above their row
    check(lambda L, n, p: L.lu_pivots_to_permutation(p, size), pivots)


def test_lu_pivots_to_permutation_errors_as_jax():
    for lib in (J, M):
        with pytest.raises(ValueError):
            lib.lu_pivots_to_permutation(np.zeros(3, np.int32), 2)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("shape,full", [((4, 4), True), ((5, 3), True), ((3, 5), False)])
@pytest.mark.parametrize("pivoting", [False, True])
def test_qr(dtype, batch, shape, full, pivoting):
    check(lambda L, n, a: L.qr(a, full_matrices=full, pivoting=pivoting), matrix(batch + shape, dtype))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_hessenberg(dtype, batch, n):
    check(lambda L, _, a: L.hessenberg(a), matrix(batch + (n, n), dtype))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch,n", [((), 1), ((2,), 4)])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal(dtype, batch, lower, n):
    check(lambda L, _, a: L.tridiagonal(a, lower=lower), hermitian(batch + (n, n), dtype))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(2,)])
@pytest.mark.parametrize("shape,k", [((4, 4), 3), ((5, 3), 3), ((5, 3), 2), ((4, 2), 0)])
def test_householder_product(dtype, batch, shape, k):
    a, taus = matrix(batch + shape, dtype), matrix(batch + (k,), dtype, seed=1) * 0.5
    check(lambda L, _, x, t: L.householder_product(x, t), a, taus)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_ormqr(dtype, left, transpose, batch):
    a = matrix(batch + (4, 3), dtype)
    taus = matrix(batch + (3,), dtype, seed=1) * 0.5
    c = matrix(batch + ((4, 2) if left else (2, 4)), dtype, seed=2)
    check(lambda L, _, x, t, y: L.ormqr(x, t, y, left=left, transpose=transpose), a, taus, c)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("vectors", [True, False])
def test_schur(dtype, batch, vectors):
    check(lambda L, _, a: L.schur(a, compute_schur_vectors=vectors), matrix(batch + (4, 4), dtype))


def test_schur_sorting_raises_as_jax():
    for lib in (J, M):
        with pytest.raises(NotImplementedError):
            lib.schur(np.eye(3, dtype=FLOAT), sort_eig_vals=True)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("symmetrize", [True, False])
def test_cholesky(dtype, batch, symmetrize):
    check(lambda L, _, a: L.cholesky(a, symmetrize_input=symmetrize), hermitian(batch + (4, 4), dtype))


def test_cholesky_of_an_indefinite_matrix_is_nan_as_jax():
    check(lambda L, _, a: L.cholesky(a, symmetrize_input=False), matrix((4, 4)))


@pytest.mark.parametrize("n", [1, 4])
def test_cholesky_update(n):
    r = np.linalg.cholesky(hermitian((n, n))).T.copy()
    w = matrix((n,), seed=3)
    check(lambda L, _, x, y: L.cholesky_update(x, y), r, w, atol=1e-4)


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (2.0, -0.5)])
@pytest.mark.parametrize("symmetrize", [True, False])
def test_symmetric_product(batch, alpha, beta, symmetrize):
    a, c = matrix(batch + (3, 4)), hermitian(batch + (3, 3), seed=1)
    check(lambda L, _, x, y: L.symmetric_product(x, y, alpha=alpha, beta=beta, symmetrize_output=symmetrize), a, c)


def test_symmetric_product_rejects_complex_as_jax():
    c = matrix((3, 3), COMPLEX)
    for lib in (J, M):
        with pytest.raises(TypeError):
            lib.symmetric_product(c, c)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("m,k", [(4, 2), (1, 1), (5, 1)])
def test_tridiagonal_solve(dtype, batch, m, k):
    dl, d, du = (matrix(batch + (m,), dtype, seed=s) for s in (1, 2, 3))
    d = d + 4
    b = matrix(batch + (m, k), dtype, seed=4)
    check(lambda L, _, *xs: L.tridiagonal_solve(*xs), dl, d, du, b)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("left,lower,transpose,conj,unit", [(True, True, False, False, False),
                                                           (False, False, True, False, True),
                                                           (True, False, True, True, False)])
def test_triangular_solve(dtype, batch, left, lower, transpose, conj, unit):
    a = matrix(batch + (4, 4), dtype, shift=4.0)
    b = matrix(batch + ((4, 2) if left else (2, 4)), dtype, seed=1)
    check(lambda L, _, x, y: L.triangular_solve(x, y, left_side=left, lower=lower, transpose_a=transpose,
                                                conjugate_a=conj, unit_diagonal=unit), a, b)


# ---- decompositions up to phase ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("lower,subset", [(True, None), (False, (0, 4))])
def test_eigh(dtype, batch, lower, subset):
    a = hermitian(batch + (4, 4), dtype)

    def case(L, n, x):
        v, w = L.eigh(x, lower=lower, subset_by_index=subset, sort_eigenvalues=True)
        return w, n.abs(v)

    check(case, a)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("left,right", [(True, True), (False, True), (True, False), (False, False)])
def test_eig(dtype, left, right):
    a = matrix((2, 4, 4), dtype)
    for mode in ("eager", "jit"):
        ours, theirs = run(lambda L, _, x: L.eig(x, compute_left_eigenvectors=left,
                                                  compute_right_eigenvectors=right), a, mode=mode)
        assert isinstance(ours, list) and len(ours) == len(theirs)
        same(ours[0], theirs[0], rtol=1e-4, atol=1e-4)
        for o, t in zip(ours[1:], theirs[1:]):
            same(unphased(o), unphased(t), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("batch", [(2,)])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("full", [True, False])
def test_svd(dtype, batch, shape, full):
    a = matrix(batch + shape, dtype)
    k = min(shape)

    def case(L, n, x):
        u, s, vh = L.svd(x, full_matrices=full)
        back = n.matmul(u[..., :, :k] * s[..., None, :].astype(x.dtype), vh[..., :k, :])
        return s, back, n.abs(u[..., :, :k]), n.abs(vh[..., :k, :]), n.zeros(u.shape), n.zeros(vh.shape)

    check(case, a)
    check(lambda L, _, x: L.svd(x, compute_uv=False), a)


def test_eigh_subset_raises_as_jax_on_cpu():
    for lib in (J, M):
        with pytest.raises(NotImplementedError):
            lib.eigh(hermitian((4, 4)), subset_by_index=(1, 3))


def test_svd_subset_errors_as_jax():
    a = matrix((4, 4))
    for lib in (J, M):
        with pytest.raises(ValueError):
            lib.svd(a, subset_by_index=(1, 3))
        with pytest.raises(NotImplementedError):
            lib.svd(a, full_matrices=False, subset_by_index=(1, 3))


@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
@pytest.mark.parametrize("hermitian_input", [False, True])
def test_qdwh(dtype, shape, hermitian_input):
    a = hermitian(shape, dtype) if hermitian_input and shape[0] == shape[1] else matrix(shape, dtype)
    check(lambda L, _, x: L.qdwh(x, is_hermitian=hermitian_input), a, rtol=1e-3, atol=1e-3)


def test_qdwh_rejects_wide_matrices_as_jax():
    for lib in (J, M):
        with pytest.raises(ValueError):
            lib.qdwh(matrix((3, 5)))


def test_cholesky_of_integers_is_promoted_as_jax():
    check(lambda L, _, a: L.cholesky(a), np.ones((3, 3), np.int32))
    check(lambda L, _, a: L.cholesky(a), (2 * np.eye(3)).astype(np.int32))


@pytest.mark.parametrize("name,args", [("lu", ((3, 3),)), ("qr", ((3, 3),)),
                                       ("hessenberg", ((3, 3),)), ("schur", ((3, 3),))])
def test_integer_inputs_raise_type_error_as_jax(name, args):
    operands = [np.ones(s, np.int32) for s in args]
    for lib in (J, M):
        with pytest.raises(TypeError):
            getattr(lib, name)(*operands)


# ---- derivatives and vmap ----------------------------------------------------------------------------------------


def grads(case, *args, argnums=0):
    """Gradients of case(L, n, *xs) (a scalar) in meshax (eager and under jit) and JAX."""
    theirs = jax.grad(lambda *xs: case(J, jjnp, *xs), argnums=argnums)(*[jjnp.asarray(a) for a in args])
    ours_fn = meshax.grad(lambda *xs: case(M, mjnp, *xs), argnums=argnums)
    arrays = [mjnp.asarray(a) for a in args]
    return [(ours_fn(*arrays), theirs), (meshax.jit(ours_fn)(*arrays), theirs)]


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
@pytest.mark.parametrize("dtype", [FLOAT, COMPLEX])
def test_lu_grad(shape, dtype):
    a = matrix(shape, dtype, shift=3.0 if shape[0] == shape[1] else 0.0)
    for ours, theirs in grads(lambda L, n, x: n.sum(n.abs(L.lu(x)[0]) ** 2), a):
        same(ours, theirs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_pivoted_qr_grad(shape):
    a = matrix(shape)
    for ours, theirs in grads(lambda L, n, x: n.sum(L.qr(x, pivoting=True, full_matrices=False)[1] ** 2), a):
        same(ours, theirs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("argnum", [0, 1, 2, 3])
def test_tridiagonal_solve_grad(argnum):
    dl, d, du = (matrix((5,), seed=s) for s in (1, 2, 3))
    b = matrix((5, 2), seed=4)
    for ours, theirs in grads(lambda L, n, *xs: n.sum(L.tridiagonal_solve(*xs) ** 2), dl, d + 4, du, b,
                              argnums=argnum):
        same(ours, theirs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name,case,make", [
    ("cholesky", lambda L, n, x: n.sum(L.cholesky(x)), lambda: hermitian((4, 4))),
    ("eigh_values", lambda L, n, x: n.sum(L.eigh(x)[1] ** 2), lambda: hermitian((4, 4))),
    ("svd_values", lambda L, n, x: n.sum(L.svd(x, compute_uv=False)), lambda: matrix((4, 3))),
    ("eigvals", lambda L, n, x: n.sum(n.real(L.eig(x, compute_left_eigenvectors=False,
                                                       compute_right_eigenvectors=False)[0])),
     lambda: matrix((4, 4))),
    ("qr", lambda L, n, x: n.sum(L.qr(x, full_matrices=False)[0]), lambda: matrix((5, 3))),
    ("triangular_solve", lambda L, n, x: n.sum(L.triangular_solve(x, n.ones((4, 2)), left_side=True, lower=True)),
     lambda: matrix((4, 4), shift=4.0)),
])
def test_grads(name, case, make):
    for ours, theirs in grads(case, make()):
        same(ours, theirs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name,case,make", [
    ("hessenberg", lambda L, _, x: L.hessenberg(x)[0], lambda: matrix((4, 4))),
    ("schur", lambda L, _, x: L.schur(x)[0], lambda: matrix((4, 4))),
    ("symmetric_product", lambda L, _, x: L.symmetric_product(x, x[:, :3]), lambda: matrix((3, 3))),
    ("householder_product", lambda L, _, x: L.householder_product(x, x[0]), lambda: matrix((3, 3))),
])
def test_no_derivative_where_jax_has_none(name, case, make):
    a = make()
    with pytest.raises(NotImplementedError):
        jax.grad(lambda x: jjnp.sum(case(J, jjnp, x)))(jjnp.asarray(a))
    with pytest.raises(NotImplementedError):
        meshax.grad(lambda x: mjnp.sum(case(M, mjnp, x)))(mjnp.asarray(a))


@pytest.mark.parametrize("name,case,make", [
    ("lu", lambda L, _, x: L.lu(x), lambda: matrix((3, 4, 4))),
    ("hessenberg", lambda L, _, x: L.hessenberg(x), lambda: matrix((3, 4, 4))),
    ("tridiagonal", lambda L, _, x: L.tridiagonal(x), lambda: hermitian((3, 4, 4))),
    ("schur", lambda L, _, x: L.schur(x), lambda: matrix((3, 4, 4))),
    ("qdwh", lambda L, _, x: L.qdwh(x)[:2], lambda: matrix((2, 4, 3))),
    ("qr_pivoting", lambda L, _, x: L.qr(x, pivoting=True), lambda: matrix((3, 4, 3))),
])
def test_vmap(name, case, make):
    a = make()
    theirs = jax.vmap(lambda x: case(J, jjnp, x))(jjnp.asarray(a))
    ours = meshax.vmap(lambda x: case(M, mjnp, x))(mjnp.asarray(a))
    same(ours, theirs, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name,case", [
    ("lu", lambda L, _, x: L.lu(x)),
    ("hessenberg", lambda L, _, x: L.hessenberg(x)),
    ("qr_pivoting", lambda L, _, x: L.qr(x, pivoting=True)),
    ("schur", lambda L, _, x: L.schur(x)),
    ("tridiagonal_solve", lambda L, _, x: L.tridiagonal_solve(x[0], x[1] + 4, x[2], x[:, :2])),
])
def test_inside_shard_map(name, case):
    """Every device of an 8-device mesh computes the whole case on replicated inputs."""
    from meshax.sharding import Mesh, PartitionSpec

    a = matrix((4, 4))
    mesh = Mesh(np.array(meshax.devices()), ("x",))
    mapped = meshax.shard_map(lambda x: case(M, mjnp, x), mesh=mesh, in_specs=PartitionSpec(),
                              out_specs=PartitionSpec(), check_vma=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        same(mapped(mjnp.asarray(a)), case(J, jjnp, jjnp.asarray(a)))
