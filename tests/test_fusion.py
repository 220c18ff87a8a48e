"""Fused elementwise execution (interpreters/fusion.py, numba_executor.py, numexpr_executor.py): fused results are NumPy's bit for
bit, clusters are formed as documented, and fused programs give JAX's values eagerly, under jit and in
shard_map."""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh
from jax.sharding import PartitionSpec as JP

import meshax
import meshax.numpy as mnp
from meshax._src.runtime import compute_pool as device_pool
from meshax._src.interpreters import cpu_executor, fusion, numpy_eval
from meshax._src.interpreters.fusion import executable, fused_p
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

from fusion_support import assert_bitwise_equal, fused_and_reference
from oracle import assert_same_tree

N = 40_000  # elements: above the executors' thresholds, so that clusters really run through numba or numexpr
assert N >= fusion.EXECUTORS["cpu"].min_elements and N >= fusion.EXECUTORS["cpu"].numba.min_elements


@pytest.fixture(autouse=True, params=["numba", "numexpr", "blocks", "whole"])
def path(request, monkeypatch):
    """Each test four times: clusters compiled by numba (in row ranges over two threads), through numexpr
    (whatever the number of cores; it pays from `min_threads` on), through NumPy on small blocks of rows over two
    threads, and through NumPy on the whole arrays (one thread), results written into the buffers of
    intermediates no longer read. A cluster that one of the first two cannot run takes the next path."""
    executor = fusion.EXECUTORS["cpu"]
    if request.param != "numba":
        monkeypatch.setattr(executor.numba, "min_elements", float("inf"))
    monkeypatch.setattr(executor.numba.compiler, "background", False)  # compiled on first use, waited for
    monkeypatch.setattr(executor.numexpr, "min_threads", 1 if request.param == "numexpr" else 10 ** 6)
    monkeypatch.setattr(device_pool, "call_threads", lambda: 2)
    monkeypatch.setattr(executor, "min_threads", 10 ** 6 if request.param == "whole" else 2)
    monkeypatch.setattr(executor, "block_elements", 3000)  # many blocks, the last one shorter
    return request.param

FLOAT_EDGES = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0, 1e-30, -1e-30, 1e30, -2.5]
INT_EDGES = {np.int32: [np.iinfo(np.int32).max, np.iinfo(np.int32).min, -1, 0, 1, 7, -7, 65536],
             np.int64: [np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, 0, 1, 7, -7, 2 ** 40]}


