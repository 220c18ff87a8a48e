"""jax.lax's collectives added for issue 40 (pshuffle, pbroadcast, psum_scatter_start, ragged_all_to_all) inside
shard_map over 8 devices, eagerly and under jit, against JAX (or, where XLA:CPU cannot run JAX's, against JAX's
documented equivalent or a NumPy model of its documented semantics); and the `*_p` names: the equations of meshax's
jaxprs use the exported primitive objects, as JAX's use its own."""
from __future__ import annotations

import types
from typing import Any, Iterator

import jax
import numpy as np
import pytest

import meshax
import meshax.lax
import meshax.numpy
from differential import assert_matches
from meshax._src.compat.jax_names import JAX_NAMES
from meshax._src.lax import (lax_more_elementwise, lax_more_enums, lax_more_ops, lax_more_parallel, lax_more_random,
                             lax_more_solves)
from meshax._src.lax.fft import fft as _mfft
from meshax._src.lax.primitive_names import primitive_names
from meshax._src.lax.jax_primitives_base import JaxParamsPrimitive

MLAX = types.SimpleNamespace(**{n: getattr(meshax.lax, n) for n in dir(meshax.lax) if not n.startswith("_")})
for _module in (lax_more_elementwise, lax_more_enums, lax_more_ops, lax_more_parallel, lax_more_random,
                lax_more_solves):
    MLAX.__dict__.update({n: getattr(_module, n) for n in _module.__all__})
MLAX.__dict__.update(primitive_names(JAX_NAMES["jax.lax"]))
MLAX.fft = _mfft


def _namespace(L: Any, lax: Any) -> Any:
    return types.SimpleNamespace(lax=lax, numpy=L.numpy, jit=L.jit, grad=L.grad, vmap=L.vmap, shard_map=L.shard_map,
                                 sharding=L.sharding, devices=L.devices, make_jaxpr=L.make_jaxpr)


M, J = _namespace(meshax, MLAX), _namespace(jax, jax.lax)
_rng = np.random.default_rng(0)


def mapped(L: Any, body: Any, jitted: bool, out: Any = "i") -> Any:
    """`body` in a shard_map over all 8 devices along "i" (blocks of the first dimension in, and out along `out`)."""
    P = L.sharding.PartitionSpec
    mesh = L.sharding.Mesh(np.array(L.devices()), ("i",))
    f = L.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P(out) if out else P())
    return L.jit(f) if jitted else f


def both(program: Any, *args: Any, **tolerances: Any) -> None:
    ours = program(M, *[meshax.numpy.asarray(a) for a in args])
    theirs = program(J, *[jax.numpy.asarray(a) for a in args])
    assert_matches(ours, theirs, **tolerances)


# ---- pshuffle, pbroadcast, psum_scatter_start ------------------------------------------------------------------

PERMS = {"rotate": [1, 2, 3, 4, 5, 6, 7, 0], "reverse": list(range(7, -1, -1)), "identity": list(range(8)),
         "pairs": [1, 0, 3, 2, 5, 4, 7, 6]}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
@pytest.mark.parametrize("perm", sorted(PERMS))
def test_pshuffle(perm, dtype, jitted):
    x = (_rng.normal(size=(16, 3)) * 4).astype(dtype)
    both(lambda L, v: mapped(L, lambda b: L.lax.pshuffle(b, "i", PERMS[perm]), jitted)(v), x)


def test_pshuffle_grad_and_errors():
    x = _rng.normal(size=(8, 2)).astype(np.float32)
    weights = np.arange(16, dtype=np.float32).reshape(8, 2)
    both(lambda L, v, w: L.grad(lambda a: L.numpy.sum(mapped(L, lambda b: L.lax.pshuffle(b, "i", PERMS["rotate"]),
                                                             False)(a) * w))(v), x, weights)
    for L in (M, J):
        with pytest.raises(ValueError):
            mapped(L, lambda b: L.lax.pshuffle(b, "i", [1, 1, 2, 3, 4, 5, 6, 7]), False)(L.numpy.ones(8))


