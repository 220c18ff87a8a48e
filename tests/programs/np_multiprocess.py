"""meshax.numpy on arrays that span processes: some thirty operations, each checked on every process
against NumPy through process_allgather. Prints `CHECK name` after each check, and `DIGEST name hex`
(a hash of the gathered value) so that the test can see that every process got the same result.

Started by `meshax launch` (or by hand: program ADDRESS ID N); needs 8 devices in all.
"""
import hashlib

import numpy as np

import meshax
import meshax.nn as nn
import meshax.numpy as jnp
from arr_common import init, ok, say
from meshax.experimental.multihost_utils import process_allgather
from meshax.sharding import NamedSharding, PartitionSpec as P

init()
assert meshax.device_count() == 8, meshax.device_count()
mesh = meshax.make_mesh((4, 2), ("a", "b"))  # 'a' spans processes in 2x4 and 4x2 layouts
rng = np.random.default_rng(0)


def put(value, *spec):
    return meshax.device_put(value, NamedSharding(mesh, P(*spec)))


def check(name, result, expected, spec=None, rtol=1e-5, atol=1e-5):
    # a process-spanning array gathers to its global value (a fully addressable one would be stacked per process)
    gathered = process_allgather(result) if not result.is_fully_addressable else np.asarray(result)
    expected = np.asarray(expected)
    assert gathered.shape == expected.shape, (name, gathered.shape, expected.shape)
    assert gathered.dtype == expected.dtype, (name, gathered.dtype, expected.dtype)
    if np.issubdtype(expected.dtype, np.inexact):
        np.testing.assert_allclose(gathered, expected, rtol=rtol, atol=atol, err_msg=name)
    else:
        np.testing.assert_array_equal(gathered, expected, err_msg=name)
    if spec is not None:
        assert result.sharding == NamedSharding(mesh, spec), (name, result.sharding)
    # every local shard holds its part of the value
    for shard in result.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), gathered[shard.index], err_msg=f"{name} {shard.device}")
    say(f"DIGEST {name} {hashlib.sha256(np.ascontiguousarray(gathered).tobytes()).hexdigest()[:16]}")
    ok(name)


X = rng.standard_normal((8, 8)).astype(np.float32)
Y = rng.standard_normal((8, 8)).astype(np.float32)
W = rng.standard_normal((8, 4)).astype(np.float32)
I = rng.integers(-5, 5, (8, 8)).astype(np.int32)
x = put(X, "a", "b")
y = put(Y, "b", "a")
w = put(W, "b", None)
i = put(I, None, "a")

# reductions over sharded axes (sums cross processes along 'a')
check("sum_axis0", jnp.sum(x, axis=0), X.sum(0), P("b"))
check("sum_axis1", jnp.sum(x, axis=1), X.sum(1), P("a"))
check("sum_all", jnp.sum(x), X.sum())
check("mean_var", jnp.stack([jnp.mean(x, axis=0), jnp.var(x, axis=0)]), np.stack([X.mean(0), X.var(0)]))
check("max_min_int", jnp.max(i, axis=1) - jnp.min(i, axis=0), I.max(1) - I.min(0))

# contractions: P('a','b') @ P('b', None) contracts the split dimension and lands on P('a',)
check("matmul", x @ w, X @ W, P("a"))
check("matmul_transposed", jnp.matmul(x.T, y), X.T @ Y)
check("einsum", jnp.einsum("ij,jk->ik", x, y), np.einsum("ij,jk->ik", X, Y), rtol=1e-4, atol=1e-4)

# elementwise with different shardings, promotion, host values and scalars
check("add_different_shardings", x + y, X + Y)
check("elementwise_mixed", jnp.sin(x) * i + 2 - Y, np.sin(X) * I.astype(np.float32) + 2 - Y)
check("where", jnp.where(x > 0, x, y * 2), np.where(X > 0, X, Y * 2))

# shape ops
check("reshape_flat", jnp.reshape(x, (-1,)), X.reshape(-1), P("a"))
check("reshape_split", x.reshape(2, 4, 8), X.reshape(2, 4, 8))
check("transpose", x.T, X.T, P("b", "a"))
check("concatenate", jnp.concatenate([x, y], axis=1), np.concatenate([X, Y], axis=1))
check("concatenate_kept", jnp.concatenate([x, x * 2], axis=0), np.concatenate([X, X * 2], axis=0), P("a", "b"))
check("stack_kept", jnp.stack([x, y.T]), np.stack([X, Y.T]), P(None, "a", "b"))

