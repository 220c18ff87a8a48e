"""Smaller things JAX's pages use, against JAX: jax_debug_nans, out-of-range indexing, shard_map without
outputs, io_callback and ShapeDtypeStruct.like."""
import jax
import jax.experimental
import jax.numpy as jjnp
import re

import numpy as np
import pytest

import meshax
import meshax.experimental
import meshax.numpy as mnp
from meshax.sharding import NamedSharding, PartitionSpec as P


@pytest.fixture
def debug_nans():
    def set_both(value):
        meshax.config.update("jax_debug_nans", value)
        jax.config.update("jax_debug_nans", value)

    set_both(True)
    yield
    set_both(False)


NAN_CASES = {
    "log": lambda lib, np_: np_.log(-1.0),
    "jit_sqrt": lambda lib, np_: lib.jit(lambda v: np_.sqrt(v) * 2)(-4.0),
    "div": lambda lib, np_: np_.array([0.0]) / 0.0,
    "grad_sqrt": lambda lib, np_: lib.grad(lambda v: np_.sqrt(v))(-1.0),
    "vmap_log": lambda lib, np_: lib.vmap(np_.log)(np_.array([1.0, -1.0])),
}


@pytest.mark.parametrize("case", sorted(NAN_CASES))
def test_debug_nans_raises_naming_the_operation(debug_nans, case):
    with pytest.raises(FloatingPointError) as caught:
        NAN_CASES[case](meshax, mnp)
    ours = str(caught.value)
    assert re.fullmatch(r"invalid value \(nan\) encountered in \w+", ours), ours
    # JAX words its message by what it compiled or cached before in this process (an earlier test's log(-1.0)
    # can make it skip the check, a primitive compiled earlier reports "('jit(log)', 'nan'). Because ..."): its
    # message is the reference only in its fresh-process form, which must then equal ours.
    try:
        NAN_CASES[case](jax, jjnp)
    except FloatingPointError as error:
        if str(error).startswith("invalid value"):
            assert ours == str(error)


def test_debug_nans_lets_finite_values_pass_and_turns_off(debug_nans):
    np.testing.assert_allclose(np.asarray(mnp.log(mnp.array([1.0, 2.0]))), np.log([1.0, 2.0]), rtol=1e-6)
    meshax.config.update("jax_debug_nans", False)
    assert np.isnan(float(mnp.log(-1.0)))
    with meshax.debug_nans(True):
        with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in log"):
            mnp.log(-1.0)
    assert np.isnan(float(mnp.log(-1.0)))
    with meshax.debug_infs(True):
        with pytest.raises(FloatingPointError, match="invalid value \\(inf\\) encountered in div"):
            mnp.array(1.0) / 0.0