def _pbroadcast(L: Any, x: Any, source: Any) -> Any:
    """pbroadcast in meshax; in JAX (whose pbroadcast XLA:CPU cannot run), its documented equivalent."""
    if L is M:
        return L.lax.pbroadcast(x, "i", source)
    return L.lax.psum(L.numpy.where(L.lax.axis_index("i") == source, x, L.numpy.zeros_like(x)), "i")


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("source", [0, 3, 7, "array"])
def test_pbroadcast(source, dtype, jitted):
    x = (_rng.normal(size=(16, 3)) * 4).astype(dtype)
    src = np.int32(5) if source == "array" else source

    def program(L, v):
        where = L.numpy.asarray(src) if source == "array" else src
        return mapped(L, lambda b: _pbroadcast(L, b, where), jitted)(v)

    both(program, x)


def test_pbroadcast_grad_and_errors():
    x = _rng.normal(size=(8, 2)).astype(np.float32)
    weights = np.arange(16, dtype=np.float32).reshape(8, 2)
    both(lambda L, v, w: L.grad(lambda a: L.numpy.sum(mapped(L, lambda b: _pbroadcast(L, b, 2), False)(a) * w))(v),
         x, weights)
    for source, error in ((np.float32(1), TypeError), (np.array([1, 2], np.int32), ValueError)):
        for L in (M, J):  # JAX checks the source when tracing, before XLA:CPU would refuse to run it
            with pytest.raises(error):
                mapped(L, lambda b: L.lax.pbroadcast(b, "i", L.numpy.asarray(source)), True)(L.numpy.ones(8))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("tiled,dim", [(True, 0), (True, 1), (False, 0), (False, 1)])
def test_psum_scatter_start(tiled, dim, jitted):
    x = _rng.normal(size=(64, 8)).astype(np.float32) if dim == 1 else _rng.normal(size=(64, 2)).astype(np.float32)
    def program(L, v):
        def body(b):  # a block of 8 rows: dimension `dim` has the axis' size
            if L is M:
                return L.lax.psum_scatter_start(b, "i", scatter_dimension=dim, tiled=tiled)
            return L.lax.psum_scatter(b, "i", scatter_dimension=dim, tiled=tiled)

        return mapped(L, body, jitted)(v)

    both(program, x, rtol=1e-5)


# ---- ragged_all_to_all -------------------------------------------------------------------------------------------

N_DEV, ROWS, OUT_ROWS = 8, 6, 12


def _ragged_case(seed: int) -> tuple[np.ndarray, ...]:
    """Per-device operands and the offsets of a consistent exchange: device s sends sizes[s, d] rows starting at
    input_offsets[s, d] to device d, which stores them after those of the senders before s."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 2, size=(N_DEV, N_DEV))
    input_offsets = np.array([rng.integers(0, ROWS - 1, size=N_DEV) for _ in range(N_DEV)])
    output_offsets = np.cumsum(sizes, axis=0) - sizes  # [s, d]: where s's rows land on d
    operand = rng.normal(size=(N_DEV, ROWS, 2)).astype(np.float32)
    output = rng.normal(size=(N_DEV, OUT_ROWS, 2)).astype(np.float32)
    return operand, output, input_offsets.astype(np.int32), sizes.astype(np.int32), \
        output_offsets.astype(np.int32), sizes.T.copy().astype(np.int32)


def _ragged_reference(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes) -> np.ndarray:
    """JAX's documented semantics of ragged_all_to_all, in NumPy over all devices at once."""
    result = output.copy()
    for s in range(N_DEV):
        for d in range(N_DEV):
            n, start, at = send_sizes[s, d], input_offsets[s, d], output_offsets[s, d]
            result[d, at:at + n] = operand[s, start:start + n]
    return result


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("seed", range(4))
def test_ragged_all_to_all(seed, jitted):
    args = _ragged_case(seed)
    expected = _ragged_reference(*args)
    flat = [a.reshape((-1,) + a.shape[2:]) for a in args]

    def body(operand, output, io, ss, oo, rs):
        return MLAX.ragged_all_to_all(operand, output, io, ss, oo, rs, axis_name="i")

    P = meshax.sharding.PartitionSpec
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()), ("i",))
    f = meshax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    ours = (meshax.jit(f) if jitted else f)(*[meshax.numpy.asarray(a) for a in flat])
    np.testing.assert_array_equal(np.asarray(ours).reshape(expected.shape), expected)


