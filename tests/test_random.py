"""meshax.random against real JAX (default threefry2x32 PRNG, partitionable scheme, x64 off).

Bits, keys, uniform (given JAX's fused multiply-add, see `_JAX_FUSES_FMA`), randint, bernoulli,
permutation and choice must agree exactly; normal to float32 rounding (a few ulps: XLA's log1p
inside erf_inv is not correctly rounded); truncated_normal and gumbel, which also go through
XLA's own erf/log, to a small tolerance. Also: jit equals eager, and batches of keys sharded over
a mesh (fold_in/split/bits/uniform on them, eagerly, under jit and inside shard_map) equal
jax.vmap of the single-key functions.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

import meshax  # noqa: E402
import meshax.numpy as mnp  # noqa: E402
import meshax.random as mr  # noqa: E402
from meshax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from oracle import ulp_distance  # noqa: E402

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BFLOAT16 = None

SEEDS = [0, 1, 42, 2**31 - 1]
SHAPES = [(), (1,), (7,), (3, 5), (301,)]
FLOATS = [np.dtype(np.float32), np.dtype(np.float16)] + ([BFLOAT16] if BFLOAT16 is not None else [])


def keys(seed):
    return mr.PRNGKey(seed), jax.random.PRNGKey(seed)


def assert_same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a, b)


def _fma_uniform_expected() -> bool:
    """Whether this JAX's CPU backend fuses uniform's multiply-add (it does with default XLA flags; an
    earlier test module may have initialized the backend with --xla_backend_optimization_level=0)."""
    key = jax.random.PRNGKey(0)
    fused = np.asarray(mr.uniform(mr.PRNGKey(0), (256,), minval=-3.7, maxval=11.3))
    return bool((np.asarray(jax.random.uniform(key, (256,), minval=-3.7, maxval=11.3)) == fused).all())


_JAX_FUSES_FMA = _fma_uniform_expected()


# ---- primitives ------------------------------------------------------------------------------------------------


def test_threefry2x32_known_answers():
    """Random123's known-answer vectors for threefry2x32 with 20 rounds (key, counter -> output)."""
    u = np.uint32
    cases = [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    for (k0, k1), (x0, x1), expected in cases:
        out = mr.threefry2x32(u(k0), u(k1), u(x0), u(x1))
        assert [int(np.asarray(o)) for o in out] == list(expected)
    # Elementwise with broadcasting, eagerly on a sharded operand and under jit.
    mesh = Mesh(np.array(meshax.devices()), ("x",))
    counters = meshax.device_put(mnp.arange(16, dtype=mnp.uint32), NamedSharding(mesh, PartitionSpec("x")))
    out0, out1 = mr.threefry2x32(u(3), u(4), u(0), counters)
    assert tuple(out0.sharding.spec) == ("x",) and out1.shape == (16,)
    jit0, jit1 = meshax.jit(lambda c: mr.threefry2x32(u(3), u(4), u(0), c))(counters)
    assert_same(jit0, out0)
    assert_same(jit1, out1)
    assert_same(mr.fold_in(mr.PRNGKey(0), 9), np.array([np.asarray(o) for o in mr.threefry2x32(
        u(0), u(0), u(0), u(9))], np.uint32))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_erf_inv_matches_xla(dtype):
    from meshax._src.random import erf_inv

    grid = np.linspace(-1, 1, 8193, dtype=np.float64)
    tails = 1 - np.geomspace(1e-7, 1e-1, 200)
    x = np.concatenate([grid, tails, -tails, [0.0, -0.0]]).astype(dtype)
    ours, theirs = np.asarray(erf_inv(x)), np.asarray(jax.lax.erf_inv(x))
    assert ulp_distance(ours, theirs) <= (2 if dtype == np.float32 else 0)


# ---- keys -----------------------------------------------------------------------------------------------------


def test_default_scheme_is_partitionable():
    assert jax.config.jax_threefry_partitionable


@pytest.mark.parametrize("seed", [0, 1, -1, 7, 2**31 - 1, -2**31, 2**32 - 1, 2**32 + 5, 2**40, 2**63 - 1,
                                  np.int64(-3), np.uint32(4000000000), np.int16(-3), True])
def test_prng_key(seed):
    expected = jax.random.PRNGKey(seed)
    assert_same(mr.PRNGKey(seed), expected)
    assert_same(mr.key_data(mr.key(seed)), jax.random.key_data(jax.random.key(seed)))
    assert isinstance(mr.PRNGKey(seed), meshax.Array)


def test_prng_key_from_array_seed():
    assert_same(mr.PRNGKey(mnp.asarray(np.int32(-7))), jax.random.PRNGKey(jjnp.int32(-7)))
    assert_same(meshax.jit(mr.PRNGKey)(mnp.asarray(np.int32(-7))), jax.random.PRNGKey(-7))


def test_fold_in_seed_003_values():
    key = mr.PRNGKey(0)
    expected = [[1797259609, 2579123966], [928981903, 3453687069], [4146024105, 2718843009],
                [2467461003, 3840466878]]
    for i, words in enumerate(expected):
        assert_same(mr.fold_in(key, i), np.array(words, np.uint32))
        assert_same(mr.fold_in(key, i), jax.random.fold_in(jax.random.PRNGKey(0), i))


@pytest.mark.parametrize("seed", SEEDS)
def test_split_and_fold_in_chains(seed):
    k, j = keys(seed)
    for step in range(6):
        for num in (2, 3, 1, (2, 3)):
            assert_same(mr.split(k, num), jax.random.split(j, num))
        assert_same(mr.fold_in(k, step * 7919), jax.random.fold_in(j, step * 7919))
        assert_same(mr.fold_in(k, np.uint32(2**32 - 1 - step)), jax.random.fold_in(j, np.uint32(2**32 - 1 - step)))
        k, j = mr.split(k, 3)[step % 3], jax.random.split(j, 3)[step % 3]
        k, j = mr.fold_in(k, step), jax.random.fold_in(j, step)
    assert mr.split(k, 0).shape == (0, 2)
    assert_same(mr.split(np.asarray(j)), jax.random.split(j))  # host keys are accepted


def test_key_errors():
    with pytest.raises(TypeError):
        mr.split(mnp.zeros((3,), mnp.uint32))
    with pytest.raises(TypeError):
        mr.uniform(mnp.zeros((2,), mnp.int32))
    with pytest.raises(TypeError):
        mr.PRNGKey(3.0)
    with pytest.raises(TypeError):
        mr.PRNGKey(np.arange(2))
    with pytest.raises(OverflowError):
        mr.fold_in(mr.PRNGKey(0), -1)
    with pytest.raises(ValueError):
        mr.permutation(mr.split(mr.PRNGKey(0)), 5)


# ---- bits and floats -------------------------------------------------------------------------------------------
#
# Each eager jax.random call with a new shape or dtype compiles a program, which would dominate this
# module's time; so the JAX side of a test is one jitted function returning all its cases for one key,
# compiled once and called for every seed.


# Options for reference programs whose results do not depend on XLA's optimizations (no float
# multiply-add to contract): unoptimized code compiles several times faster.
FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def compiled(fun, *example_args, fast=True):
    lowered = jax.jit(fun).lower(*example_args)
    return lowered.compile(compiler_options=FAST) if fast else lowered.compile()


def reference(cases, fast=True):
    """cases: (meshax function of a key, JAX function of a key) pairs. Returns (ours(key), theirs(key))."""
    jitted = compiled(lambda k: [theirs(k) for _, theirs in cases], jax.random.PRNGKey(0), fast=fast)

    def run(seed):
        k, j = keys(seed)
        return [ours(k) for ours, _ in cases], jitted(j)

    return run


def test_bits():
    cases = [(lambda k, s=s, d=d: mr.bits(k, s, d), lambda k, s=s, d=d: jax.random.bits(k, s, d))
             for s in SHAPES for d in (None, np.uint32, np.uint16, np.uint8)]
    cases.append((lambda k: mr.random_bits(k, 16, (2, 3)), lambda k: jax.random.bits(k, (2, 3), np.uint16)))
    cases.append((lambda k: mr.bits(k, (4,), np.uint64), lambda k: jax.random.bits(k, (4,))))  # uint64 -> uint32
    run = reference(cases)
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert_same(a, b)
    assert mr.bits(mr.PRNGKey(0), (0, 3)).shape == (0, 3)
    with pytest.raises(ValueError):
        mr.bits(mr.PRNGKey(0), (2,), np.int32)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_uniform(dtype):
    low, high = np.array([0.0, 1.0, -2.0], dtype), np.array([[1.0], [10.0]], dtype)
    cases = [(lambda k, s=s: mr.uniform(k, s, dtype), lambda k, s=s: jax.random.uniform(k, s, dtype))
             for s in SHAPES]
    bounds = [b for s in SHAPES for b in ((-2.5, 7.0), (3.0, 3.5), (-1e3, 1e-3))]
    bounded = [(lambda k, s=s, b=b: mr.uniform(k, s, dtype, *b),
                lambda k, s=s, b=b: jax.random.uniform(k, s, dtype, *b))
               for s in SHAPES for b in ((-2.5, 7.0), (3.0, 3.5), (-1e3, 1e-3))]
    bounded.append((lambda k: mr.uniform(k, (2, 3), dtype, mnp.asarray(low), high),
                    lambda k: jax.random.uniform(k, (2, 3), dtype, low, high)))
    run = reference(cases + bounded, fast=False)
    for seed in SEEDS:
        ours, theirs = run(seed)
        for index, (a, b) in enumerate(zip(ours, theirs)):
            if index < len(cases) or _JAX_FUSES_FMA or dtype != np.float32:
                assert_same(a, b)
            else:  # JAX without multiply-add contraction: the product's rounding apart at most
                scale = max(abs(v) for v in (bounds + [(0.0, 10.0)])[index - len(cases)])
                np.testing.assert_allclose(a, b, rtol=0, atol=2 * scale * np.finfo(np.float32).eps)
    assert mr.uniform(mr.PRNGKey(0), (0,), dtype).shape == (0,)


def test_uniform_eager_jax():
    """The same as JAX called eagerly (not inside one jit), for a few cases."""
    for seed in SEEDS[:2]:
        k, j = keys(seed)
        assert_same(mr.uniform(k, (3, 5)), jax.random.uniform(j, (3, 5)))
        if _JAX_FUSES_FMA:
            assert_same(mr.uniform(k, (301,), minval=-2.5, maxval=7.0),
                        jax.random.uniform(j, (301,), minval=-2.5, maxval=7.0))
        assert ulp_distance(mr.normal(k, (301,)), jax.random.normal(j, (301,))) <= 4
        assert_same(mr.randint(k, (7,), -5, 70), jax.random.randint(j, (7,), -5, 70))


def test_uniform_errors():
    k = mr.PRNGKey(0)
    with pytest.raises(ValueError):
        mr.uniform(k, (3,), np.int32)
    with pytest.raises(ValueError):
        mr.uniform(k, (3,), minval=np.zeros(4))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_normal(dtype):
    tolerance = 4 if dtype == np.float32 else 1
    cases = [(lambda k, s=s: mr.normal(k, s, dtype), lambda k, s=s: jax.random.normal(k, s, dtype))
             for s in SHAPES + [(20000,)]]
    run = reference(cases, fast=False)
    for seed in SEEDS:
        ours, theirs = run(seed)
        for a, b in zip(ours, theirs):
            assert ulp_distance(a, b) <= tolerance
        assert (np.asarray(ours[-1]) == np.asarray(theirs[-1])).mean() > (0.95 if _JAX_FUSES_FMA else 0.9)


def test_normal_complex():
    k, j = keys(11)
    ours = np.asarray(mr.normal(k, (5, 3), np.complex64))
    theirs = np.asarray(jax.random.normal(j, (5, 3), np.complex64))
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_truncated_normal(dtype):
    rtol = 2e-5 if dtype == np.float32 else 1e-2
    bounds = ((-1.3, 2.1), (0.5, 0.6), (-3.0, -2.0), (-np.inf, 0.0))
    cases = [(lambda k, s=s, b=b: mr.truncated_normal(k, *b, s, dtype),
              lambda k, s=s, b=b: jax.random.truncated_normal(k, *b, s, dtype))
             for s in [(), (7,), (3, 5)] for b in bounds]
    run = reference(cases)
    for seed in SEEDS:
        for (a, b), (_, (low, high)) in zip(zip(*run(seed)), [(s, b) for s in range(3) for b in bounds]):
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=rtol, atol=rtol)
            assert (a > np.asarray(low, dtype)).all() and (a < np.asarray(high, dtype)).all()
    k, j = keys(9)
    low, high = np.array([-1.0, 0.0, 1.0], np.float32), np.float32(2.0)
    np.testing.assert_allclose(mr.truncated_normal(k, low, high), jax.random.truncated_normal(j, low, high),
                               rtol=2e-5, atol=2e-5)
    assert mr.truncated_normal(k, low, high).shape == (3,)