def edge_array(dtype, seed: int) -> np.ndarray:
    """N values of `dtype`: every edge value, paired with every other across two seeds, then random ones."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, N).astype(bool)
    if dtype.kind == "f":
        edges = np.array(FLOAT_EDGES, dtype)
        random = (rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)).astype(dtype)
    else:
        edges = np.array(INT_EDGES[dtype.type], dtype)
        random = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, N, dtype=dtype, endpoint=True)
    grid = np.array(list(itertools.product(edges, edges)), dtype)[:, seed % 2]
    random[:grid.size] = grid
    return random


@pytest.fixture(autouse=True)
def x64():
    """64-bit dtypes stay 64-bit (as with jax_enable_x64), so that int64 and float64 run fused too."""
    old = meshax.config.jax_enable_x64
    meshax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        meshax.config.update("jax_enable_x64", old)


lax = meshax.lax

BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "max": lax.max, "min": lax.min,
    "eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge,
}
UNARY = {"neg": lax.neg, "abs": lax.abs, "sqrt": lax.sqrt, "square": lax.square, "reciprocal": lax.reciprocal}
NUMBER_DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("dtype", NUMBER_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_op_fused_equals_numpy_bit_for_bit(name, dtype):
    if name == "div" and np.dtype(dtype).kind != "f":
        pytest.skip("integer division is not fused")
    op = BINARY[name]
    x, y = edge_array(dtype, 0), edge_array(dtype, 1)
    # the op between two arrays, with a constant, and inside a chain (x op y) + x, so each runs in an expression
    for variant, function in enumerate((lambda a, b: op(a, b), lambda a, b: op(a, np.asarray(3, dtype)),
                     lambda a, b: op(np.asarray(-0.0 if np.dtype(dtype).kind == "f" else -2, dtype), b),
                     lambda a, b: lax.select(lax.gt(a, b), op(a, b), op(b, a)))):
        fused, expected, count = fused_and_reference(function, x, y)
        assert count >= 1 or (variant == 2 and name == "add")  # -0.0 + b is b: simplified away
        assert_bitwise_equal(fused, expected)


@pytest.mark.parametrize("dtype", NUMBER_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op_fused_equals_numpy_bit_for_bit(name, dtype):
    x = edge_array(dtype, 0)
    if name in ("abs", "sqrt", "reciprocal") and np.dtype(dtype).kind != "f":
        pytest.skip("fused for floats only")
    fused, expected, count = fused_and_reference(lambda a: UNARY[name](lax.add(a, a)), x)
    assert count == 1
    assert_bitwise_equal(fused, expected)


@pytest.mark.parametrize("source,target", [
    (np.bool_, np.float32), (np.bool_, np.int32), (np.bool_, np.float64), (np.bool_, np.int64),
    (np.int32, np.int64), (np.int32, np.float32), (np.int32, np.float64), (np.int64, np.float64),
    (np.float32, np.float64), (np.float32, np.bool_), (np.float64, np.bool_), (np.int32, np.bool_),
], ids=lambda d: np.dtype(d).name)
def test_conversions_fused_equal_numpy_bit_for_bit(source, target):
    x = edge_array(source, 0)
    twice = (lambda a: lax.bitwise_and(a, a)) if source == np.bool_ else (lambda a: lax.add(a, a))
    fused, expected, count = fused_and_reference(
        lambda a: lax.convert_element_type(twice(a), target), x)
    assert count == 1
    assert_bitwise_equal(fused, expected)


def test_logic_and_select_fused_equal_numpy():
    p, q = edge_array(np.bool_, 0), edge_array(np.bool_, 1)
    x, y = edge_array(np.float32, 0), edge_array(np.float32, 1)
    fused, expected, count = fused_and_reference(
        lambda p, q, x, y: lax.select(lax.bitwise_or(lax.bitwise_and(p, lax.bitwise_not(q)), lax.lt(x, y)), x, y),
        p, q, x, y)
    assert count >= 1
    assert_bitwise_equal(fused, expected)


def test_mlp_chains_fused_equal_numpy():
    """The chains of a training step: bias + relu, relu's backward select, the SGD update, with broadcasts."""
    rng = np.random.default_rng(0)
    h = rng.standard_normal((256, 160)).astype(np.float32)
    h[0, :4] = [np.nan, np.inf, -0.0, 0.0]
    b = rng.standard_normal(160).astype(np.float32)
    g = rng.standard_normal((256, 160)).astype(np.float32)

    def chains(h, b, g):
        z = h + b
        act = meshax.nn.relu(z)
        back = mnp.where(z > 0, g, 0)
        return act, back, h - 0.3 * back, mnp.sum(back * act, axis=0)

    fused, expected, count = fused_and_reference(chains, h, b, g)
    assert count >= 3
    assert_bitwise_equal(fused, expected)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.int8, np.uint32, np.complex64],
                         ids=lambda d: np.dtype(d).name)
def test_dtypes_numexpr_lacks_run_in_numpy_blocks(dtype, monkeypatch):
    x = np.arange(N).astype(dtype)
    x[:4] = np.array([0, 1, 100, 3]).astype(dtype)
    numexpr_runs = []
    original = fusion.EXECUTORS["cpu"].numexpr.run
    monkeypatch.setattr(fusion.EXECUTORS["cpu"].numexpr, "run", lambda *a: numexpr_runs.append(1) or original(*a))
    fused, expected, count = fused_and_reference(lambda a: lax.max(lax.mul(lax.add(a, a), a), a), x)
    assert count == 1 and not numexpr_runs
    assert_bitwise_equal(fused, expected)


