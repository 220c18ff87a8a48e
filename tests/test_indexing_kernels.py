"""The indexing primitives' short paths (primitives/indexing_kernels.py): a constant pad, indices already in range,
a scatter indexed by an array in every dimension. Each against JAX eagerly, under jit and in shard_map, with
indices in range and out of it (negative, past the end: gathers clamp, scatters drop), every scatter mode, and
over a mesh where each device holds a block of the operand."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from differential import MODES, check_modes
from meshax._src.primitives import indexing_kernels as K

ROWS = np.arange(6)[:, None]
IN_RANGE = np.array([[0], [3], [4], [1], [3], [0]])
OUT_OF_RANGE = np.array([[0], [-1], [7], [6], [-6], [2]])
PAST_THE_END = np.array([[0], [6], [2], [5], [6], [1]])  # none negative, some one past the last


@pytest.mark.parametrize("value", [0.0, np.nan, -2.5])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_constant_pad_is_np_pad(value, dtype):
    x = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    if dtype is np.int32 and np.isnan(value):
        with pytest.raises(ValueError):
            np.pad(x, ((1, 0), (0, 2)), constant_values=value)
        with pytest.raises(ValueError):
            K.pad(x, pad_width=((1, 0), (0, 2)), mode="constant", axes=(0, 1), constant_values=value)
        return
    for widths in (((1, 0), (0, 2)), ((0, 0), (0, 1)), ((0, 0), (0, 0))):
        ours = K.pad(x, pad_width=widths, mode="constant", axes=(0, 1), constant_values=value)
        theirs = np.pad(x, widths, constant_values=value)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs, equal_nan=dtype is np.float32)


@pytest.mark.parametrize("mode", MODES)
def test_padded_take_along_axis_and_its_gradient(mode):
    """A cross-entropy: take_along_axis (JAX pads a NaN column and selects clamped indices), and its gradient (a
    scatter-add indexed by arrays in both dimensions)."""
    logits = np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10)

    def case(L, logits, labels):
        def loss(z):
            return -L.numpy.mean(L.numpy.take_along_axis(L.nn.log_softmax(z), labels, axis=-1))
        return loss(logits), L.grad(loss)(logits)

    check_modes(case, logits, IN_RANGE.astype(np.int32), modes=(mode,))


@pytest.mark.parametrize("update", ["add", "set", "min", "max", "multiply"])
@pytest.mark.parametrize("indices", ["in_range", "out_of_range"])
@pytest.mark.parametrize("mode", MODES)
def test_scatter_indexed_by_arrays_in_every_dimension(update, indices, mode):
    columns = (IN_RANGE if indices == "in_range" else OUT_OF_RANGE).astype(np.int32)
    x = np.linspace(-2, 2, 36, dtype=np.float32).reshape(6, 6)
    y = np.linspace(1, 3, 6, dtype=np.float32).reshape(6, 1)

    def case(L, x, y, rows, columns):
        at = x.at[rows, columns]
        return getattr(at, update)(y, mode="drop")

    check_modes(case, x, y, ROWS.astype(np.int32), columns, modes=(mode,))


@pytest.mark.parametrize("indices", ["in_range", "out_of_range"])
def test_scatter_indexed_by_arrays_over_a_mesh(indices):
    """The operand split over devices by rows and by columns: each device applies the updates that land in its block
    (in its own coordinates), the rest are dropped."""
    columns = (IN_RANGE if indices == "in_range" else OUT_OF_RANGE).astype(np.int32)
    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8)
    y = np.arange(1, 7, dtype=np.float32).reshape(6, 1)
    expected = jax.jit(lambda x: x.at[ROWS, columns].add(y, mode="drop"))(x)
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:4]).reshape(2, 2), ("a", "b"))
    for spec in (("a", "b"), ("b", None), (None, "a")):
        placed = meshax.device_put(x, meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec(*spec)))
        ours = meshax.jit(lambda x: x.at[ROWS, columns].add(y, mode="drop"))(placed)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected))


@pytest.mark.parametrize("mode", MODES)
def test_gather_with_indices_in_and_out_of_range(mode):
    x = np.linspace(-2, 2, 36, dtype=np.float32).reshape(6, 6)
    check_modes(lambda L, x, c: (x[ROWS, c], L.numpy.take_along_axis(x, c, axis=1, mode="clip")),
                x, OUT_OF_RANGE.astype(np.int32), modes=(mode,))
    for columns in (IN_RANGE, PAST_THE_END):
        check_modes(lambda L, x, c: (x[ROWS, c], L.numpy.take_along_axis(x, c, axis=1, mode="clip")),
                    x, columns.astype(np.int32), modes=(mode,))


@pytest.mark.parametrize("shape, index_shape, axis", [
    ((4, 5), (4, 3), 1), ((4, 5), (1, 3), 1), ((4, 5), (2, 5), 0), ((3, 4, 5), (3, 1, 2), 2),
    ((3, 4, 5), (3, 2, 5), 1), ((6,), (3,), 0), ((4, 5), (4, 3), -1), ((3, 4, 5), (2, 1, 5), 0)])
def test_take_along_is_np_take_along_axis_of_clamped_indices(shape, index_shape, axis):
    """take_along's one fancy index (its other axes' ranges made once per shape) against NumPy's, indices
    broadcasting along the other axes, negative and past the end (clamped, as JAX's gathers are)."""
    rng = np.random.default_rng(sum(shape) + axis)
    x = rng.standard_normal(shape).astype(np.float32)
    n = shape[axis]
    for _ in range(2):  # the second time through the remembered ranges
        idx = rng.integers(-n - 2, n + 2, index_shape).astype(np.int32)
        clamped = np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)
        ours, theirs = K.take_along(x, idx, axis=axis), np.take_along_axis(x, clamped, axis)
        assert ours.shape == theirs.shape and np.array_equal(ours, theirs)