def test_gumbel():
    run = reference([(lambda k, s=s: mr.gumbel(k, s), lambda k, s=s: jax.random.gumbel(k, s)) for s in SHAPES])
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert np.asarray(a).dtype == np.asarray(b).dtype
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bernoulli():
    p = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    cases = [(lambda k, s=s, q=q: mr.bernoulli(k, q, s), lambda k, s=s, q=q: jax.random.bernoulli(k, q, s))
             for s in SHAPES for q in (0.5, 0.1, 0.0, 1.0)]
    cases += [
        (lambda k: mr.bernoulli(k), lambda k: jax.random.bernoulli(k)),
        (lambda k: mr.bernoulli(k, p), lambda k: jax.random.bernoulli(k, p)),
        (lambda k: mr.bernoulli(k, mnp.asarray(p[0]), (5, 4)), lambda k: jax.random.bernoulli(k, p[0], (5, 4))),
        (lambda k: mr.bernoulli(k, np.float16(0.3), (9,)), lambda k: jax.random.bernoulli(k, np.float16(0.3), (9,))),
    ]
    run = reference(cases)
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert_same(a, b)
    with pytest.raises(TypeError):
        mr.bernoulli(mr.PRNGKey(0), 1, (3,))


# ---- integers --------------------------------------------------------------------------------------------------