def test_transcendentals_are_not_fused():
    x = edge_array(np.float32, 0)
    closed = meshax.make_jaxpr(lambda a: mnp.exp(a * 2.0) + mnp.tanh(a))(x)
    names = [eq.primitive.name for eq in executable(closed.jaxpr).equations]
    assert "exp" in names and "tanh" in names
    fused, expected, _ = fused_and_reference(lambda a: mnp.exp(a * 2.0) + mnp.tanh(a), x)
    assert_bitwise_equal(fused, expected)


def test_whole_array_clusters_write_into_intermediates_no_longer_read(path, monkeypatch):
    """relu, its derivative's select and an SGD update each write a result into a dead intermediate's buffer
    (never into one still read: `a` below is read twice, and `a + a` reads it as both operands)."""
    if path != "whole":
        pytest.skip("the whole-array path only")
    reused = []
    original = cpu_executor._free_buffer
    monkeypatch.setattr(cpu_executor, "_free_buffer", lambda *a: (lambda b: reused.append(b is not None) or b)(
        original(*a)))
    h, g = edge_array(np.float32, 0).reshape(200, 200), edge_array(np.float32, 1).reshape(200, 200)
    b = edge_array(np.float32, 1)[:200]

    def chains(h, b, g):
        a = h * 2.0 + b
        twice = (a + a) * (a - 1.0)
        return (mnp.maximum(h + b, 0.0), mnp.where(h + b > 0, g, 0.0), h - 0.01 * g, twice - a * 3.0,
                lax.select(a > g, a * g, a - g))

    fused, expected, count = fused_and_reference(chains, h, b, g)
    assert count >= 5 and sum(reused) >= 6
    assert_bitwise_equal(fused, expected)


def test_an_intermediate_still_read_through_a_view_is_not_overwritten():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)

    def program(x):
        a = x * 2.0
        view = lax.reshape(lax.reshape(a, (12,)), (3, 4))  # NumPy's reshapes: views of a's buffer
        return (a + 1.0) * view  # a is read for the last time by a + 1.0; its buffer is still read through view

    jaxpr = meshax.make_jaxpr(program)(x).jaxpr
    assert "reshape" in [eq.primitive.name for eq in jaxpr.equations]
    result = cpu_executor.run_unfused(jaxpr, [x], x.shape, cpu_executor._last_reads(jaxpr))
    np.testing.assert_array_equal(result, (2 * x + 1) * (2 * x))


def test_small_arrays_take_the_numpy_path(monkeypatch):
    calls = []
    executor = fusion.EXECUTORS["cpu"]
    monkeypatch.setattr(executor.numexpr, "run", lambda *a, **k: calls.append(1))
    monkeypatch.setattr(cpu_executor, "_run_in_blocks", lambda *a, **k: calls.append(1))
    x = np.ones(100, np.float32)
    out = numpy_eval.run(meshax.make_jaxpr(lambda a: a * 2 + 1)(x).jaxpr, [], [x])
    assert not calls and (out[0] == 3).all()


# ---- clustering ---------------------------------------------------------------------------------------------


def clusters(function, *args):
    program = executable(meshax.make_jaxpr(function)(*args).jaxpr)
    return program, [eq.params["cluster"] for eq in program.equations if eq.primitive is fused_p]


def member_names(cluster):
    return [eq.primitive.name for eq in cluster.jaxpr.equations]


def test_a_chain_is_one_cluster_with_its_inputs_as_leaves():
    x, b = np.ones((8, 4), np.float32), np.ones(4, np.float32)
    program, found = clusters(lambda x, b: mnp.maximum(x * 2.0 + b, 0.0) - x, x, b)
    assert len(program.equations) == 1 and len(found) == 1
    assert member_names(found[0]) == ["mul", "add", "max", "sub"]  # b broadcasts inside the expression
    assert [v.aval.shape for v in found[0].jaxpr.invars] == [(8, 4), (4,)]


