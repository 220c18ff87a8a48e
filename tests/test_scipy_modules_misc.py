"""meshax.scipy.ndimage, integrate, interpolate, cluster.vq and sparse.linalg against JAX 0.12: values, shapes,
dtypes and weak types eagerly and under jit, errors of the same class, grad and vmap."""
from __future__ import annotations

import jax
import jax.scipy.cluster.vq  # noqa: F401
import jax.scipy.integrate  # noqa: F401
import jax.scipy.interpolate  # noqa: F401
import jax.scipy.ndimage  # noqa: F401
import jax.scipy.sparse.linalg  # noqa: F401
import numpy as np
import pytest

import meshax
import meshax.scipy.cluster.vq  # noqa: F401
import meshax.scipy.integrate  # noqa: F401
import meshax.scipy.interpolate  # noqa: F401
import meshax.scipy.ndimage  # noqa: F401
import meshax.scipy.sparse.linalg  # noqa: F401
from differential import check_modes, raises_like_jax, random_data


IMAGES = [((7,), np.float32), ((4, 5), np.int32), ((3, 4, 2), np.complex64), ((4, 5), np.float32)]


@pytest.mark.parametrize("shape,dtype", IMAGES, ids=str)
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
@pytest.mark.parametrize("coord_dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_map_coordinates(shape, dtype, order, mode, coord_dtype):
    rng = np.random.default_rng(1)
    coords = [rng.uniform(-3, s + 3, (2, 3)).astype(coord_dtype) for s in shape]
    check_modes(lambda L, x, *c: L.scipy.ndimage.map_coordinates(x, list(c), order, mode=mode, cval=1.5),
                random_data(shape, dtype), *coords, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda L: L.scipy.ndimage.map_coordinates(np.ones((3, 3)), [np.zeros(2)], 1),
    lambda L: L.scipy.ndimage.map_coordinates(np.ones(3), [np.zeros(2)], 2),
    lambda L: L.scipy.ndimage.map_coordinates(np.ones(3), [np.zeros(2)], 1, mode="grid-wrap"),
])
def test_map_coordinates_errors(call):
    raises_like_jax(call)


def test_map_coordinates_grad_and_vmap():
    image = random_data((4, 5), np.float32)
    coords = np.array([[0.3, 1.7, 2.2], [0.5, 3.1, 4.4]], np.float32)
    check_modes(lambda L, x, c: L.grad(lambda im, cc: L.scipy.ndimage.map_coordinates(im, list(cc), 1).sum(),
                                       argnums=(0, 1))(x, c), image, coords)
    check_modes(lambda L, x, c: L.vmap(lambda cc: L.scipy.ndimage.map_coordinates(x, list(cc), 1, mode="wrap"))(c),
                image, np.stack([coords, coords + 1]))


@pytest.mark.parametrize("shape,dtype", [((5,), np.float32), ((3, 4), np.int32), ((2, 3, 4), np.float32),
                                         ((3, 4), np.complex64)], ids=str)
def test_trapezoid(shape, dtype):
    y = random_data(shape, dtype)
    for axis in range(-len(shape), len(shape)):
        check_modes(lambda L, u: L.scipy.integrate.trapezoid(u, axis=axis), y, rtol=1e-5, atol=1e-5)
        check_modes(lambda L, u: L.scipy.integrate.trapezoid(u, dx=0.5, axis=axis), y, rtol=1e-5, atol=1e-5)
        x = np.sort(random_data((shape[axis],), np.float32, 2))
        check_modes(lambda L, u, v: L.scipy.integrate.trapezoid(u, v, axis=axis), y, x, rtol=1e-5, atol=1e-5)
    check_modes(lambda L, u: L.grad(lambda v: L.scipy.integrate.trapezoid(v ** 2))(u),
                random_data((5,), np.float32))


def _grid(shape, npoints, seed=3):
    rng = np.random.default_rng(seed)
    return [np.sort(rng.uniform(0, 3, shape[i])).astype(np.float32) for i in range(npoints)]


@pytest.mark.parametrize("shape,dtype", [((7,), np.float32), ((4, 5), np.int32), ((3, 4, 2), np.complex64),
                                         ((4, 5), np.float32)], ids=str)