def test_debug_nans_inside_shard_map(debug_nans):
    mesh = meshax.make_mesh((8,), ("i",))
    x = meshax.device_put(mnp.linspace(-1.0, 1.0, 8), NamedSharding(mesh, P("i")))
    with pytest.raises(FloatingPointError, match="nan"):
        meshax.jit(meshax.shard_map(mnp.log, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(x)


INDEXING = {
    "past_end": lambda np_, x: x[11],
    "before_start": lambda np_, x: x[-11],
    "index_array": lambda np_, x: x[np_.array([0, 12, -20])],
    "get": lambda np_, x: x.at[11].get(),
    "get_fill": lambda np_, x: x.at[11].get(mode="fill", fill_value=-1.0),
    "set_dropped": lambda np_, x: x.at[11].set(99.0),
    "add_dropped": lambda np_, x: x.at[np_.array([1, 15])].add(5.0),
    "set_negative": lambda np_, x: x.at[np_.array([-1, -12])].set(3.0),
    "take": lambda np_, x: np_.take(x, np_.array([12, 3])),
    "slice": lambda np_, x: x[8:15],
    "two_dims": lambda np_, x: x.reshape(2, 5)[3, -9],
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(INDEXING))
def test_out_of_range_indices_as_jax(case, jitted):
    def run(lib, np_):
        f = (lambda x: INDEXING[case](np_, x))
        return np.asarray((lib.jit(f) if jitted else f)(np_.arange(10.0)))

    ours, theirs = run(meshax, mnp), run(jax, jjnp)
    np.testing.assert_array_equal(ours, theirs)


def test_out_of_range_indices_inside_shard_map():
    mesh = meshax.make_mesh((8,), ("i",))
    mapped = meshax.shard_map(lambda b: b[5] * mnp.ones(2), mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    np.testing.assert_array_equal(np.asarray(mapped(mnp.arange(16.0))), np.repeat(np.arange(1.0, 16.0, 2), 2))


def test_shard_map_of_a_function_returning_nothing():
    seen = []
    mesh = meshax.make_mesh((8,), ("i",))
    for wrap in (lambda f: f, meshax.jit):
        mapped = wrap(meshax.shard_map(lambda b: meshax.debug.callback(lambda v: seen.append(np.asarray(v).shape), b),
                                       mesh=mesh, in_specs=P("i"), out_specs=None))
        assert mapped(mnp.ones(8)) is None
    assert seen == [(1,)] * 16
    with pytest.raises(TypeError, match="out_specs=None"):
        meshax.shard_map(lambda b: b, mesh=mesh, in_specs=P("i"), out_specs=None)(mnp.ones(8))


def test_io_callback_runs_each_call_in_order():
    def run(lib, np_):
        seen = []

        def host(x):
            seen.append(np.asarray(x).tolist())
            return np.asarray(x) * 2

        f = lambda x: lib.experimental.io_callback(host, lib.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)
        outs = [f(np_.ones(2)), lib.jit(f)(np_.arange(2.0)), lib.jit(f)(np_.arange(2.0) + 1)]
        return [np.asarray(o).tolist() for o in outs], seen

    assert run(meshax, mnp) == run(jax, jjnp)


def test_shape_dtype_struct_like():
    for make in (lambda np_: np_.ones(3), lambda np_: np.ones(3), lambda np_: 1.0, lambda np_: np_.arange(4),
                 lambda np_: np.int64(3)):
        assert repr(meshax.ShapeDtypeStruct.like(make(mnp))) == repr(jax.ShapeDtypeStruct.like(make(jjnp)))
    struct = meshax.ShapeDtypeStruct((2,), np.int32)
    assert meshax.ShapeDtypeStruct.like(struct) == struct
    mesh = meshax.make_mesh((8,), ("i",))
    x = meshax.device_put(mnp.ones(8), NamedSharding(mesh, P("i")))
    assert meshax.ShapeDtypeStruct.like(x).sharding == x.sharding


def test_traced_boolean_masks_raise_jaxs_error():
    for lib, np_ in ((meshax, mnp), (jax, jjnp)):
        x = np_.arange(10.0)
        with pytest.raises(lib.errors.NonConcreteBooleanIndexError, match="boolean indices must be concrete"):
            lib.jit(lambda v: v[v > 5])(x)
        with pytest.raises(IndexError):
            lib.jit(lambda v: v.at[v > 5].set(0.0))(x)
    np.testing.assert_array_equal(np.asarray(mnp.arange(10.0)[mnp.arange(10.0) > 7]), [8.0, 9.0])


def test_debug_nans_names_the_operation_inside_fused_jitted_programs(debug_nans):
    """Jitted programs fuse elementwise chains; with the check on they run unfused, as JAX's rerun does."""
    x = mnp.array([1.0, 2.0, -3.0])
    with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in log"):
        meshax.jit(lambda v: mnp.exp(mnp.log(v * 2.0) + 1.0) * 3.0)(x)
    meshax.config.update("jax_debug_nans", False)
    assert np.isnan(np.asarray(meshax.jit(lambda v: mnp.exp(mnp.log(v * 2.0) + 1.0) * 3.0)(x))[2])