INT_CASES = [
    (np.int32, [(0, 10), (-5, 7), (3, 3), (5, 1), (-2**31, 2**31 - 1), (-100, 10**9), (0, 1)]),
    (np.uint32, [(0, 10), (7, 7), (5, 1), (0, 2**31 - 1), (1000, 3000)]),
    (np.int8, [(0, 10), (-128, 127), (-10, 300), (-200, 300), (100, 90)]),
    (np.uint8, [(0, 10), (0, 256), (0, 1000), (250, 255)]),
    (np.int16, [(-5, 7), (-40000, 40000)]),
    (np.uint16, [(0, 10), (0, 65536), (100, 70000)]),
]


def test_randint():
    shapes = [(), (7,), (3, 5)]
    dtypes = [dtype for dtype, _ in INT_CASES]
    # Bounds are arguments here (int32 scalars; JAX draws the same as for Python ints), so that JAX
    # compiles one program for all cases.
    jitted = compiled(lambda k, bounds: [[jax.random.randint(k, s, *b, d) for s in shapes]
                                         for d, b in zip(dtypes, bounds)],
                      jax.random.PRNGKey(0), [(np.int32(0), np.int32(1))] * len(dtypes))
    rounds = max(len(bounds) for _, bounds in INT_CASES)
    for seed in SEEDS[:3]:
        k, j = keys(seed)
        for i in range(rounds):
            chosen = [bounds[i % len(bounds)] for _, bounds in INT_CASES]
            theirs = jitted(j, [(np.int32(low), np.int32(high)) for low, high in chosen])
            for dtype, (low, high), per_shape in zip(dtypes, chosen, theirs):
                for shape, b in zip(shapes, per_shape):
                    assert_same(mr.randint(k, shape, low, high, dtype), b)
    low, high = np.array([-3, 0, 5], np.int32), np.array([[4], [1000]], np.int32)
    run = reference([
        (lambda k: mr.randint(k, (301,), -7, 12345), lambda k: jax.random.randint(k, (301,), -7, 12345)),
        (lambda k: mr.randint(k, (2, 3), mnp.asarray(low), high), lambda k: jax.random.randint(k, (2, 3), low, high)),
        (lambda k: mr.randint(k, (6,), 0.5, 10.7), lambda k: jax.random.randint(k, (6,), 0.5, 10.7)),
        (lambda k: mr.randint(k, (6,), np.int8(-10), np.int8(100)),
         lambda k: jax.random.randint(k, (6,), np.int8(-10), np.int8(100))),
        (lambda k: mr.randint(k, (5,), mnp.asarray(np.int32(-20)), 300, np.int8),
         lambda k: jax.random.randint(k, (5,), -20, 300, np.int8)),
    ])
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert_same(a, b)
    with pytest.raises(TypeError):
        mr.randint(mr.PRNGKey(0), (3,), 0, 10, np.float32)


