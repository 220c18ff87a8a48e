"""meshax's derivatives (grad, jvp, vjp) against real JAX, eagerly and under jit.

Every case is a function `f(L, *args)` written once for both libraries (`L.np`, `L.nn`). For
each case and each set of argument shapes, random inputs are drawn in the function's domain, a
random cotangent-like weight `w` of the output's shape and random tangents, and

  * grad of `sum(f(*args) * w)` with respect to every argument,
  * jvp of `f` along the tangents (primal and tangent outputs),
  * vjp of `f` pulled back from `w`

are compared with JAX's (float32: rtol 1e-4 / atol 1e-5). meshax runs them in four modes:
eagerly, all under `jit` (jit of grad/jvp/vjp), grad/jvp/vjp of `jit(f)`, and all inside a
`shard_map` over 8 devices (every device differentiating the replicated problem). JAX's side is
computed once per case under one jax.jit (compiles dominate the file's time).

Where JAX returns a value, a meshax exception fails the test: nothing here is skipped or xfailed.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
import jax.nn as jnn  # noqa: E402

import meshax  # noqa: E402
import meshax.nn as mnn  # noqa: E402
import meshax.numpy as mnp  # noqa: E402
from meshax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402
from meshax._src.arrays.array import Array as ConcreteArray  # noqa: E402  (meshax.Array also covers tracers)

J = types.SimpleNamespace(name="jax", np=jjnp, nn=jnn)
M = types.SimpleNamespace(name="meshax", np=mnp, nn=mnn)

RTOL, ATOL = 1e-4, 1e-5

# Domains: (lo, hi) uniform; "nz" = magnitude in [0.3, 2] with a random sign.
ANY = (-2.0, 2.0)
POS = (0.3, 3.0)
UNIT = (-0.9, 0.9)
NZ = "nz"


def draw(rng: np.random.Generator, shape: tuple[int, ...], domain: Any, dtype: Any) -> np.ndarray:
    if domain == NZ:
        mag = rng.uniform(0.3, 2.0, size=shape)
        sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
        return np.asarray(mag * sign, dtype=dtype)
    lo, hi = domain
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype=dtype)


class Case:
    def __init__(self, name: str, fn: Callable[..., Any], shapes: list[tuple[tuple[int, ...], ...]],
                 domains: tuple[Any, ...] = (ANY,)):
        self.name, self.fn, self.shapes = name, fn, shapes
        self.domains = domains


CASES: list[Case] = []


def case(name: str, fn: Callable[..., Any], shapes: list[tuple[tuple[int, ...], ...]], *domains: Any) -> None:
    CASES.append(Case(name, fn, shapes, domains or (ANY,) * len(shapes[0])))


UNARY_SHAPES = [((7,),), ((3, 4),), ((),)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))]

# --- elementwise unary ----------------------------------------------------------------------
for _name, _dom in [("sin", ANY), ("cos", ANY), ("tan", (-1.2, 1.2)), ("arcsin", UNIT), ("arccos", UNIT),
                    ("arctan", ANY), ("sinh", ANY), ("cosh", ANY), ("tanh", ANY), ("arcsinh", ANY),
                    ("arccosh", (1.2, 3.0)), ("arctanh", UNIT), ("exp", ANY), ("exp2", ANY), ("expm1", ANY),
                    ("log", POS), ("log1p", (-0.7, 3.0)), ("log2", POS), ("log10", POS), ("cbrt", NZ),
                    ("sqrt", POS), ("square", ANY), ("reciprocal", NZ), ("abs", NZ), ("negative", ANY),
                    ("sign", NZ), ("floor", ANY)]:
    case(_name, (lambda n: lambda L, x: getattr(L.np, n)(x))(_name), UNARY_SHAPES, _dom)

# --- elementwise binary ---------------------------------------------------------------------
for _name, _doms in [("add", (ANY, ANY)), ("subtract", (ANY, ANY)), ("multiply", (ANY, ANY)),
                     ("divide", (ANY, NZ)), ("power", (POS, ANY)), ("maximum", (ANY, ANY)),
                     ("minimum", (ANY, ANY)), ("arctan2", (NZ, NZ)), ("hypot", (NZ, NZ)),
                     ("logaddexp", (ANY, ANY)), ("remainder", ((0.1, 5.0), (0.7, 1.3))),
                     ("copysign", (NZ, NZ))]:
    case(_name, (lambda n: lambda L, x, y: getattr(L.np, n)(x, y))(_name), BINARY_SHAPES, *_doms)
case("where", lambda L, x, y: L.np.where(x > 0, x * y, L.np.sin(y)), BINARY_SHAPES, ANY, ANY)
case("power_scalar_exp", lambda L, x: L.np.power(x, 3), UNARY_SHAPES, ANY)
case("operators", lambda L, x, y: (x * 2.0 - y) / (1.5 + y * y) + x ** 2, BINARY_SHAPES, ANY, ANY)

# --- reductions -----------------------------------------------------------------------------
RED_SHAPES = [((3, 4),), ((2, 3, 5),)]
for _name, _dom in [("sum", ANY), ("prod", (0.5, 1.5)), ("max", ANY), ("min", ANY), ("mean", ANY),
                    ("var", ANY), ("std", ANY)]:
    case(_name, (lambda n: lambda L, x: getattr(L.np, n)(x))(_name), RED_SHAPES, _dom)
    case(_name + "_axis1", (lambda n: lambda L, x: getattr(L.np, n)(x, axis=1))(_name), RED_SHAPES, _dom)
    case(_name + "_keepdims", (lambda n: lambda L, x: getattr(L.np, n)(x, axis=-1, keepdims=True))(_name),
         RED_SHAPES, _dom)
case("cumsum", lambda L, x: L.np.cumsum(x, axis=1), RED_SHAPES, ANY)
case("cumsum_flat", lambda L, x: L.np.cumsum(x), RED_SHAPES, ANY)
case("cumprod", lambda L, x: L.np.cumprod(x, axis=-1), RED_SHAPES, (0.5, 1.5))
case("logsumexp", lambda L, x: L.nn.logsumexp(x), RED_SHAPES, ANY)
case("logsumexp_axis", lambda L, x: L.nn.logsumexp(x, axis=-1), RED_SHAPES, ANY)
case("softmax", lambda L, x: L.nn.softmax(x, axis=-1), RED_SHAPES, ANY)
case("log_softmax", lambda L, x: L.nn.log_softmax(x, axis=-1), RED_SHAPES, ANY)

# --- contractions ---------------------------------------------------------------------------
case("matmul", lambda L, x, y: L.np.matmul(x, y), [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4, 5)),
                                                   ((3, 4), (4,)), ((2, 3, 4), (2, 4, 2))])
case("matmul_op", lambda L, x, y: x @ y, [((3, 4), (4, 5))])
case("dot", lambda L, x, y: L.np.dot(x, y), [((3, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,))])
case("einsum_ij_jk", lambda L, x, y: L.np.einsum("ij,jk->ik", x, y), [((3, 4), (4, 5))])
case("einsum_batch", lambda L, x, y: L.np.einsum("bij,bjk->bik", x, y), [((2, 3, 4), (2, 4, 5))])
case("einsum_trace_like", lambda L, x, y: L.np.einsum("ij,ij->i", x, y), [((3, 4), (3, 4))])
case("tensordot2", lambda L, x, y: L.np.tensordot(x, y, axes=2), [((2, 3, 4), (3, 4, 5))])
case("tensordot_axes", lambda L, x, y: L.np.tensordot(x, y, axes=([1], [0])), [((3, 4), (4, 5))])
case("outer", lambda L, x, y: L.np.outer(x, y), [((3,), (5,)), ((2, 2), (3,))])

# --- shape ops ------------------------------------------------------------------------------
case("reshape", lambda L, x: L.np.reshape(x, (-1, 2)), [((3, 4),), ((2, 3, 2),)])
case("reshape_method", lambda L, x: x.reshape(2, -1), [((3, 4),)])
case("transpose", lambda L, x: L.np.transpose(x), [((3, 4),), ((2, 3, 4),)])
case("transpose_perm", lambda L, x: L.np.transpose(x, (1, 2, 0)), [((2, 3, 4),)])
case("T", lambda L, x: x.T, [((3, 4),)])
case("broadcast_to", lambda L, x: L.np.broadcast_to(x, (2, 3, 4)), [((4,),), ((3, 1),)])
case("concatenate", lambda L, x, y: L.np.concatenate([x, y], axis=0), [((2, 3), (4, 3)), ((5,), (2,))])
case("concatenate_ax1", lambda L, x, y: L.np.concatenate([x, y, x], axis=1), [((2, 3), (2, 1))])
case("stack", lambda L, x, y: L.np.stack([x, y], axis=1), [((2, 3), (2, 3)), ((4,), (4,))])
case("squeeze", lambda L, x: L.np.squeeze(x, axis=1), [((3, 1, 4),), ((2, 1),)])
case("expand_dims", lambda L, x: L.np.expand_dims(x, 1), [((3, 4),), ((5,),)])
case("flip", lambda L, x: L.np.flip(x, axis=0), [((3, 4),), ((5,),)])
case("flip_all", lambda L, x: L.np.flip(x), [((3, 4),)])
case("roll", lambda L, x: L.np.roll(x, 2, axis=-1), [((3, 4),), ((5,),)])
case("roll_flat", lambda L, x: L.np.roll(x, -3), [((3, 4),)])
case("pad", lambda L, x: L.np.pad(x, ((1, 2), (0, 1))), [((3, 4),)])
case("pad_const", lambda L, x: L.np.pad(x, 2, constant_values=1.5), [((5,),), ((2, 3),)])
case("sort", lambda L, x: L.np.sort(x, axis=-1), [((3, 4),), ((7,),)])
case("sort_axis0", lambda L, x: L.np.sort(x, axis=0), [((5, 3),)])
case("take", lambda L, x: L.np.take(x, np.array([2, 0, 1, 2]), axis=0), [((3, 4),), ((3,),)])
case("take_axis1", lambda L, x: L.np.take(x, np.array([[3, 0], [1, 1]]), axis=1), [((3, 4),)])
case("take_along_axis",
     lambda L, x: L.np.take_along_axis(x, np.array([[2, 0, 1, 1], [0, 0, 3, 2], [1, 2, 3, 0]]), axis=1),
     [((3, 4),)])
case("getitem_slices", lambda L, x: x[1:3, ::2], [((4, 5),)])
case("getitem_int", lambda L, x: x[1], [((4, 5),), ((3,),)])
case("getitem_neg_step", lambda L, x: x[::-2, 1:], [((5, 4),)])
case("getitem_array", lambda L, x: x[np.array([0, 2, 2, 3])], [((4, 5),), ((4,),)])
case("getitem_mixed", lambda L, x: x[:, None, 1], [((4, 5),)])
case("getitem_ellipsis", lambda L, x: x[..., -1], [((2, 3, 4),)])
case("getitem_2arrays", lambda L, x: x[np.array([0, 1, 1]), np.array([2, 0, 2])], [((3, 4),)])
case("getitem_bool", lambda L, x: x[np.array([True, False, True, True])], [((4, 3),)])
case("at_set", lambda L, x, y: x.at[1:3].set(y), [((5, 3), (2, 3))])
case("at_set_int", lambda L, x, y: x.at[0].set(y), [((4, 3), (3,))])
case("at_add_dup", lambda L, x, y: x.at[np.array([0, 2, 0])].add(y), [((4, 3), (3, 3)), ((5,), (3,))])
case("at_mul", lambda L, x, y: x.at[1].multiply(y), [((3, 4), (4,))])
case("clip", lambda L, x: L.np.clip(x, -0.5, 0.7), [((7,),), ((3, 4),)])
case("tanh_mlp",
     lambda L, w1, b1, w2: L.np.tanh(
         np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4) @ w1 + b1) @ w2,
     [((4, 5), (5,), (5, 2))], (-1, 1), (-1, 1), (-1, 1))
case("relu_mlp",
     lambda L, w1, x: L.np.sum(L.nn.relu(x @ w1) ** 2, axis=-1),
     [((4, 6), (3, 4))], NZ, NZ)


def _ids() -> list[tuple[Case, int]]:
    return [(c, i) for c in CASES for i in range(len(c.shapes))]


def _case_id(ci: tuple[Case, int]) -> str:
    c, i = ci
    return f"{c.name}-" + "x".join("(" + ",".join(map(str, s)) + ")" for s in c.shapes[i])


def _seed(name: str, i: int) -> int:
    return sum(map(ord, name)) * 97 + i


def make_inputs(c: Case, i: int, dtype: Any = np.float32) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(_seed(c.name, i))
    args = [draw(rng, s, d, dtype) for s, d in zip(c.shapes[i], c.domains)]
    tangents = [np.asarray(rng.normal(size=s), dtype=dtype) for s in c.shapes[i]]
    out_shape = jax.eval_shape(lambda *a: c.fn(J, *a), *args).shape
    w = np.asarray(rng.normal(size=out_shape), dtype=dtype)
    return args, tangents, w


def derivatives(grad, jvp, vjp, f, args, tangents, w):
    """(primal out, grads, jvp tangent out, vjp cotangents) for library functions grad/jvp/vjp."""
    argnums = tuple(range(len(args)))
    grads = grad(lambda *a: (f(*a) * w).sum(), argnums=argnums)(*args)
    out, tout = jvp(f, tuple(args), tuple(tangents))
    _, pullback = vjp(f, *args)
    cts = pullback(w)
    return out, grads, tout, cts


@functools.lru_cache(maxsize=None)
def oracle(name: str, i: int, x64: bool = False):
    c = next(c for c in CASES if c.name == name)
    args, tangents, w = make_inputs(c, i, np.float64 if x64 else np.float32)
    f = lambda *a: c.fn(J, *a)  # noqa: E731
    res = jax.jit(lambda a, t, w_: derivatives(jax.grad, jax.jvp, jax.vjp, f, a, t, w_))(args, tangents, w)
    return jax.tree_util.tree_map(np.asarray, res)


def run_meshax(c: Case, i: int, mode: str, dtype: Any = np.float32):
    args, tangents, w = make_inputs(c, i, dtype)
    margs = [mnp.asarray(a) for a in args]
    mtan = [mnp.asarray(t) for t in tangents]
    mw = mnp.asarray(w)
    f = lambda *a: c.fn(M, *a)  # noqa: E731
    if mode == "eager":
        res = derivatives(meshax.grad, meshax.jvp, meshax.vjp, f, margs, mtan, mw)
    elif mode == "jit_of_grad":
        res = meshax.jit(lambda a, t, w_: derivatives(meshax.grad, meshax.jvp, meshax.vjp, f, a, t, w_))(
            margs, mtan, mw)
    elif mode == "grad_of_jit":
        res = derivatives(meshax.grad, meshax.jvp, meshax.vjp, meshax.jit(f), margs, mtan, mw)
    elif mode == "in_shard_map":  # every device differentiates the whole (replicated) problem
        mesh = meshax.make_mesh((8,), ("d",))
        res = meshax.shard_map(lambda a, t, w_: derivatives(meshax.grad, meshax.jvp, meshax.vjp, f, a, t, w_),
                               mesh=mesh, in_specs=P(), out_specs=P())(margs, mtan, mw)
    else:
        raise ValueError(mode)
    return res


def compare(got, want, dtype=np.float32, rtol=RTOL, atol=ATOL):
    labels = ("primal", "grad", "jvp", "vjp")
    for label, g, e in zip(labels, got, want):
        gl, gt = jax.tree_util.tree_flatten(g)
        el, et = jax.tree_util.tree_flatten(e)
        assert len(gl) == len(el), f"{label}: {len(gl)} leaves, JAX has {len(el)}"
        for k, (a, b) in enumerate(zip(gl, el)):
            a_np = np.asarray(a)
            assert a_np.shape == b.shape, f"{label}[{k}] shape {a_np.shape} != JAX {b.shape}"
            assert a_np.dtype == b.dtype, f"{label}[{k}] dtype {a_np.dtype} != JAX {b.dtype}"
            np.testing.assert_allclose(a_np, b, rtol=rtol, atol=atol, err_msg=f"{label}[{k}]")


MODES = ["eager", "jit_of_grad", "grad_of_jit"]


@pytest.mark.parametrize("mode", MODES + ["in_shard_map"])
@pytest.mark.parametrize("ci", _ids(), ids=_case_id)
def test_derivatives(ci, mode):
    c, i = ci
    want = oracle(c.name, i)
    got = run_meshax(c, i, mode)
    compare(got, want)


# --- float64 -------------------------------------------------------------------------------
X64_CASES = ["sin", "log", "tanh", "power", "divide", "matmul", "logsumexp_axis", "softmax", "cumprod",
             "getitem_array", "at_add_dup", "tanh_mlp"]


@pytest.fixture
def x64():
    old_j, old_m = jax.config.jax_enable_x64, meshax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    meshax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old_j)
        meshax.config.update("jax_enable_x64", old_m)


@pytest.mark.parametrize("mode", ["eager", "jit_of_grad"])
@pytest.mark.parametrize("name", X64_CASES)
def test_derivatives_x64(name, mode, x64):
    c = next(c for c in CASES if c.name == name)
    want = oracle(name, 0, True)
    got = run_meshax(c, 0, mode, np.float64)
    compare(got, want, np.float64, rtol=1e-10, atol=1e-12)


# --- sharded inputs ------------------------------------------------------------------------
# Every gradient here depends on x: under jax.jit, a gradient that does not (e.g. of x.T * 2) comes
# back on a SingleDeviceSharding in JAX too, so only x-dependent ones must keep x's sharding.
SHARDED = [
    ("sin", lambda L, x: L.np.sin(x)),
    ("exp_mul", lambda L, x: L.np.exp(x) * x),
    ("sum_axis1", lambda L, x: L.np.sum(x * x, axis=1)),
    ("sum_all", lambda L, x: L.np.sum(L.np.tanh(x))),
    ("matmul_rep", lambda L, x: L.np.sin(x) @ np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)),
    ("softmax", lambda L, x: L.nn.softmax(x, axis=-1)),
    ("max_axis0", lambda L, x: L.np.max(x, axis=0)),
    ("transpose", lambda L, x: L.np.cos(x).T * 2.0),
    ("getitem", lambda L, x: (x * x)[::2, 1:]),
    ("mean_var", lambda L, x: L.np.mean(x) + L.np.var(x, axis=0)),
]


@pytest.fixture(scope="module")
def mesh():
    return meshax.make_mesh((4, 2), ("a", "b"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", [P("a"), P("a", "b"), P(None, "b")], ids=str)
@pytest.mark.parametrize("name,fn", SHARDED, ids=[n for n, _ in SHARDED])
def test_sharded_grad(name, fn, spec, mode, mesh):
    rng = np.random.default_rng(_seed(name, 7))
    x = rng.uniform(-2, 2, size=(8, 6)).astype(np.float32)
    w = rng.normal(size=jax.eval_shape(lambda a: fn(J, a), x).shape).astype(np.float32)
    want = np.asarray(jax.grad(lambda a: jjnp.sum(fn(J, a) * w))(x))
    sharding = NamedSharding(mesh, spec)
    mx = meshax.device_put(x, sharding)
    loss = lambda a: mnp.sum(fn(M, a) * w)  # noqa: E731
    g = {"eager": lambda: meshax.grad(loss), "jit_of_grad": lambda: meshax.jit(meshax.grad(loss)),
         "grad_of_jit": lambda: meshax.grad(meshax.jit(loss))}[mode]()
    got = g(mx)
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=ATOL)
    assert got.sharding == mx.sharding, f"grad sharding {got.sharding} != input sharding {mx.sharding}"


# --- composition ---------------------------------------------------------------------------
def test_nested_jit_closure():
    got = meshax.jit(lambda x: meshax.jit(lambda y: x + y)(1.0))(2.0)
    assert float(got) == 3.0
    assert float(jax.jit(lambda x: jax.jit(lambda y: x + y)(1.0))(2.0)) == 3.0


def _f(L):
    return lambda x: L.np.sum(L.np.sin(x) * x ** 2)


def test_grad_of_jit_and_jit_of_grad():
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    want = np.asarray(jax.grad(_f(J))(x))
    np.testing.assert_allclose(np.asarray(meshax.grad(meshax.jit(_f(M)))(x)), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(meshax.jit(meshax.grad(_f(M)))(x)), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(meshax.jit(meshax.grad(meshax.jit(_f(M))))(x)), want,
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_grad_of_grad(jitted):
    f = lambda L: lambda x: L.np.sin(x) * x ** 3  # noqa: E731
    for x in [0.3, -1.2, 2.0]:
        want = float(jax.grad(jax.grad(f(J)))(x))
        g2 = meshax.grad(meshax.grad(f(M)))
        if jitted:
            g2 = meshax.jit(g2)
        np.testing.assert_allclose(float(g2(x)), want, rtol=RTOL, atol=ATOL)
    want3 = float(jax.grad(jax.grad(jax.grad(f(J))))(0.7))
    np.testing.assert_allclose(float(meshax.grad(meshax.grad(meshax.grad(f(M))))(0.7)), want3, rtol=RTOL)


def test_hessian_vector_product():
    def f(L):
        return lambda x: L.np.sum(L.np.tanh(x) ** 2 * x[::-1])
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    v = np.linspace(0.5, -0.3, 5, dtype=np.float32)
    want = np.asarray(jax.jvp(jax.grad(f(J)), (x,), (v,))[1])
    got = meshax.jvp(meshax.grad(f(M)), (mnp.asarray(x),), (mnp.asarray(v),))[1]
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=ATOL)


def _closure_depth3(L, grad, jit):
    def outer(x):
        def middle(y):
            def inner(z):
                return L.np.sin(x * y * z) + x * z
            return grad(inner)(y + 1.0) * x
        return grad(jit(middle))(x * 2.0)
    return outer


@pytest.mark.parametrize("x", [0.3, 1.1])
def test_closure_over_outer_tracers_depth3(x):
    want = float(jax.grad(_closure_depth3(J, jax.grad, jax.jit))(x))
    got = meshax.grad(_closure_depth3(M, meshax.grad, meshax.jit))(x)
    np.testing.assert_allclose(float(got), want, rtol=RTOL, atol=ATOL)
    got_jit = meshax.jit(meshax.grad(_closure_depth3(M, meshax.grad, meshax.jit)))(x)
    np.testing.assert_allclose(float(got_jit), want, rtol=RTOL, atol=ATOL)


def test_argnums_tuple():
    f = lambda L: lambda x, y, z: L.np.sum(x * L.np.exp(y)) + z  # noqa: E731
    x = np.arange(3, dtype=np.float32)
    y = np.linspace(0, 1, 3, dtype=np.float32)
    want = jax.grad(f(J), argnums=(0, 1))(x, y, 2.0)
    got = meshax.grad(f(M), argnums=(0, 1))(x, y, 2.0)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)
    got1 = meshax.grad(f(M), argnums=1)(x, y, 2.0)
    np.testing.assert_allclose(np.asarray(got1), np.asarray(want[1]), rtol=RTOL, atol=ATOL)
    got_jit = meshax.jit(meshax.grad(f(M), argnums=(0, 1)))(x, y, 2.0)
    for a, b in zip(got_jit, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=ATOL)


def test_grad_pytree_args():
    def f(L):
        return lambda p, x: L.np.sum(L.np.tanh(x @ p["w"] + p["b"]) ** 2)
    p = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "b": np.ones(3, np.float32)}
    x = np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)
    want = jax.grad(f(J))(p, x)
    for g in (meshax.grad(f(M)), meshax.jit(meshax.grad(f(M)))):
        got = g(p, x)
        assert sorted(got) == ["b", "w"]
        for k in want:
            np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_has_aux(jitted):
    def f(L):
        def g(x):
            y = L.np.sin(x)
            return L.np.sum(y * y), {"y": y, "n": 3}
        return g
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    (jv, jaux), jg = jax.value_and_grad(f(J), has_aux=True)(x)
    vg = meshax.value_and_grad(f(M), has_aux=True)
    g = meshax.grad(f(M), has_aux=True)
    if jitted:
        vg, g = meshax.jit(vg), meshax.jit(g)
    (mv, maux), mg = vg(x)
    assert type(maux["y"]) is ConcreteArray, f"aux leaked as {type(maux['y']).__name__}: {maux['y']!r}"
    np.testing.assert_allclose(float(mv), float(jv), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(mg), np.asarray(jg), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(maux["y"]), np.asarray(jaux["y"]), rtol=RTOL, atol=ATOL)
    assert int(maux["n"]) == 3
    mg2, maux2 = g(x)
    assert type(maux2["y"]) is ConcreteArray, f"aux leaked as {type(maux2['y']).__name__}: {maux2['y']!r}"
    np.testing.assert_allclose(np.asarray(maux2["y"]), np.asarray(jaux["y"]), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(mg2), np.asarray(jg), rtol=RTOL, atol=ATOL)


def test_linearize():
    f = lambda L: lambda x: L.np.sin(x) * L.np.exp(x)  # noqa: E731
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    t = np.linspace(1, 2, 5, dtype=np.float32)
    jy, jf = jax.linearize(f(J), x)
    my, mf = meshax.linearize(f(M), mnp.asarray(x))
    np.testing.assert_allclose(np.asarray(my), np.asarray(jy), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(mf(mnp.asarray(t))), np.asarray(jf(t)), rtol=RTOL, atol=ATOL)


def test_integer_input_error():
    with pytest.raises(TypeError, match="allow_int"):
        jax.grad(lambda x: jjnp.sum(x * 1.0))(jjnp.arange(3))
    with pytest.raises(TypeError, match="allow_int"):
        meshax.grad(lambda x: mnp.sum(x * 1.0))(mnp.arange(3))
    with pytest.raises(TypeError, match="allow_int"):
        meshax.grad(lambda x: x * 1.0)(3)


def test_allow_int():
    want = jax.grad(lambda x, y: jjnp.sum(x * y), argnums=(0, 1), allow_int=True)(jjnp.arange(3), 2.0)
    got = meshax.grad(lambda x, y: mnp.sum(x * y), argnums=(0, 1), allow_int=True)(mnp.arange(3), 2.0)
    assert str(np.asarray(got[0]).dtype) == str(np.asarray(want[0]).dtype)  # float0
    np.testing.assert_allclose(float(got[1]), float(want[1]))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_non_scalar_output_error(jitted):
    with pytest.raises(TypeError, match="scalar"):
        jax.grad(lambda x: x * 2.0)(jjnp.ones(3))
    g = meshax.grad(lambda x: x * 2.0)
    if jitted:
        g = meshax.jit(g)
    with pytest.raises(TypeError, match="scalar"):
        g(mnp.ones(3))