def test_ragged_all_to_all_docs_example_and_errors():
    """The two-device example of JAX's docstring, and arguments JAX refuses."""
    P = meshax.sharding.PartitionSpec
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("i",))
    args = [np.array(a, dtype) for a, dtype in (([1, 2, 2, 3, 4, 0], np.float32), ([0] * 8, np.float32),
                                                 ([0, 1, 0, 1], np.int32), ([1, 2, 1, 1], np.int32),
                                                 ([0, 0, 1, 2], np.int32), ([1, 1, 2, 1], np.int32))]
    f = meshax.shard_map(lambda *xs: MLAX.ragged_all_to_all(*xs, axis_name="i"), mesh=mesh, in_specs=P("i"),
                         out_specs=P("i"))
    np.testing.assert_array_equal(np.asarray(f(*args)), [1, 3, 0, 0, 2, 2, 4, 0])
    bad = list(args)
    bad[2] = np.zeros(6, np.int32)  # offsets of different lengths
    with pytest.raises(ValueError):
        f(*bad)


# ---- the *_p names -----------------------------------------------------------------------------------------------

_x = np.arange(6, dtype=np.float32).reshape(2, 3)
PROGRAMS = {  # name -> program(L) over _x whose jaxpr has an equation of that primitive
    "reduce_sum_p": lambda L, x: L.lax.reduce_sum(x, (0,)),
    "reduce_max_p": lambda L, x: L.lax.reduce_max(x, (1,)),
    "reduce_min_p": lambda L, x: L.lax.reduce_min(x, (1,)),
    "reduce_prod_p": lambda L, x: L.lax.reduce_prod(x, (0,)),
    "reduce_and_p": lambda L, x: L.lax.reduce_and(x > 1, (0,)),
    "reduce_or_p": lambda L, x: L.lax.reduce_or(x > 1, (0,)),
    "dot_general_p": lambda L, x: L.lax.dot_general(x, x, (((1,), (1,)), ((), ()))),
    "broadcast_in_dim_p": lambda L, x: L.lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)),
    "concatenate_p": lambda L, x: L.lax.concatenate([x, x], 0),
    "convert_element_type_p": lambda L, x: L.lax.convert_element_type(x, np.float16),
    "iota_p": lambda L, x: L.lax.iota(np.int32, 4) + x.shape[0],
    "reshape_p": lambda L, x: L.lax.reshape(x, (3, 2)),
    "slice_p": lambda L, x: L.lax.slice(x, (0, 1), (2, 3)),
    "sort_p": lambda L, x: L.lax.sort(x),
    "gather_p": lambda L, x: x[np.array([1, 0])],
    "scatter_p": lambda L, x: x.at[0].set(1.0),
    "rev_p": lambda L, x: L.lax.rev(x, (0,)),
    "log2_p": lambda L, x: L.lax.log2(x),
    "one_minus_square_p": lambda L, x: L.lax.one_minus_square(x),
    "polynomial_p": lambda L, x: L.lax.polynomial(x, [1.0, 2.0, 3.0]),
    "igamma_grad_a_p": lambda L, x: L.lax.igamma_grad_a(x + 1, x + 1),
    "cond_p": lambda L, x: L.lax.cond(x[0, 0] > 0, lambda v: v, lambda v: -v, x),
    "scan_p": lambda L, x: L.lax.scan(lambda c, r: (c + r, r), x[0], x)[0],
    "while_p": lambda L, x: L.lax.while_loop(lambda v: v[0, 0] < 10, lambda v: v + 1, x),
    "rng_bit_generator_p": lambda L, x: L.lax.rng_bit_generator(np.array([1, 2, 3, 4], np.uint32), (2,))[1],
    "rng_uniform_p": lambda L, x: L.lax.rng_uniform(np.float32(0), np.float32(1), (2,)),
    "linear_solve_p": lambda L, x: L.lax.custom_linear_solve(lambda v: 2.0 * v, x, lambda mv, v: v / 2.0),
    "all_gather_p": lambda L, x: mapped(L, lambda b: L.lax.all_gather(b, "i", tiled=True), False)(
        L.numpy.arange(8.0)),
    "axis_index_p": lambda L, x: mapped(L, lambda b: b + L.lax.axis_index("i"), False)(L.numpy.arange(8.0)),
    "ppermute_p": lambda L, x: mapped(L, lambda b: L.lax.ppermute(b, "i", [(0, 1), (1, 0)]), False)(
        L.numpy.arange(8.0)),
    "sharding_constraint_p": lambda L, x: L.lax.with_sharding_constraint(
        x, L.sharding.NamedSharding(L.sharding.Mesh(np.array(L.devices()[:2]), ("a",)), L.sharding.PartitionSpec())),
}


