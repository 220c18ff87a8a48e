"""Bad inputs to the public API, in one process with 8 CPU devices.

Every mistake must raise a clear Python exception (TypeError, ValueError, IndexError, NameError...) whose
message names the offending value; never a crash, a hang or a wrong answer. Messages are checked loosely (a
key substring). NaN and inf must pass through reshards, elementwise ops and collectives unharmed. Known bugs
are marked xfail(strict=True) with the reason.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from meshax.sharding import PartitionSpec as P

DEVICES = meshax.devices()
MESH = meshax.make_mesh((8,), ("x",))
MESH2 = meshax.make_mesh((4, 2), ("a", "b"))
ROWS = NamedSharding(MESH, P("x"))

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def rows(value) -> meshax.Array:
    return meshax.device_put(np.asarray(value), ROWS)


X = rows(np.arange(16.0, dtype=np.float32).reshape(8, 2))
V = rows(np.arange(8.0, dtype=np.float32))


def raises(kind, *fragments):
    """pytest.raises(kind) whose message must contain every fragment (case-insensitive)."""

    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(kind)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            if handled:
                message = str(self.info.value).lower()
                for fragment in fragments:
                    assert str(fragment).lower() in message, (fragment, str(self.info.value))
            return handled

    return Check()


# ---- meshes, partition specs, shardings -------------------------------------------------------------------------


@pytest.mark.parametrize("make, kind, fragment", [
    (lambda: Mesh(np.array([]), ("x",)), ValueError, "at least one device"),
    (lambda: Mesh([], ("x",)), ValueError, "at least one device"),
    (lambda: meshax.make_mesh((0,), ("x",), devices=[]), ValueError, "at least one device"),
    (lambda: Mesh([DEVICES[0], DEVICES[0]], ("x",)), ValueError, "[0, 0]"),
    (lambda: meshax.make_mesh((2,), ("x",), devices=[DEVICES[1], DEVICES[1]]), ValueError, "[1, 1]"),
    (lambda: Mesh([1, 2], ("x",)), TypeError, "devices"),
    (lambda: Mesh(["cpu:0"], ("x",)), TypeError, "devices"),
    (lambda: Mesh(DEVICES, ("x", "y")), ValueError, "('x', 'y')"),
    (lambda: Mesh(np.array(DEVICES).reshape(4, 2), ("x",)), ValueError, "('x',)"),
    (lambda: Mesh(np.array(DEVICES).reshape(4, 2), ("x", "x")), ValueError, "('x', 'x')"),
    (lambda: Mesh(DEVICES, (1,)), TypeError, "1"),
    (lambda: meshax.make_mesh((16,), ("x",)), ValueError, "(16,)"),
    (lambda: meshax.make_mesh((-8,), ("x",)), ValueError, "(-8,)"),
    (lambda: meshax.make_mesh((4, 2), ("x",)), ValueError, "('x',)"),
    (lambda: meshax.make_mesh((2, 2), ("a", "a"), devices=DEVICES[:4]), ValueError, "('a', 'a')"),
])
def test_bad_meshes(make, kind, fragment):
    with raises(kind, fragment):
        make()


@pytest.mark.parametrize("entry", [1, 2.5, object(), ("x", None), ("x", 3), b"x"])
def test_partition_spec_entries(entry):
    with raises(TypeError, repr(entry)):
        P(entry)


@pytest.mark.parametrize("mesh, spec, kind, fragment", [
    (MESH, P("y"), ValueError, "'y'"),
    (MESH2, P("a", "x"), ValueError, "'x'"),
    (MESH2, P(("a", "nope")), ValueError, "'nope'"),
    (MESH, P("x", "x"), ValueError, "more than once"),
    (MESH2, P(("a", "a")), ValueError, "more than once"),
    (MESH2, P("a", ("b", "a")), ValueError, "more than once"),
    (MESH, "x", TypeError, "'x'"),
    (MESH, 3, TypeError, "3"),
    ("mesh", P(), TypeError, "str"),
    (DEVICES, P(), TypeError, "list"),
])
def test_bad_named_shardings(mesh, spec, kind, fragment):
    with raises(kind, fragment):
        NamedSharding(mesh, spec)


def test_bad_memory_kind_and_single_device_sharding():
    with raises(ValueError, "pinned_host"):
        NamedSharding(MESH, P(), memory_kind="pinned_host")
    with raises(TypeError, "3"):
        SingleDeviceSharding(3)


@given(st.integers(1, 4), st.integers(0, 3))
@SETTINGS
def test_spec_longer_than_rank_is_refused(extra, rank):
    """A spec with more non-trivial entries than the array has dimensions (hypothesis over ranks)."""
    spec = P(*([None] * rank), *(["a", "b"][:extra] if extra <= 2 else ["a", None, "b"]))
    assume(len(spec.normalized()) > rank)
    value = np.zeros((2,) * rank, np.float32)
    with raises(ValueError, "rank"):
        meshax.device_put(value, NamedSharding(MESH2, spec))


def test_spec_with_trailing_nones_longer_than_rank_is_refused():
    with raises(ValueError, "rank"):
        meshax.device_put(np.arange(8.0), NamedSharding(MESH, P("x", None, None)))


# ---- device_put ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target, kind, fragment", [
    ("cpu", TypeError, "'cpu'"),
    (3, TypeError, "3"),
    (1.5, TypeError, "1.5"),
    (P("x"), ValueError, "needs a mesh"),     # a bare PartitionSpec outside `with mesh:`
    (MESH, TypeError, "Mesh"),
])
def test_device_put_bad_targets(target, kind, fragment):
    with raises(kind, fragment):
        meshax.device_put(np.arange(8.0), target)


@pytest.mark.parametrize("value, fragment", [
    (object(), "object"),
    ("hello", "hello"),
    (np.array([object()]), "dtype('o')"),
    (np.array(["a", "b"]), "<u1"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "m8"),
])
def test_device_put_bad_values(value, fragment):
    with raises(TypeError, fragment):
        meshax.device_put(value, ROWS)


@pytest.mark.parametrize("values, shardings", [
    ((np.arange(8.0), np.arange(8.0)), (ROWS,)),
    ((np.arange(8.0),), (ROWS, ROWS)),
    ({"a": np.arange(8.0)}, {"b": ROWS}),
    ([np.arange(8.0), {"c": np.arange(8.0)}], [ROWS, ROWS]),
])
def test_device_put_tree_of_shardings_must_match(values, shardings):
    with raises(ValueError, "does not match"):
        meshax.device_put(values, shardings)


def test_device_put_bare_spec_under_mesh_and_bad_axis():
    with MESH:
        assert meshax.device_put(np.arange(8.0), P("x")).sharding == ROWS
        with raises(ValueError, "'y'"):
            meshax.device_put(np.arange(8.0), P("y"))


# ---- make_array_from_* -----------------------------------------------------------------------------------------------


SINGLES = [meshax.device_put(np.array([float(i)], np.float32), d) for i, d in enumerate(DEVICES)]


def test_make_array_from_single_device_arrays_ok():
    out = meshax.make_array_from_single_device_arrays((8,), ROWS, SINGLES)
    np.testing.assert_array_equal(np.asarray(out), np.arange(8.0))


@pytest.mark.parametrize("shape, sharding, arrays, kind, fragment", [
    ((8,), ROWS, SINGLES[:7], ValueError, "id=7"),                           # a local device without an array
    ((16,), ROWS, SINGLES, ValueError, "(2,)"),                               # wrong shard shape
    ((8,), ROWS, [np.array([1.0], np.float32)] * 8, TypeError, "one device"),  # not meshax Arrays
    ((8,), ROWS, [meshax.device_put(np.ones(8), NamedSharding(MESH, P()))], TypeError, "one device"),
    ((4,), NamedSharding(meshax.make_mesh((4,), ("x",), devices=DEVICES[:4]), P("x")),
     SINGLES[:4] + [SINGLES[5]], ValueError, "TFRT_CPU_5"),                  # a device outside the sharding
    ((8,), ROWS, SINGLES[:7] + [meshax.device_put(np.array([1], np.int32), DEVICES[7])], ValueError, "int32"),
])
def test_make_array_from_single_device_arrays_bad(shape, sharding, arrays, kind, fragment):
    with raises(kind, fragment):
        meshax.make_array_from_single_device_arrays(shape, sharding, arrays)


def test_make_array_from_single_device_arrays_duplicate_device():
    other = meshax.device_put(np.array([99.0], np.float32), DEVICES[0])
    with raises(ValueError, "TFRT_CPU_0"):
        meshax.make_array_from_single_device_arrays((8,), ROWS, SINGLES + [other])


def test_make_array_from_callback_and_process_local_data_bad_shapes():
    with raises(ValueError, "(3,)"):
        meshax.make_array_from_callback((8,), ROWS, lambda index: np.zeros(3))
    with raises(ValueError, "(5,)"):
        meshax.make_array_from_process_local_data(ROWS, np.zeros(5), (8,))


# ---- shard_map -----------------------------------------------------------------------------------------------------


def identity_map(in_specs, out_specs, mesh=MESH):
    return meshax.shard_map(lambda *a: a[0], mesh=mesh, in_specs=in_specs, out_specs=out_specs)


@given(st.integers(1, 40), st.sampled_from([("x",), ("a",), ("b",), (("a", "b"),)]))
@SETTINGS
def test_shard_map_indivisible_shapes(size, axes):
    """Dimension sizes not divisible by the shard count raise naming size and count; divisible ones work."""
    mesh = MESH if axes == ("x",) else MESH2
    spec = P(*axes)
    count = math.prod(mesh.shape[a] for a in (axes[0] if isinstance(axes[0], tuple) else axes))
    value = np.arange(size, dtype=np.float32)
    mapped = identity_map(spec, spec, mesh)
    if size % count:
        with raises(ValueError, f"size {size}", f"{count} shards"):
            mapped(value)
    else:
        np.testing.assert_array_equal(np.asarray(mapped(value)), value)


@pytest.mark.parametrize("in_specs, out_specs, args, kind, fragment", [
    (P("y"), P("x"), (V,), ValueError, "'y'"),
    (P("x", "x"), P("x"), (X,), ValueError, "more than once"),
    ((P("x"), P("x"), P()), P("x"), (V, V), ValueError, "3 partitionspecs"),
    ((P("x"), P("x")), P("x"), (V, V, V), ValueError, "2 partitionspecs"),
    (P(None, "x"), P("x"), (V,), ValueError, "rank 1"),
    (P("x"), P(None, "x"), (V,), ValueError, "rank 1"),
])
def test_shard_map_bad_specs(in_specs, out_specs, args, kind, fragment):
    with raises(kind, fragment):
        identity_map(in_specs, out_specs)(*args)


def test_shard_map_out_specs_count_mismatch_and_missing_pieces():
    with raises(ValueError, "3 partitionspecs"):
        meshax.shard_map(lambda a: (a, a), mesh=MESH, in_specs=P("x"), out_specs=(P("x"), P(), P()))(V)
    with raises(ValueError, "needs a mesh"):
        meshax.shard_map(lambda a: a, in_specs=P("x"), out_specs=P("x"))(V)
    with raises(TypeError, "out_specs"):
        meshax.shard_map(lambda a: a, mesh=MESH, in_specs=P("x"))(V)
    with raises(TypeError, "str"):
        meshax.shard_map(lambda a: a, mesh="mesh", in_specs=P("x"), out_specs=P("x"))(V)


def test_shard_map_body_errors_propagate():
    with raises(ValueError, "broadcast"):
        meshax.shard_map(lambda a: a + jnp.ones(3), mesh=MESH, in_specs=P("x"), out_specs=P("x"))(X)


def test_shard_map_unknown_axis_in_out_specs():
    with raises(ValueError, "'y'"):
        identity_map(P("x"), P("y"))(V)


def test_shard_map_in_spec_with_trailing_none_longer_than_rank():
    with raises(ValueError, "rank"):
        identity_map(P("x", None), P("x"))(V)


# ---- collectives -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, name", [
    (lambda: lax.psum(V, "x"), "psum"),
    (lambda: lax.pmean(V, "x"), "pmean"),
    (lambda: lax.pmax(V, "x"), "pmax"),
    (lambda: lax.all_gather(V, "x"), "all_gather"),
    (lambda: lax.ppermute(V, "x", [(0, 1)]), "ppermute"),
    (lambda: lax.psum_scatter(V, "x"), "psum_scatter"),
    (lambda: lax.all_to_all(V, "x", 0, 0), "all_to_all"),
    (lambda: lax.axis_index("x"), "axis_index"),
    (lambda: meshax.jit(lambda a: lax.psum(a, "x"))(V), "psum"),
])
def test_collectives_outside_shard_map(call, name):
    with raises(NameError, name, "'x'", "outside shard_map"):
        call()


def in_map(body, in_specs=P("x"), out_specs=P("x"), arg=V):
    return meshax.shard_map(body, mesh=MESH, in_specs=in_specs, out_specs=out_specs)(arg)


@pytest.mark.parametrize("body, kind, fragment", [
    (lambda a: lax.psum(a, "y"), NameError, "'y'"),
    (lambda a: lax.all_gather(a, "nope"), NameError, "'nope'"),
    (lambda a: lax.psum(a, {"x"}), TypeError, "{'x'}"),  # psum(a, ()) is `a`, as in JAX
    (lambda a: lax.psum_scatter(a, "x"), ValueError, "size 1"),
    (lambda a: lax.all_gather(a, "x", axis=3), ValueError, "axis 3"),
])
def test_collectives_bad_arguments(body, kind, fragment):
    with raises(kind, fragment):
        in_map(body, out_specs=P())


def test_psum_with_an_integer_axis_name():
    with raises((TypeError, NameError), "0"):
        in_map(lambda a: lax.psum(a, 0), out_specs=P())


def permutation_pairs(draw, n):
    targets = draw(st.permutations(range(n)))
    keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return [(s, t) for s, t, k in zip(range(n), targets, keep) if k]


@st.composite
def perms(draw):
    """A valid (partial) permutation of 0..7, or one broken in one random way."""
    pairs = permutation_pairs(draw, 8)
    how = draw(st.sampled_from(["valid", "dup_source", "dup_target", "too_big", "negative"]))
    if how == "valid":
        return pairs, True
    if how in ("dup_source", "dup_target") and not pairs:
        pairs = [(0, 1)]
    if how == "dup_source":
        s, _ = draw(st.sampled_from(pairs))
        used = {t for _, t in pairs}
        free = [t for t in range(8) if t not in used] or [99]
        pairs = pairs + [(s, free[0])]
    elif how == "dup_target":
        _, t = draw(st.sampled_from(pairs))
        used = {s for s, _ in pairs}
        free = [s for s in range(8) if s not in used] or [99]
        pairs = pairs + [(free[0], t)]
    elif how == "too_big":
        pairs = pairs + [(draw(st.integers(8, 20)), 0)]
    else:
        pairs = pairs + [(0, draw(st.integers(-9, -1)))]
    return pairs, False


@given(perms())
@SETTINGS
def test_ppermute_permutations(perm_and_valid):
    """Valid partial permutations move blocks as NumPy says (others get zeros); invalid ones raise naming perm."""
    perm, valid = perm_and_valid
    body = lambda a: lax.ppermute(a, "x", perm)  # noqa: E731
    if not valid:
        with raises(ValueError, "not a permutation", str(perm[-1][0])):
            in_map(body)
        return
    expected = np.zeros(8, np.float32)
    for source, target in perm:
        expected[target] = source
    np.testing.assert_array_equal(np.asarray(in_map(body)), expected)


@pytest.mark.parametrize("perm", [[(0,)], 3, [(0, 1, 2)], "01"])
def test_ppermute_malformed_perm(perm):
    with pytest.raises((TypeError, ValueError)):
        in_map(lambda a: lax.ppermute(a, "x", perm))


# ---- meshax.numpy -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, fragment", [
    (lambda: jnp.zeros(3, dtype="foo"), "foo"),
    (lambda: X.astype("notadtype"), "notadtype"),
    (lambda: jnp.ones((2, 2), dtype="float99"), "float99"),
    (lambda: jnp.asarray(np.array(["a", "b"])), "<u1"),
    (lambda: X + "hello", "hello"),
    (lambda: jnp.sin("abc"), "abc"),
    (lambda: X + None, "none"),
    (lambda: X + object(), "object"),
    (lambda: X + [[1, 2], [3]], "[[1, 2], [3]]"),
    (lambda: jnp.bitwise_and(X, X), "bitwise_and"),
])
def test_bad_dtypes_and_values(make, fragment):
    with raises(TypeError, fragment):
        make()


@pytest.mark.parametrize("make", [lambda: jnp.zeros(3, dtype=object), lambda: jnp.zeros(3, dtype=str),
                                  lambda: X.astype(object)])
def test_object_and_string_dtypes_are_refused(make):
    with pytest.raises(TypeError):
        make()


@st.composite
def reshapes(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    target = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    if draw(st.booleans()):
        target = target[:-1] + (-1,)
    return shape, target


@given(reshapes())
@SETTINGS
def test_reshape_sizes(shape_target):
    shape, target = shape_target
    value = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    array = meshax.device_put(value, NamedSharding(MESH, P()))
    try:
        expected = value.reshape(target)
    except ValueError:
        with raises(ValueError, str(shape)):
            jnp.reshape(array, target)
        return
    np.testing.assert_array_equal(np.asarray(jnp.reshape(array, target)), expected)


def test_reshape_and_shape_arguments():
    with raises(ValueError, "(-1, -1)"):
        jnp.reshape(X, (-1, -1))
    with raises(ValueError, "(7,)"):
        X.reshape(7)
    with raises(ValueError, "(-1, 3)"):
        jnp.zeros((-1, 3))
    with raises(ValueError, "(3, 8, 3)"):
        jnp.broadcast_to(X, (3, 8, 3))
    with raises(ValueError, "size is not 1"):
        jnp.squeeze(X, 0)
    with raises(ValueError, "3"):
        jnp.split(V, 3)


def test_non_integer_shapes_are_refused():
    with pytest.raises(TypeError):
        jnp.zeros((2.5,))


@pytest.mark.parametrize("call", [lambda: jnp.tile(V, -1), lambda: jnp.broadcast_to(V, (-1, 8)),
                                  lambda: jnp.reshape(V, (-2, -4))])
def test_negative_dimensions_are_refused(call):
    with raises(ValueError, "negative"):
        call()


@pytest.mark.parametrize("call", [
    lambda: jnp.sum(X, axis=2), lambda: jnp.mean(X, axis=-3), lambda: jnp.transpose(X, (0, 2)),
    lambda: jnp.cumsum(X, axis=5), lambda: jnp.argmax(V, axis=1), lambda: jnp.sort(V, axis=3),
    lambda: jnp.flip(V, axis=3), lambda: jnp.roll(V, 1, axis=3), lambda: jnp.moveaxis(X, 0, 5),
    lambda: jnp.concatenate([X, X], axis=2), lambda: jnp.swapaxes(X, 0, 5),
])
def test_axis_out_of_bounds(call):
    with raises(ValueError, "out of bounds"):
        call()


def test_repeated_axes():
    with raises(ValueError, "(0, 0)"):
        jnp.sum(X, axis=(0, 0))
    with raises(ValueError, "(0, 0)"):
        jnp.transpose(X, (0, 0))


def test_expand_dims_axis_out_of_bounds():
    with raises(ValueError, "5"):
        jnp.expand_dims(X, 5)


def test_string_axis_is_refused():
    with pytest.raises((TypeError, ValueError, NameError)):
        jnp.sum(X, axis="0")


@given(st.lists(st.integers(-12, 12), min_size=1, max_size=2))
@SETTINGS
def test_integer_indices_in_and_out_of_bounds(index):
    """Integer indices in bounds match NumPy; out of bounds they are clamped into range, as in JAX."""
    value = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    key = tuple(index)
    clamped = tuple(min(max(i + size if i < 0 else i, 0), size - 1) for i, size in zip(key, value.shape))
    np.testing.assert_array_equal(np.asarray(X[key]), value[clamped])


@given(st.integers(-3, 3), st.integers(-10, 10), st.integers(-10, 10), st.sampled_from([None, 1, 2, -1, -3]))
@SETTINGS
def test_slices_match_numpy(axis_pick, start, stop, step):
    value = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    key = (slice(start, stop, step),) if axis_pick >= 0 else (Ellipsis, slice(start, stop, step))
    np.testing.assert_array_equal(np.asarray(X[key]), value[key])


@pytest.mark.parametrize("key, kind, fragment", [
    ((0, 0, 0), IndexError, "too many indices"),
    (1.5, TypeError, "1.5"),
    ("a", TypeError, "'a'"),
    ((Ellipsis, Ellipsis), IndexError, "ellipsis"),
    (np.array([0.5]), IndexError, "float"),
    ([0, 1], TypeError, "non-tuple sequence"),
])
def test_bad_indices(key, kind, fragment):
    with raises(kind, fragment):
        X[key]


def test_array_indices_clamp_as_in_jax():
    """JAX clamps out-of-bounds gather indices in x[idx] (no IndexError); meshax does the same."""
    value = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    np.testing.assert_array_equal(np.asarray(X[np.array([0, 9, -20])]), value[[0, 7, 0]])


def test_boolean_mask_of_the_wrong_shape():
    with raises(IndexError, "boolean"):
        X[np.array([True, False])]


def test_take_out_of_bounds_fills_as_in_jax():
    result = np.asarray(jnp.take(V, jnp.array([0, 100])))
    np.testing.assert_array_equal(result, np.array([0.0, np.nan], np.float32))


def test_take_along_axis_rank_mismatch():
    with raises(ValueError, "dimensions"):
        jnp.take_along_axis(X, jnp.zeros((3,), jnp.int32), axis=0)


def test_take_along_axis_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"indices of shape \(5, 2\) do not broadcast against the array's \(4, 3\)"):
        jnp.take_along_axis(jnp.ones((4, 3)), jnp.zeros((5, 2), jnp.int32), axis=1)


def test_diagonal_of_a_vector():
    with raises(ValueError, "two dimensions"):
        jnp.diagonal(V)


@pytest.mark.parametrize("call, kind, fragment", [
    (lambda: jnp.concatenate([X, V]), ValueError, "(8,)"),
    (lambda: jnp.concatenate([X, jnp.ones((3, 3))]), ValueError, "(3, 3)"),
    (lambda: jnp.concatenate([]), ValueError, "at least one"),
    (lambda: jnp.stack([X, V]), ValueError, "(8,)"),
    (lambda: X + jnp.ones((3,)), ValueError, "(3,)"),
    (lambda: jnp.where(V > 1, X, V), ValueError, "broadcast"),
    (lambda: jnp.full((3,), jnp.ones(4)), ValueError, "(4,)"),
    (lambda: jnp.matmul(X, 2.0), ValueError, "scalar"),
    (lambda: jnp.pad(V, 1, mode="foo"), NotImplementedError, "foo"),  # as JAX's
    (lambda: float(X), TypeError, "0-dimensional"),
    (lambda: bool(X), ValueError, "ambiguous"),
    (lambda: len(jnp.zeros(())), TypeError, "0-d"),
])
def test_shape_mismatches(call, kind, fragment):
    with raises(kind, fragment):
        call()


@pytest.mark.parametrize("reduce", [jnp.max, jnp.min])
def test_max_of_empty_array(reduce):
    with raises(ValueError, "zero-size"):
        reduce(jnp.zeros((0,)))


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
@SETTINGS
def test_matmul_shapes(m, k1, k2, n):
    """Mismatched contraction sizes raise naming both sizes; matching ones equal NumPy."""
    a = np.arange(m * k1, dtype=np.float32).reshape(m, k1)
    b = np.arange(k2 * n, dtype=np.float32).reshape(k2, n)
    left = meshax.device_put(a, NamedSharding(MESH2, P(None, "b") if k1 % 2 == 0 else P()))
    if k1 != k2:
        with raises((TypeError, ValueError), f"size {k1}", f"size {k2}"):
            left @ b
        if 1 not in (k1, k2):  # size-1 labels broadcast in einsum (JAX, NumPy)
            with raises((TypeError, ValueError), f"size {k1}"):
                jnp.einsum("ij,jk->ik", left, b)
        return
    np.testing.assert_allclose(np.asarray(left @ b), a @ b, rtol=1e-5)


# ---- jit and sharding constraints -----------------------------------------------------------------------------------


def test_jit_bad_arguments():
    with raises(TypeError, "int"):
        meshax.jit(3)
    with raises(ValueError, "does not match"):
        meshax.jit(lambda a, b: a + b, in_shardings=(ROWS,))(V, V)
    with raises(ValueError, "rank 1"):
        meshax.jit(lambda a: a + 1, out_shardings=NamedSharding(MESH2, P("a", "b")))(V)


def test_jit_with_a_string_argument():
    with pytest.raises(TypeError) as info:
        meshax.jit(lambda a: a + 1)("abc")
    assert "hashable" not in str(info.value)


def test_with_sharding_constraint_bare_spec_under_mesh():
    with MESH:
        out = lax.with_sharding_constraint(V * 2, P("x"))
    assert out.sharding == ROWS


def test_with_sharding_constraint_tree_mismatch():
    with raises(ValueError, "match", "1 shardings", "2 arrays"):
        lax.with_sharding_constraint((V, V), [ROWS])
    with raises(ValueError, "match", "'q'", "'p'"):
        lax.with_sharding_constraint({"p": V}, {"q": ROWS})
    with raises(TypeError, "'x'", "str"):
        lax.with_sharding_constraint((V, V), ("x", ROWS))
    inner, outer = lax.with_sharding_constraint(((V, X), V), (NamedSharding(MESH, P()), ROWS))  # a prefix tree
    assert inner[0].sharding == inner[1].sharding == NamedSharding(MESH, P()) and outer.sharding == ROWS


def test_jit_bad_static_argnums_and_outputs():
    with raises(ValueError, "static_argnums=(2,)", "2 positional"):
        meshax.jit(lambda a, n: a * n, static_argnums=2)
    with raises(ValueError, "static_argnums=(-3,)", "2 positional"):
        meshax.jit(lambda a, n: a * n, static_argnums=-3)
    with raises(TypeError, "'name'", "str", "output[1]"):
        meshax.jit(lambda a: (a, "name"))(V)


def test_contraction_bad_out_sharding():
    other = NamedSharding(MESH2, P("a"))
    with raises(TypeError, "out_sharding", "'x'", "str"):
        jnp.matmul(X, X.T, out_sharding="x")
    with raises(TypeError, "out_sharding", "NamedSharding"):
        jnp.einsum("ij,kj->ik", X, X, out_sharding=ROWS.mesh)
    with raises(ValueError, "Mesh('a': 4, 'b': 2)", "Mesh('x': 8)", "device_put"):
        jnp.dot(X, X.T, out_sharding=other)  # the operands are committed to another mesh
    with raises(ValueError, "3 entries", "rank 2"):
        jnp.einsum("ij,kj->ik", X, X, out_sharding=P(None, None, "x"))
    with raises(ValueError, "3 entries", "rank 2"):
        jnp.tensordot(X, X.T, axes=1, out_sharding=P(None, None, "x"))


def test_contraction_bare_spec_needs_a_mesh():
    """Host operands and no mesh in use: a PartitionSpec naming axes has no mesh to be read on."""
    a = np.ones((4, 4), np.float32)
    calls = [lambda: jnp.matmul(a, a, out_sharding=P("x")), lambda: jnp.dot(jnp.asarray(a), a, out_sharding=P("x")),
             lambda: jnp.einsum("ij,jk->ik", a, a, out_sharding=P(None, "x")),
             lambda: meshax.jit(lambda u: jnp.matmul(u, u, out_sharding=P("x")))(a)]
    for call in calls:
        with raises(ValueError, "out_sharding", "mesh", "use_mesh", "NamedSharding") as info:
            call()
        assert "_single" not in str(info.value)
    assert jnp.matmul(a, a, out_sharding=P()).shape == (4, 4)
    with meshax.sharding.use_mesh(MESH):
        assert jnp.matmul(a, a, out_sharding=P("x")).sharding == ROWS


# ---- NaN and inf pass through unharmed -------------------------------------------------------------------------------


SHARDINGS = [
    NamedSharding(MESH, P("x")), NamedSharding(MESH, P(None, "x")), NamedSharding(MESH, P()),
    NamedSharding(MESH2, P("a", "b")), NamedSharding(MESH2, P("b", "a")), NamedSharding(MESH2, P(("a", "b"))),
    NamedSharding(meshax.make_mesh((3,), ("x",), devices=DEVICES[5:]), P("x")),
    SingleDeviceSharding(DEVICES[3]),
]
SPECIALS = [np.nan, np.inf, -np.inf, -0.0]


@st.composite
def special_arrays(draw):
    shape = (draw(st.integers(1, 9)), draw(st.integers(1, 10)))
    # no subnormals: meshax flushes them as XLA does where NumPy, the oracle here, keeps them (test_denormals.py)
    value = np.asarray(draw(st.lists(st.floats(-1e3, 1e3, width=32, allow_subnormal=False),
                                     min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])),
                       np.float32).reshape(shape)
    for _ in range(draw(st.integers(1, 6))):
        value[draw(st.integers(0, shape[0] - 1)), draw(st.integers(0, shape[1] - 1))] = draw(st.sampled_from(SPECIALS))
    return value


@given(special_arrays(), st.sampled_from(SHARDINGS), st.sampled_from(SHARDINGS))
@SETTINGS
def test_nan_and_inf_survive_reshards(value, source, target):
    placed = meshax.device_put(value, source)
    moved = meshax.device_put(placed, target)
    result = np.asarray(moved)
    np.testing.assert_array_equal(result, value)
    assert np.array_equal(np.signbit(result), np.signbit(value))   # -0.0 stays -0.0
    for shard in moved.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])


ELEMENTWISE = {
    "add": lambda m, a: m.add(a, 1.5), "multiply": lambda m, a: m.multiply(a, a),
    "negative": lambda m, a: m.negative(a),
    "exp": lambda m, a: m.exp(a), "tanh": lambda m, a: m.tanh(a), "abs": lambda m, a: m.abs(a),
    "maximum": lambda m, a: m.maximum(a, 0.0), "minimum": lambda m, a: m.minimum(a, 0.0),
    "where": lambda m, a: m.where(a > 0, a, -a), "isnan": lambda m, a: m.isnan(a), "isinf": lambda m, a: m.isinf(a),
    "equal": lambda m, a: m.equal(a, a), "sqrt": lambda m, a: m.sqrt(a), "clip": lambda m, a: m.clip(a, -1.0, 1.0),
    "divide": lambda m, a: m.divide(1.0, a), "sign": lambda m, a: m.sign(a),
}


@given(special_arrays(), st.sampled_from(SHARDINGS), st.sampled_from(sorted(ELEMENTWISE)))
@SETTINGS
def test_nan_and_inf_through_elementwise_ops(value, sharding, name):
    with np.errstate(all="ignore"):
        expected = ELEMENTWISE[name](np, value)
        result = np.asarray(ELEMENTWISE[name](jnp, meshax.device_put(value, sharding)))
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_allclose(result, expected, rtol=1e-6, equal_nan=True)   # inf must match inf exactly


@given(special_arrays(), st.sampled_from(SHARDINGS[:6]), st.sampled_from(["sum", "max", "min", "mean", "prod"]),
       st.sampled_from([None, 0, 1]))
@SETTINGS
def test_nan_and_inf_through_reductions(value, sharding, name, axis):
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(value, axis=axis)
        result = np.asarray(getattr(jnp, name)(meshax.device_put(value, sharding), axis=axis))
    np.testing.assert_allclose(result, expected, rtol=1e-4, equal_nan=True)


@given(st.lists(st.sampled_from([0.0, 1.0, -2.0, np.nan, np.inf, -np.inf]), min_size=8, max_size=8))
@SETTINGS
def test_nan_and_inf_through_collectives(values):
    value = np.asarray(values, np.float32)

    def body(block):
        return (lax.psum(block, "x"), lax.pmax(block, "x"), lax.pmin(block, "x"),
                lax.all_gather(block, "x", tiled=True), lax.ppermute(block, "x", [(i, (i + 1) % 8) for i in range(8)]))

    with np.errstate(all="ignore"):   # inf + -inf
        total, high, low, gathered, shifted = meshax.shard_map(
            body, mesh=MESH, in_specs=P("x"), out_specs=(P(), P(), P(), P(), P("x")),
            check_vma=False)(rows(value))  # JAX 0.10 types all_gather results as varying
        np.testing.assert_array_equal(np.asarray(total), [np.sum(value)])
        np.testing.assert_array_equal(np.asarray(high), [np.max(value)])
        np.testing.assert_array_equal(np.asarray(low), [np.min(value)])
    np.testing.assert_array_equal(np.asarray(gathered), value)
    np.testing.assert_array_equal(np.asarray(shifted), np.roll(value, 1))


def test_nan_through_reductions_across_processes():
    from multiprocess import run_launcher

    result = run_launcher("tests/programs/fault_nan_reduce.py", 4, 2, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NAN-OK" in result.stdout, result.stdout