# ---- permutations and choice --------------------------------------------------------------------------------


def test_permutation():
    x = np.arange(35, dtype=np.float32).reshape(5, 7) * 1.5
    cases = [(lambda k, n=n: mr.permutation(k, n), lambda k, n=n: jax.random.permutation(k, n))
             for n in (1, 2, 10, 2000)]  # 2000 elements take two sorting rounds
    cases.append((lambda k: mr.permutation(k, x[0]), lambda k: jax.random.permutation(k, x[0])))
    for axis in (0, 1, -1):
        cases.append((lambda k, a=axis: mr.permutation(k, mnp.asarray(x), a),
                      lambda k, a=axis: jax.random.permutation(k, x, a)))
        cases.append((lambda k, a=axis: mr.permutation(k, x, a, independent=True),
                      lambda k, a=axis: jax.random.permutation(k, x, a, independent=True)))
    run = reference(cases)
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert_same(a, b)
    with pytest.raises(TypeError):
        mr.permutation(mr.PRNGKey(0), np.float32(3.0))


def test_choice():
    x = np.arange(24, dtype=np.int32).reshape(4, 6) * 3
    p = np.array([0.1, 0.0, 0.3, 0.2, 0.15, 0.25], np.float32)
    arguments = [
        (10, (), True, None, 0), (10, (4,), True, None, 0), (10, (2, 3), False, None, 0), (10, (10,), False, None, 0),
        (6, (5, 2), True, p, 0), (6, (4,), False, p, 0), (x, (3,), True, None, 1), (x, (2, 2), False, None, 0),
        (x, (7,), True, p, 1), (x, (3,), False, p, 1), (x[0], (2, 3), True, p, 0),
    ]
    run = reference([(lambda k, a=a: mr.choice(k, *a), lambda k, a=a: jax.random.choice(k, *a)) for a in arguments])
    for seed in SEEDS:
        for a, b in zip(*run(seed)):
            assert_same(a, b)
    k = mr.PRNGKey(0)
    assert mr.choice(k, 5, (0,)).shape == (0,)
    with pytest.raises(ValueError):
        mr.choice(k, 3, (4,), replace=False)
    with pytest.raises(TypeError):
        mr.choice(k, 3, 4)