def test_take_along_with_an_index_that_does_not_broadcast_raises_as_numpy_does():
    with pytest.raises(IndexError):
        np.take_along_axis(np.zeros((4, 5)), np.zeros((3, 2), np.intp), 1)
    with pytest.raises(IndexError):
        K.take_along(np.zeros((4, 5)), np.zeros((3, 2), np.intp), axis=1)


@pytest.mark.parametrize("count, rows", [(2048, 256), (100, 7), (500, 3), (0, 5), (64, 1000)],
                         ids=["embedding", "repeats", "past-the-repeat-limit", "none", "few"])
def test_whole_rows_added_at_indices_have_np_add_ats_bits(count, rows):
    """x.at[i].add(y) for one integer array i (an embedding's gradient) adds each row's updates in their order, as
    np.add.at does, bit for bit; also in a block of rows (local_box), dropping the updates that land elsewhere."""
    rng = np.random.default_rng(count)
    idx = rng.integers(0, rows, (count // 4, 4) if count else (0, 4))
    y = rng.standard_normal(idx.shape + (2, 3)).astype(np.float32)
    x = rng.standard_normal((rows, 2, 3)).astype(np.float32)
    want = x.copy()
    np.add.at(want, idx, y)
    index = ("array", slice(0, 2, 1), slice(0, 3, 1))
    assert K.scatter(x, y, idx, index=index, mode="add").tobytes() == want.tobytes()
    low = rows // 2
    block = K.scatter(x[low:], y, idx, index=index, mode="add", local_box=((low, rows), (0, 2), (0, 3)))
    kept = x[low:].copy()
    inside = idx >= low
    np.add.at(kept, idx[inside] - low, y[inside])
    assert block.tobytes() == kept.tobytes()


@pytest.mark.parametrize("mode", MODES)
def test_an_embeddings_gradient_is_jaxs(mode):
    table = np.linspace(-1, 1, 40 * 6, dtype=np.float32).reshape(40, 6)
    tokens = (np.arange(64, dtype=np.int32).reshape(8, 8) * 13) % 40
    check_modes(lambda L, t, i: L.grad(lambda t: (L.numpy.tanh(t[i]) ** 2).sum())(t), table, tokens, modes=(mode,))