@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill", [np.nan, None, 0.5], ids=str)
def test_regular_grid_interpolator(shape, dtype, method, fill):
    values = random_data(shape, dtype)
    rng = np.random.default_rng(4)
    for npoints in range(1, len(shape) + 1):
        points = _grid(shape, npoints)
        for xi in [rng.uniform(-0.5, 3.5, (5, npoints)).astype(np.float32),
                   rng.uniform(-0.5, 3.5, (2, 3, npoints)).astype(np.float32)]:
            check_modes(lambda L, v, x, *p: L.scipy.interpolate.RegularGridInterpolator(
                list(p), v, method=method, fill_value=fill)(x), values, xi, *points, rtol=1e-5, atol=1e-5)
        coords = [rng.uniform(-0.5, 3.5, (4,)).astype(np.float32) for _ in range(npoints)]
        check_modes(lambda L, v, *pc: L.scipy.interpolate.RegularGridInterpolator(
            list(pc[:npoints]), v, method=method, fill_value=fill)(tuple(pc[npoints:])),
            values, *points, *coords, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call", [
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)], np.ones(3), method="cubic"),
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)] * 2, np.ones(3)),
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)], np.ones(3), bounds_error=True),
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)], np.ones(3), fill_value=1j),
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)], np.ones(3))(np.ones((2, 2))),
    lambda L: L.scipy.interpolate.RegularGridInterpolator([np.arange(3.0)], np.ones(3))(np.ones(2), method="x"),
])
def test_regular_grid_interpolator_errors(call):
    raises_like_jax(call)


def test_regular_grid_interpolator_grad_vmap_pytree():
    points = _grid((4, 5), 2)
    values = random_data((4, 5), np.float32)
    xi = np.array([[0.5, 1.0], [2.0, 2.5]], np.float32)
    check_modes(lambda L, v, x, p0, p1: L.grad(lambda vv, xx: L.scipy.interpolate.RegularGridInterpolator(
        [p0, p1], vv)(xx).sum(), argnums=(0, 1))(v, x), values, xi, *points)
    check_modes(lambda L, v, x, p0, p1: L.vmap(lambda xx: L.scipy.interpolate.RegularGridInterpolator(
        [p0, p1], v)(xx))(x), values, np.stack([xi, xi + 0.3]), *points)
    interp = meshax.scipy.interpolate.RegularGridInterpolator([meshax.numpy.asarray(p) for p in points],
                                                              meshax.numpy.asarray(values))
    leaves, tree = meshax.tree_util.tree_flatten(interp)
    assert len(leaves) == 4 and meshax.tree_util.tree_unflatten(tree, leaves).method == "linear"


@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((6,), (3,)), ((5, 1), (2, 1))], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64], ids=lambda d: np.dtype(d).name)
def test_vq(shapes, dtype):
    check_modes(lambda L, o, c: L.scipy.cluster.vq.vq(o, c), random_data(shapes[0], dtype), random_data(shapes[1], dtype, 1),
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [((3, 2), (4, 3)), ((3,), (2, 2)), ((2, 2, 2), (2, 2, 2))], ids=str)
def test_vq_errors(shapes):
    raises_like_jax(lambda L: L.scipy.cluster.vq.vq(np.ones(shapes[0]), np.ones(shapes[1])))


def test_vq_grad_and_vmap():
    obs, book = random_data((5, 3), np.float32), random_data((4, 3), np.float32, 1)
    check_modes(lambda L, o, c: L.grad(lambda oo: L.scipy.cluster.vq.vq(oo, c)[1].sum())(o), obs, book)
    check_modes(lambda L, o, c: L.vmap(lambda oo: L.scipy.cluster.vq.vq(oo, c))(o), np.stack([obs, obs + 1]), book)


def _system(kind, n=6, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, n))
    if kind == "spd":
        a = q @ q.T + n * np.eye(n)
    else:
        a = q + n * np.eye(n)
    return a.astype(np.float32), rng.normal(size=n).astype(np.float32)


SOLVERS = [("cg", "spd"), ("bicgstab", "general"), ("gmres", "general")]
SOLVER_KW = [{}, {"tol": 1e-6}, {"maxiter": 3}, {"atol": 1e-3}, {"x0": "ones"}, {"M": "jacobi"}]