# ---- jit, sharded keys, shard_map ------------------------------------------------------------------------------


def _everything(key):
    k1, k2, k3 = mr.split(key, 3)
    return {
        "split": mr.split(key, (2, 2)),
        "fold_in": mr.fold_in(k1, 12345),
        "bits": mr.bits(k2, (3, 4), np.uint16),
        "uniform": mr.uniform(k3, (5,), minval=-2.0, maxval=3.0),
        "normal": mr.normal(k1, (2, 3)),
        "randint": mr.randint(k2, (9,), -4, 50),
        "bernoulli": mr.bernoulli(k3, 0.3, (6,)),
        "permutation": mr.permutation(k1, 9),
        "choice": mr.choice(k2, 7, (3,), replace=False),
        "choice_p": mr.choice(k3, 4, (5,), p=np.array([0.1, 0.2, 0.3, 0.4], np.float32)),
        "truncated_normal": mr.truncated_normal(k1, -1.0, 1.5, (4,)),
        "gumbel": mr.gumbel(k2, (3,)),
    }


def test_jit_equals_eager():
    for seed in (0, 5):
        key = mr.PRNGKey(seed)
        eager = _everything(key)
        jitted = meshax.jit(_everything)(key)
        for name in eager:
            assert_same(jitted[name], eager[name])
    key = mr.PRNGKey(3)
    assert_same(meshax.jit(lambda k, d: mr.fold_in(k, d))(key, mnp.asarray(np.uint32(9))), mr.fold_in(key, 9))
    assert_same(meshax.jit(lambda s: mr.normal(mr.PRNGKey(s), (4,)))(mnp.asarray(np.int32(4))),
                mr.normal(mr.PRNGKey(4), (4,)))