def test_values_read_outside_a_cluster_end_it():
    x, w = np.ones((8, 4), np.float32), np.ones((4, 4), np.float32)
    program, found = clusters(lambda x, w: (x * 2.0 + 1.0) @ w + 1.0, x, w)
    assert [eq.primitive.name for eq in program.equations] == ["fused", "dot_general", "fused"]
    assert [member_names(c) for c in found] == [["mul", "add"], ["add"]]


def test_a_cheap_value_is_recomputed_by_its_few_users_and_a_costly_one_is_not():
    x = np.ones((8, 4), np.float32)
    # z = x + 1 (one operation) feeds two outputs: each output's cluster computes it
    program, found = clusters(lambda x: (mnp.maximum(x + 1.0, 0.0), (x + 1.0) > 0), x)
    assert len(found) == 2 and all(member_names(c)[0] == "add" for c in found)
    # a longer chain used twice is computed once, by its own cluster
    program, found = clusters(lambda x: (lambda z: (z * 2.0, z * 3.0))(((x + 1.0) * x - 2.0) * x), x)
    assert len(found) == 3


def test_a_broadcast_reads_only_a_cluster_input():
    x, y = np.ones((8, 4), np.float32), np.ones(4, np.float32)
    program, found = clusters(lambda x, y: x * mnp.broadcast_to(y * 2.0, (8, 4)), x, y)
    assert [member_names(c) for c in found] == [["mul"], ["broadcast_in_dim", "mul"]]


def test_program_outputs_and_multiple_uses_are_materialised():
    x = np.ones((8, 4), np.float32)
    program, found = clusters(lambda x: (lambda z: (z, z * z, z + 1.0))(mnp.sqrt(x) * x + (x - 1.0) * x), x)
    outputs = {v.id for v in program.outvars}
    assert all(c.jaxpr.outvars[0].id in outputs for c in found)


def test_fused_programs_keep_values_in_loops_and_conditionals():
    x = edge_array(np.float32, 3)[:N].reshape(200, 200)

    def body(carry, _):
        return mnp.where(carry > 0, carry * 0.5, carry * 0.25 + 1.0), carry.sum()

    def program(x):
        final, sums = lax.scan(body, x, None, length=3)
        return lax.cond(final.sum() > 0, lambda a: a - 1.0, lambda a: a + 1.0, final), sums

    ours = meshax.jit(program)(x)
    with meshax.disable_jit():
        unjitted = program(x)
    theirs = jax.jit(lambda x: jax.lax.cond(
        jax.lax.scan(lambda c, _: (jjnp.where(c > 0, c * 0.5, c * 0.25 + 1.0), c.sum()), x, None, length=3)[0].sum()
        > 0, lambda a: a - 1.0, lambda a: a + 1.0,
        jax.lax.scan(lambda c, _: (jjnp.where(c > 0, c * 0.5, c * 0.25 + 1.0), c.sum()), x, None, length=3)[0]))(x)
    np.testing.assert_array_equal(np.asarray(ours[0]), np.asarray(theirs))
    assert_bitwise_equal([ours[0], ours[1]], [unjitted[0], unjitted[1]])


# ---- eager, jit and shard_map against JAX -----------------------------------------------------------------------

CHAINS = {
    "bias_relu": lambda np_, nn, x, b: nn.relu(x * 1.5 + b),
    "relu_backward": lambda np_, nn, x, b: np_.where(x + b > 0, x * x, 0.0) - 0.25 * x,
    "clip_and_compare": lambda np_, nn, x, b: np_.minimum(np_.maximum(x, -b), b) + (x > b).astype(np_.float32),
    "sgd_update": lambda np_, nn, x, b: x - 0.3 * (x * b + 1e-3 * x),
}