@pytest.mark.parametrize("name,kind", SOLVERS)
@pytest.mark.parametrize("kw", SOLVER_KW + [{"restart": 2}, {"solve_method": "incremental"}], ids=str)
def test_solvers(name, kind, kw):
    if name != "gmres" and ("restart" in kw or "solve_method" in kw):
        return
    a, b = _system(kind)
    args = [a, b]
    if kw.get("x0") == "ones":
        args.append(np.ones_like(b))
    if kw.get("M") == "jacobi":
        args.append(np.diag(1 / np.diag(a)).astype(np.float32))

    def case(L, m, v, *extra):
        options = {k: (extra[0] if k in ("x0", "M") else value) for k, value in kw.items()}
        return getattr(L.scipy.sparse.linalg, name)(m, v, **options)

    check_modes(case, *args, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kind", SOLVERS)
def test_solvers_pytree_callable_complex(name, kind):
    a, b = _system(kind)

    def case(L, m, v):
        def matvec(t):
            flat = m @ L.numpy.concatenate([t["a"], t["b"].ravel()])
            return {"a": flat[:2], "b": flat[2:].reshape(2, 2)}
        return getattr(L.scipy.sparse.linalg, name)(matvec, {"a": v[:2], "b": v[2:].reshape(2, 2)})[0]

    check_modes(case, a, b, rtol=1e-4, atol=1e-5)
    if name != "cg":
        ac = (a + 0.3j * np.eye(6)).astype(np.complex64)
        bc = (b + 1j * b[::-1]).astype(np.complex64)
        check_modes(lambda L, m, v: getattr(L.scipy.sparse.linalg, name)(m, v)[0], ac, bc, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kind", SOLVERS)
def test_solvers_grad_and_vmap(name, kind):
    a, b = _system(kind)
    solve = lambda L: getattr(L.scipy.sparse.linalg, name)  # noqa: E731
    check_modes(lambda L, m, v: L.grad(lambda mm, vv: (solve(L)(mm, vv)[0] ** 2).sum(), argnums=(0, 1))(m, v),
                a, b, rtol=1e-3, atol=1e-5)
    check_modes(lambda L, m, v: L.grad(lambda mm, vv: (solve(L)(lambda x: mm @ x, vv)[0] ** 2).sum(),
                                       argnums=(0, 1))(m, v), a, b, rtol=1e-3, atol=1e-5)
    check_modes(lambda L, m, v: L.vmap(lambda vv: solve(L)(m, vv)[0])(v), a, np.stack([b, 2 * b, b[::-1]]),
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
@pytest.mark.parametrize("call", [
    lambda f: f(np.ones((3, 4), np.float32), np.ones(3, np.float32)),
    lambda f: f("matrix", np.ones(3, np.float32)),
    lambda f: f(np.eye(3, dtype=np.float32), np.ones(3, np.float32), np.ones(2, np.float32)),
    lambda f: f(np.eye(3, dtype=np.float32), np.ones(3, np.float32), (np.ones(3, np.float32),)),
], ids=["not-square", "not-operator", "x0-shape", "x0-tree"])
def test_solver_errors(name, call):
    raises_like_jax(lambda L: call(getattr(L.scipy.sparse.linalg, name)))


def test_gmres_solve_method_error():
    raises_like_jax(lambda L: L.scipy.sparse.linalg.gmres(np.eye(2), np.ones(2), solve_method="qr"))


@pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
def test_solvers_jvp_and_grad_of_a_closed_over_operator(name):
    """Forward and reverse derivatives through the solve (implicit, as JAX's custom_linear_solve) match JAX's."""
    a = np.array([[4.0, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)
    b = np.array([1.0, 2, 3], np.float32)

    def case(L, s):
        solve = getattr(L.scipy.sparse.linalg, name)
        f = lambda t: solve(lambda v: (L.numpy.asarray(a) * t) @ v, L.numpy.asarray(b) * t * t)[0]  # noqa: E731
        return L.jvp(f, (s,), (L.numpy.float32(1.0),)), L.grad(lambda t: f(t).sum())(s)

    check_modes(case, np.float32(1.5), rtol=1e-4, atol=1e-5)