def _mesh():
    return Mesh(np.array(meshax.devices()).reshape(4, 2), ("x", "y"))


def _spec(array):
    return tuple(array.sharding.spec)


def _batched(data):
    """What JAX gives for a batch of keys (with jax.vmap), for the cases of the sharded-key tests."""
    def cases(kj, grid):
        return {
            "fold_in": jax.vmap(lambda k: jax.random.fold_in(k, 5))(kj),
            "fold_in_data": jax.vmap(jax.random.fold_in)(kj, data),
            "split": jax.vmap(lambda k: jax.random.split(k, 3))(kj),
            "bits": jax.vmap(lambda k: jax.random.bits(k, (5,)))(kj),
            "uniform": jax.vmap(lambda k: jax.random.uniform(k, (2, 3)))(kj),
            "randint": jax.vmap(lambda k: jax.random.randint(k, (4,), 0, 100))(kj),
            "normal": jax.vmap(lambda k: jax.random.normal(k, (3,)))(kj),
            "fold_uniform": jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(k, 3), (4,)))(kj),
            "fold_in_11": jax.vmap(lambda k: jax.random.fold_in(k, 11))(kj),
            "uniform_3": jax.vmap(lambda k: jax.random.uniform(k, (3,)))(kj),
            "grid": jax.vmap(jax.vmap(lambda k: jax.random.fold_in(k, 77)))(grid),
        }

    kj, grid = jax.random.split(jax.random.PRNGKey(7), 8), jax.random.split(jax.random.PRNGKey(1), (4, 2))
    return compiled(cases, kj, grid)(kj, grid)


@pytest.fixture(scope="module")
def sharded():
    mesh = _mesh()
    km = meshax.device_put(mr.split(mr.PRNGKey(7), 8), NamedSharding(mesh, PartitionSpec("x")))
    data = np.arange(8, dtype=np.uint32) * 1000
    return mesh, km, data, _batched(data)


def test_sharded_keys_eager(sharded):
    mesh, km, data, expected = sharded
    assert _spec(km) == ("x",)
    folded = mr.fold_in(km, 5)
    assert_same(folded, expected["fold_in"])
    assert _spec(folded)[0] == "x"
    assert len(folded.addressable_shards) == 8
    assert_same(mr.fold_in(km, mnp.asarray(data)), expected["fold_in_data"])
    split = mr.split(km, 3)
    assert_same(split, expected["split"])
    assert _spec(split)[0] == "x"
    assert_same(mr.bits(km, (5,)), expected["bits"])
    uniform = mr.uniform(km, (2, 3))
    assert_same(uniform, expected["uniform"])
    assert _spec(uniform)[0] == "x"
    assert_same(mr.randint(km, (4,), 0, 100), expected["randint"])
    assert ulp_distance(mr.normal(km, (3,)), expected["normal"]) <= 4


def test_sharded_keys_jit_and_2d_mesh(sharded):
    mesh, km, data, expected = sharded
    out = meshax.jit(lambda k: mr.uniform(mr.fold_in(k, 3), (4,)))(km)
    assert_same(out, expected["fold_uniform"])
    assert _spec(out)[0] == "x"
    grid = meshax.device_put(mr.split(mr.PRNGKey(1), (4, 2)), NamedSharding(mesh, PartitionSpec("x", "y")))
    folded = mr.fold_in(grid, 77)
    assert_same(folded, expected["grid"])
    assert _spec(folded)[:2] == ("x", "y")
    assert_same(meshax.jit(lambda g: mr.fold_in(g, 77))(grid), expected["grid"])