# indexing
check("slice", x[1:6, ::-1], X[1:6, ::-1], P(None, "b"))
check("slice_kept", x[::2, 2:6], X[::2, 2:6], P("a", "b"))
check("integer_array", x[np.array([7, 0, 3, 3])], X[np.array([7, 0, 3, 3])], P(None, "b"))
expected = np.concatenate([X[:, [7, 0]], np.full((8, 1), np.nan, np.float32)], axis=1)  # 9 is out of range: filled
check("take_columns", jnp.take(x, np.array([7, 0, 9]), axis=1), expected, P("a"))
check("boolean_mask", x[X > 0.5], X[X > 0.5])
expected = X.copy()
np.add.at(expected, (np.array([1, 1, 6]), 2), 10.0)
check("at_add", x.at[np.array([1, 1, 6]), 2].add(10.0), expected, P("a", "b"))
U = rng.standard_normal((6, 5)).astype(np.float32)  # 6 rows over 4 devices along 'a': uneven blocks
expected = U.copy()
expected[np.array([5, 0, 2]), 1:4] = -1.0
expected[::-2, 4] = 7.0
updated = put(U, "a", "b").at[np.array([5, 0, 2]), 1:4].set(-1.0).at[::-2, 4].set(7.0)
check("at_set_uneven", updated, expected, P("a", "b"))

# scans and arg-reductions along sharded axes
check("cumsum_sharded_axis", jnp.cumsum(x, axis=0), np.cumsum(X, axis=0), P("a", "b"), rtol=1e-4, atol=1e-4)
check("sort_sharded_axis", jnp.sort(x, axis=0), np.sort(X, axis=0), P("a", "b"))
check("cumsum_int", jnp.cumsum(i, axis=1), np.cumsum(I, axis=1).astype(np.int32))
check("argmax_axis0", jnp.argmax(x, axis=0), X.argmax(0).astype(np.int32))
check("argmax_all", jnp.argmax(y), np.int32(Y.argmax()))
check("argmin_axis1", jnp.argmin(i, axis=1), I.argmin(1).astype(np.int32))

# nn and jit on process-spanning arrays
softmax = np.exp(X - X.max(0)) / np.exp(X - X.max(0)).sum(0)
check("softmax_sharded_axis", nn.softmax(x, axis=0), softmax)
check("jit", meshax.jit(lambda a, b: jnp.tanh(a @ b).sum(axis=0))(x, w), np.tanh(X @ W).sum(0))

# uneven: 6 rows over 4 devices along 'a'
u = put(U, "a")
check("uneven_sum", jnp.sum(u, axis=0), U.sum(0))
check("uneven_elementwise", u * 2 + 1, U * 2 + 1)

# issue 40's functions on process-spanning arrays: segment sums, histograms, top_k, ufunc methods, scipy
import scipy.special as sps  # noqa: E402
import scipy.stats as spst  # noqa: E402

import meshax.ops  # noqa: E402
import meshax.scipy.special  # noqa: E402
import meshax.scipy.stats  # noqa: E402

flat = put(X.reshape(-1), "a")
ids = put(np.repeat(np.arange(8, dtype=np.int32), 8) % 5, "a")
expected_segments = np.zeros(5, np.float32)
np.add.at(expected_segments, np.repeat(np.arange(8), 8) % 5, X.reshape(-1))
check("segment_sum_sharded", meshax.ops.segment_sum(flat, ids, num_segments=5), expected_segments)
counts, edges = jnp.histogram(flat, bins=6, range=(-3.0, 3.0))
np_counts, np_edges = np.histogram(X.reshape(-1), bins=6, range=(-3.0, 3.0))
check("histogram_sharded", counts, np_counts.astype(np.asarray(counts).dtype))
values, indices = meshax.lax.top_k(x, 3)
check("top_k_sharded_rows", values, -np.sort(-X, axis=1)[:, :3])
check("ufunc_reduce_sharded_axis", jnp.add.reduce(x, axis=0), X.sum(0))
check("ufunc_outer_sharded", jnp.multiply.outer(flat[:8], flat[:8]), np.multiply.outer(X.reshape(-1)[:8],
                                                                                     X.reshape(-1)[:8]))
check("special_erfcx_sharded", meshax.scipy.special.erfcx(x), sps.erfcx(X.astype(np.float64)).astype(np.float32),
      rtol=2e-5)
check("stats_gamma_sharded", meshax.scipy.stats.gamma.logpdf(jnp.abs(x) + 0.1, 2.0),
      spst.gamma.logpdf(np.abs(X) + np.float32(0.1), 2.0).astype(np.float32), rtol=2e-5)

say("NP-MULTIPROCESS-DONE")