@pytest.mark.parametrize("mode", ["eager", "jit", "jit_sharded", "shard_map"])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_fused_chains_match_jax(name, mode):
    chain = CHAINS[name]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((512, 256)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    b = np.abs(rng.standard_normal(256)).astype(np.float32)
    theirs = jax.jit(lambda x, b: chain(jjnp, jax.nn, x, b))(x, b)
    ours_fn = lambda x, b: chain(mnp, meshax.nn, x, b)
    mesh = Mesh(np.array(meshax.devices()), ("d",))
    if mode == "eager":
        ours = ours_fn(x, b)
    elif mode == "jit":
        ours = meshax.jit(ours_fn)(x, b)
    elif mode == "jit_sharded":
        xs = meshax.device_put(x, NamedSharding(mesh, P("d")))
        ours = meshax.jit(ours_fn)(xs, b)
        assert ours.sharding.spec == P("d")
    else:
        ours = meshax.jit(meshax.shard_map(ours_fn, mesh=mesh, in_specs=(P("d"), P()), out_specs=P("d")))(x, b)
    assert_same_tree(ours, theirs)  # XLA contracts x * a + b into one rounding (FMA): ulps apart


def test_fused_chain_in_shard_map_matches_jax_sharded():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1024, 128)).astype(np.float32)
    jmesh = JMesh(np.array(jax.devices()[:8]), ("d",))
    mesh = Mesh(np.array(meshax.devices()), ("d",))

    def body(lib, np_):
        return lambda x: lib.lax.psum(np_.sum(np_.where(x > 0, x * 2.0, x * 0.5 - 1.0), axis=0), "d")

    theirs = jax.jit(jax.shard_map(body(jax, jjnp), mesh=jmesh, in_specs=JP("d"), out_specs=JP()))(x)
    ours = meshax.jit(meshax.shard_map(body(meshax, mnp), mesh=mesh, in_specs=P("d"), out_specs=P()))(x)
    assert_same_tree(ours, theirs, atol=1e-4)  # sums of 1024 terms of either sign, in another order


def test_each_path_is_taken(path, monkeypatch):
    taken = []
    executor = fusion.EXECUTORS["cpu"]
    for owner, name in ((executor.numba, "run"), (executor.numexpr, "run"), (cpu_executor, "_run_in_blocks")):
        original = getattr(owner, name)
        label = name if owner is cpu_executor else f"{type(owner).__name__}.{name}"
        monkeypatch.setattr(owner, name, (lambda n, f: lambda *a: taken.append(n) or f(*a))(label, original))
    x = edge_array(np.float32, 0).reshape(400, 100)
    fused, expected, _ = fused_and_reference(lambda a: a * 2.0 + 1.0, x)
    assert taken == {"numba": ["NumbaExecutor.run"], "numexpr": ["NumexprExecutor.run"],
                     "blocks": ["_run_in_blocks"], "whole": []}[path]
    assert_bitwise_equal(fused, expected)



@pytest.mark.parametrize("ours,theirs", [
    (lambda p, g: p - 0.01 * g, lambda p, g: p - np.float32(0.01) * g),  # an SGD update of a weight
    (lambda p, g: mnp.maximum(p * g, g), lambda p, g: np.maximum(p * g, g)),
])
def test_matrices_mixing_c_and_fortran_order_run_in_tiles_with_the_same_values(ours, theirs, monkeypatch):
    rng = np.random.default_rng(3)
    p = rng.standard_normal((700, 600)).astype(np.float32)  # not a multiple of the tile
    g = np.asfortranarray(rng.standard_normal((700, 600)).astype(np.float32))  # as a transposed matmul result
    taken = []
    original = cpu_executor._run_in_tiles
    monkeypatch.setattr(cpu_executor, "_run_in_tiles", lambda *a: taken.append(1) or original(*a))
    result = meshax.jit(ours)(meshax.device_put(p), meshax.device_put(g))
    assert taken
    assert_bitwise_equal(np.asarray(result), theirs(p, g))