def _equations(jaxpr: Any) -> Iterator[Any]:
    """The equations of a jaxpr (meshax's or JAX's, closed or not) and of the jaxprs in their parameters."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    for eqn in getattr(jaxpr, "eqns", None) or getattr(jaxpr, "equations", []):
        yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(inner, "eqns") or hasattr(inner, "equations") or hasattr(inner, "jaxpr"):
                    yield from _equations(inner)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_primitive_objects_in_jaxprs(name):
    for L in (M, J):
        primitive = getattr(L.lax, name)
        jaxpr = L.make_jaxpr(lambda x: PROGRAMS[name](L, x))(_x)
        assert any(eqn.primitive is primitive for eqn in _equations(jaxpr)), (L, name, jaxpr)


def test_every_exported_primitive_is_checked():
    exported = {n for n, p in primitive_names(JAX_NAMES["jax.lax"]).items() if not isinstance(p, JaxParamsPrimitive)}
    checked_elsewhere = {n for n in exported if n[:-2] in {
        "abs", "acos", "acosh", "add", "and", "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh", "cbrt",
        "ceil", "cos", "cosh", "cummax", "cummin", "cumprod", "cumsum", "div", "eq", "erf", "exp", "exp2", "expm1",
        "floor", "ge", "gt", "imag", "integer_pow", "is_finite", "le", "log", "log1p", "logistic", "lt", "max",
        "min", "mul", "ne", "neg", "nextafter", "not", "or", "pow", "real", "reciprocal", "rem", "shift_left",
        "sign", "sin", "sinh", "sqrt", "square", "sub", "tan", "tanh", "transpose", "xor", "erf_inv", "erfc",
        "lgamma", "digamma", "polygamma", "igamma", "igammac", "zeta", "bessel_i0e", "bessel_i1e",
        "population_count", "clz", "reduce_precision", "regularized_incomplete_beta", "mulhi",
        "bitcast_convert_type"}}
    assert exported - checked_elsewhere <= set(PROGRAMS), sorted(exported - checked_elsewhere - set(PROGRAMS))


@pytest.mark.parametrize("case", ["rng_bit_generator", "one_minus_square", "log2", "polynomial"])
def test_binding_with_jax_parameters(case):
    """Primitives whose parameters are JAX's can be bound as JAX code binds them."""
    def program(L):
        if case == "rng_bit_generator":
            return L.lax.rng_bit_generator_p.bind(L.numpy.asarray(np.array([1, 2, 3, 4], np.uint32)), shape=(3,),
                                                  dtype=np.dtype(np.uint32),
                                                  algorithm=L.lax.RandomAlgorithm.RNG_DEFAULT, out_sharding=None)
        x = L.numpy.asarray(np.array([0.5, 1.5], np.float32))
        if case == "log2":
            return L.lax.log2_p.bind(x, accuracy=None)
        if case == "polynomial":
            return L.lax.polynomial_p.bind(x, L.numpy.float32(1), L.numpy.float32(2))
        return L.lax.one_minus_square_p.bind(x)

    assert_matches(program(M), program(J))