def test_shard_map_per_device_keys(sharded):
    mesh, km, data, expected = sharded

    def body(k):  # k: this device's (1, 2) block of keys
        return mr.fold_in(k, 11), mr.uniform(k, (3,))

    folded, uniform = meshax.shard_map(body, mesh=mesh, in_specs=PartitionSpec("x"),
                                       out_specs=(PartitionSpec("x"), PartitionSpec("x")))(km)
    assert_same(folded, expected["fold_in_11"])
    assert_same(uniform, expected["uniform_3"])


def _nearest_float32(exact: Fraction) -> np.float32:
    """The float32 nearest to a rational (ties to even), by comparing the candidates around it exactly."""
    guess = np.float32(float(exact)) if abs(exact) < 2 ** 128 else np.float32(np.inf if exact > 0 else -np.inf)
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]
    return min(finite, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))


def test_fused_multiply_add_rounds_once_even_where_the_float64_sum_is_a_float32_halfway_point():
    """random_bits' float32 fma (used by erf_inv, as XLA contracts a * b + c) equals the exactly rounded value:
    crafted sums that float64 rounds onto a float32 halfway point (where rounding twice goes wrong), float32's
    subnormal range, and random values."""
    from meshax._src.primitives.random_bits import _fma_impl

    rng = np.random.default_rng(11)
    n = 400
    scale = rng.choice(np.array([1, 2, 4, 0.5, -1], np.float32), n)
    halfway = (np.full(n, 2.0 ** -12 * (1 + 2.0 ** -23), np.float32) * scale,
               np.full(n, -2.0 ** -12 * (1 - 2.0 ** -23), np.float32), np.full(n, 1 + 2.0 ** -23, np.float32) * scale)
    subnormal_halfway = (np.full(n, 2.0 ** -75 * (1 + 2.0 ** -23), np.float32) * np.abs(scale),
                         np.full(n, -2.0 ** -75 * (1 - 2.0 ** -23), np.float32),
                         np.full(n, 2.0 ** -140 + 2.0 ** -149, np.float32) * np.abs(scale))  # float32 subnormals
    tiny = tuple((rng.standard_normal(n) * s).astype(np.float32) for s in (1e-20, 1e-20, 1e-39))
    plain = tuple(rng.standard_normal(n).astype(np.float32) for _ in range(3))
    for a, b, c in (halfway, subnormal_halfway, tiny, plain):
        ours = _fma_impl(a, b, c)
        exact = [_nearest_float32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in
                 zip(a, b, c)]
        np.testing.assert_array_equal(ours.view(np.uint32), np.array(exact, np.float32).view(np.uint32))
    for crafted in (halfway, subnormal_halfway):  # they do round twice wrong without the fix
        naive = (crafted[0].astype(np.float64) * crafted[1] + crafted[2]).astype(np.float32)
        assert (naive != _fma_impl(*crafted)).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_arrays_are_made_in_blocks_with_the_values_of_one_pass(dtype, monkeypatch):
    """Threefry, the fused multiply-add and erf_inv run on blocks of rows of a large array (over this call's
    threads): bits, uniform and normal equal those of one pass over the whole array, and JAX's uniform."""
    from meshax._src.primitives import random_bits

    key, jkey = keys(3)
    shape = (700, 301)  # several blocks, the last one shorter
    blocked = [np.asarray(f(key, shape, dtype)) for f in (mr.uniform, mr.normal)] + [np.asarray(mr.bits(key, shape))]
    monkeypatch.setattr(random_bits, "BLOCK_ELEMENTS", 10 ** 9)
    whole = [np.asarray(f(key, shape, dtype)) for f in (mr.uniform, mr.normal)] + [np.asarray(mr.bits(key, shape))]
    for a, b in zip(blocked, whole):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    if dtype == np.float32 and _JAX_FUSES_FMA:
        assert_same(blocked[0], jax.random.uniform(jkey, shape, dtype))
