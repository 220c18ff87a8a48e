"""jax.lax's `*_p` names bound with JAX 0.12's operands and parameters give JAX's answer in meshax (eagerly, under
jit, and inside shard_map for collectives), or raise JAX's exception class; every name of jax.lax ending in `_p` is
either such a case here or a meshax primitive whose equations jaxprs hold (checked by identity)."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from meshax._src.compat.jax_names import JAX_NAMES
from meshax._src.core.core import Primitive
from meshax._src.lax.jax_primitives_base import JaxParamsPrimitive
from differential import assert_matches, run_jax, run_meshax

RNG = np.random.default_rng(0)
F = RNG.standard_normal((3, 4)).astype(np.float32)
F3 = RNG.standard_normal((2, 5, 6)).astype(np.float32)
I = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
U = np.array([1, 2**31 + 8, 7, 2**32 - 1], np.uint32)
SHIFT = np.array([1, 3, 0, 31], np.uint32)
WIN = dict(window_dimensions=(2, 2), window_strides=(1, 2), padding=((0, 1), (1, 0)), base_dilation=(1, 1),
           window_dilation=(1, 1))
SDN = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
IDX = np.array([[2], [0]], np.int32)
TIES = np.ones((3, 4), np.float32)
TIES[1, 1] = TIES[2, 3] = 2
HALVES = np.array([0.5, 1.5, -2.5, 2.2], np.float32)


def _jax_params(fn, *args):
    """The parameters of the one equation of JAX's jaxpr of `fn(*args)` that is not a broadcast or slice."""
    eqns = [e for e in jax.make_jaxpr(fn)(*args).jaxpr.eqns if e.primitive.name not in ("broadcast_in_dim", "slice")]
    return dict(eqns[-1].params)


def _scatter(name):
    """A scatter-op case: JAX's parameters (its update_jaxpr) traced from jax.lax; meshax ignores update_jaxpr."""
    def case(L, x):
        dn = L.lax.ScatterDimensionNumbers(**SDN)
        if L is jax:
            params = _jax_params(lambda a: getattr(jax.lax, name[:-2])(a, IDX, a[:2] * 2, dn,
                                                                     mode=jax.lax.GatherScatterMode.FILL_OR_DROP), x)
        else:
            params = dict(update_jaxpr=None, update_consts=(), dimension_numbers=dn, indices_are_sorted=False,
                          unique_indices=False, mode=L.lax.GatherScatterMode.FILL_OR_DROP)
        return getattr(L.lax, name).bind(x, IDX, x[:2] * 2, **params)
    return case


def _reduce(dims):
    """A reduce_p case with JAX's closed jaxpr of the computation (meshax uses `computation`)."""
    def case(L, x):
        jaxpr = L.make_jaxpr(L.lax.add)(np.float32(0), np.float32(0))
        return L.lax.reduce_p.bind(x, np.float32(0), computation=L.lax.add, jaxpr=jaxpr, dimensions=dims)
    return case


def _conv(L, x):
    dn = L.lax.ConvDimensionNumbers(lhs_spec=(0, 1, 2), rhs_spec=(0, 1, 2), out_spec=(0, 1, 2))
    return L.lax.conv_general_dilated_p.bind(
        x[:, :2, :], x[:1, :2, :3], window_strides=(2,), padding=((1, 0),), lhs_dilation=(1,), rhs_dilation=(2,),
        dimension_numbers=dn, feature_group_count=1, batch_group_count=1, precision=None,
        preferred_element_type=None, out_sharding=None)


# name -> [(case(L, *args), args)]; each case binds L.lax.<name> with JAX's parameters
CASES = {
    "clamp_p": [(lambda L, x: L.lax.clamp_p.bind(np.float32(-0.5), x, np.float32(0.5)), (F,)),
                (lambda L, x: L.lax.clamp_p.bind(np.int32(-3), x, np.int32(9)), (I,))],
    "complex_p": [(lambda L, x: L.lax.complex_p.bind(x, x * 2), (F,))],
    "conv_general_dilated_p": [(_conv, (F3,))],
    "copy_p": [(lambda L, x: L.lax.copy_p.bind(x), (F,)), (lambda L, x: L.lax.copy_p.bind(x), (I,))],
    "cumlogsumexp_p": [(lambda L, x: L.lax.cumlogsumexp_p.bind(x, axis=a, reverse=r), (F,))
                       for a in (0, 1) for r in (False, True)],
    "dynamic_slice_p": [(lambda L, x: L.lax.dynamic_slice_p.bind(x, np.int32(s), np.int32(2), slice_sizes=(2, 2)),
                         (F,)) for s in (-1, 0, 1, 5)],
    "dynamic_update_slice_p": [(lambda L, x: L.lax.dynamic_update_slice_p.bind(x, x[:2, :2], np.int32(s),
                                                                               np.int32(1)), (x,))
                               for s in (-2, 0, 2) for x in (F, I)],
    "eq_to_p": [(lambda L, x: L.lax.eq_to_p.bind(x, x[::-1]), (I,))],
    "le_to_p": [(lambda L, x: L.lax.le_to_p.bind(x, x[::-1]), (I,))],
    "lt_to_p": [(lambda L, x: L.lax.lt_to_p.bind(x, x[::-1]), (F,))],
    "optimization_barrier_p": [(lambda L, x: L.lax.optimization_barrier_p.bind(x, x * 2), (F,))],
    "pad_p": [(lambda L, x: L.lax.pad_p.bind(x, np.float32(9), padding_config=c), (F,))
              for c in (((1, 2, 0), (0, 0, 1)), ((-1, 0, 1), (2, -1, 0)))],
    "reduce_p": [(_reduce(d), (F,)) for d in ((0,), (0, 1))],
    "reduce_window_sum_p": [(lambda L, x: L.lax.reduce_window_sum_p.bind(x, **WIN), (x,)) for x in (F, I)],
    "reduce_window_max_p": [(lambda L, x: L.lax.reduce_window_max_p.bind(x, **WIN), (x,)) for x in (F, I)],
    "reduce_window_min_p": [(lambda L, x: L.lax.reduce_window_min_p.bind(x, **WIN), (x,)) for x in (F, I)],
    "reduce_xor_p": [(lambda L, x: L.lax.reduce_xor_p.bind(x, axes=a), (I,)) for a in ((0,), (1,), (0, 1))],
    "rsqrt_p": [(lambda L, x: L.lax.rsqrt_p.bind(x * x + 1), (F,)),
                (lambda L, x: L.lax.rsqrt_p.bind(x * x + 1, accuracy=None), (F,))],
    "select_n_p": [(lambda L, x: L.lax.select_n_p.bind(x > 0, x, -x), (F,)),
                   (lambda L, x: L.lax.select_n_p.bind((x % 3).astype(np.int32), x, -x, x * 2), (I,))],
    "shift_right_logical_p": [(lambda L, x, y: L.lax.shift_right_logical_p.bind(x, y), (U, SHIFT)),
                              (lambda L, x: L.lax.shift_right_logical_p.bind(x, np.int32(2)), (I,))],
    "split_p": [(lambda L, x: L.lax.split_p.bind(x, sizes=(1, 3), axis=1), (F,)),
                (lambda L, x: L.lax.split_p.bind(x, sizes=(2, 0, 1), axis=0), (I,))],
    "squeeze_p": [(lambda L, x: L.lax.squeeze_p.bind(x[None, :, None], dimensions=(0, 2)), (F,))],
    "stack_p": [(lambda L, x: L.lax.stack_p.bind(x, x + 1, axis=a), (F,)) for a in (0, 1, 2)],
    "stage_p": [(lambda L, x: L.lax.stage_p.bind(x), (F,))],
    "tile_p": [(lambda L, x: L.lax.tile_p.bind(x, reps=(2, 1)), (F,)),
               (lambda L, x: L.lax.tile_p.bind(x, reps=(1, 3)), (I,))],
    "top_k_p": [(lambda L, x: L.lax.top_k_p.bind(x, k=2, axis=a, is_stable=True), (F,)) for a in (0, 1)],
    "approx_top_k_p": [(lambda L, x: L.lax.approx_top_k_p.bind(
        x, k=2, reduction_dimension=-1, recall_target=0.95, is_max_k=m, reduction_input_size_override=-1,
        aggregate_to_topk=True), (F,)) for m in (True, False)],
    "unstack_p": [(lambda L, x: L.lax.unstack_p.bind(x, axis=a), (F,)) for a in (0, 1)],
    "select_and_gather_add_p": [(lambda L, x: L.lax.select_and_gather_add_p.bind(
        x * 3, x, select_prim=p(L), **WIN), (x,)) for p in (lambda L: L.lax.ge_p, lambda L: L.lax.le_p)
        for x in (F, TIES)],
    "select_and_scatter_add_p": [(lambda L, x: L.lax.select_and_scatter_add_p.bind(
        np.arange(6, dtype=np.float32).reshape(3, 2), x, select_prim=p(L), window_dimensions=(2, 2),
        window_strides=(1, 2), padding=((0, 1), (0, 0))), (x,)) for p in (lambda L: L.lax.ge_p, lambda L: L.lax.le_p)
        for x in (F, TIES)],
    "scatter_add_p": [(_scatter("scatter_add_p"), (F,)), (_scatter("scatter_add_p"), (I,))],
    "scatter_sub_p": [(_scatter("scatter_sub_p"), (F,))],
    "scatter_mul_p": [(_scatter("scatter_mul_p"), (F,))],
    "scatter_min_p": [(_scatter("scatter_min_p"), (I,))],
    "scatter_max_p": [(_scatter("scatter_max_p"), (F,))],
    "round_p": [(lambda L, x: L.lax.round_p.bind(x, rounding_method=getattr(L.lax.RoundingMethod, m)), (HALVES,))
                for m in ("AWAY_FROM_ZERO", "TO_NEAREST_EVEN")],
    "conj_p": [(lambda L, x: L.lax.conj_p.bind(x, input_dtype=np.dtype(np.float32)), (F,)),
               (lambda L, x: L.lax.conj_p.bind(x), (F.astype(np.complex64) * 1j,))],
    "shift_right_arithmetic_p": [(lambda L, x, y: L.lax.shift_right_arithmetic_p.bind(x, y), (U, SHIFT)),
                                 (lambda L, x: L.lax.shift_right_arithmetic_p.bind(x, np.int32(2)), (I,))],
    "rem_p": [(lambda L, x, y: L.lax.rem_p.bind(x, y), (F * 3, F[::-1] + 0.1)),
              (lambda L, x, y: L.lax.rem_p.bind(x, y), (I[0], np.array([3, -4, 7, -2], np.int32)))],
    "fft_p": [(lambda L, x: L.lax.fft_p.bind(x.astype(np.complex64), fft_type=t(L), fft_lengths=(4,)), (F,))
              for t in (lambda L: L.lax.FftType.FFT, lambda L: L.lax.FftType.IFFT)]
             + [(lambda L, x: L.lax.fft_p.bind(x, fft_type=L.lax.FftType.RFFT, fft_lengths=(4,)), (F,))],
}


def _reduce_window_generic(L, x):
    """reduce_window_p with a product computation (JAX's open jaxpr; meshax's own jaxpr of it)."""
    comp = lambda a, b: a * b  # noqa: E731
    if L is jax:
        params = _jax_params(lambda a: jax.lax.reduce_window(a, np.float32(1), comp, (2, 2), (1, 2),
                                                             ((0, 1), (1, 0))), x)
    else:
        params = dict(jaxpr=meshax.make_jaxpr(comp)(np.float32(0), np.float32(0)), consts=(), **WIN)
    return L.lax.reduce_window_p.bind(x, np.float32(1), **params)


def _select_and_scatter(select):
    """select_and_scatter_p with a ge/le select and an add scatter (JAX's jaxprs from its internal builder)."""
    def case(L, x):
        src, init = np.arange(6, dtype=np.float32).reshape(3, 2), np.float32(0.5)
        win = dict(window_dimensions=(2, 2), window_strides=(1, 2), padding=((0, 1), (0, 0)))
        if L is jax:
            from jax._src.lax import windowed_reductions as W
            params = _jax_params(lambda a: W._select_and_scatter(a, getattr(jax.lax, select), win["window_dimensions"],
                                                                win["window_strides"], win["padding"], src, init,
                                                                jax.lax.add), x)
        else:
            zero = np.float32(0)
            params = dict(select_jaxpr=meshax.make_jaxpr(getattr(meshax.lax, select))(zero, zero), select_consts=(),
                          scatter_jaxpr=meshax.make_jaxpr(meshax.lax.add)(zero, zero), scatter_consts=(), **win)
        return L.lax.select_and_scatter_p.bind(x, src, init, **params)
    return case


def _device_put(to_device):
    def case(L, x):
        device = L.devices()[3] if to_device else None
        if L is jax:
            params = _jax_params(lambda a: jax.device_put(a, device), x)
        else:
            params = dict(devices=(device,), srcs=(None,), copy_semantics=(None,))
        return L.lax.device_put_p.bind(x, **params)
    return case


CASES.update({
    "reduce_window_p": [(_reduce_window_generic, (F,))],
    "select_and_scatter_p": [(_select_and_scatter(s), (F,)) for s in ("ge", "le")],
    "device_put_p": [(_device_put(d), (F,)) for d in (False, True)],
})
FLAT = [(name, i, case, args) for name, cases in CASES.items() for i, (case, args) in enumerate(cases)]


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name,i,case,args", FLAT, ids=[f"{n}-{i}" for n, i, _, _ in FLAT])
def test_bind_matches_jax(name, i, case, args, mode):
    assert_matches(run_meshax(case, args, mode), run_jax(case, args), rtol=2e-5, atol=2e-6)


COLLECTIVES = {
    "psum_p": lambda L, x: L.lax.psum_p.bind(x, axes=("x",), axis_index_groups=None),
    "pmax_p": lambda L, x: L.lax.pmax_p.bind(x * L.lax.axis_index("x"), axes=("x",), axis_index_groups=None),
    "pmin_p": lambda L, x: L.lax.pmin_p.bind(x * L.lax.axis_index("x"), axes=("x",), axis_index_groups=None),
    "all_to_all_p": lambda L, x: L.lax.all_to_all_p.bind(
        L.numpy.tile(x[:1, :1] + L.lax.axis_index("x"), (8, 2)), split_axis=0, concat_axis=1, axis_name="x",
        axis_index_groups=None, tiled=True),
    "all_to_all_p-untiled": lambda L, x: L.lax.all_to_all_p.bind(
        L.numpy.tile(x[:1, :1] * L.lax.axis_index("x"), (16, 1)), split_axis=0, concat_axis=0, axis_name="x",
        axis_index_groups=None, tiled=False),
}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collective_bind_in_shard_map(name):
    case = COLLECTIVES[name]
    ours = run_meshax(lambda L, x: L.lax.psum(case(L, x), "x"), (F,), "shard_map")
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    theirs = jax.shard_map(lambda x: jax.lax.psum(case(jax, x), "x"), mesh=mesh, in_specs=jax.P(),
                           out_specs=jax.P(), check_vma=False)(jax.numpy.asarray(F))
    assert_matches(ours, theirs, rtol=2e-5, atol=2e-6)


def test_grad_and_vmap_through_bind():
    def f(L, x):
        pooled = L.lax.reduce_window_max_p.bind(x, **WIN)
        return L.grad(lambda y: (L.lax.pad_p.bind(y, np.float32(0), padding_config=((1, 0, 1), (0, 2, 0)))
                                 ** 2).sum() + L.lax.rsqrt_p.bind(y * y + 1).sum())(x), pooled
    assert_matches(run_meshax(f, (F,), "eager"), run_jax(f, (F,)), rtol=2e-5)

    def g(L, x):
        return L.vmap(lambda r: L.lax.top_k_p.bind(r, k=2, axis=0, is_stable=True)[0] +
                      L.lax.cumlogsumexp_p.bind(r, axis=0, reverse=False)[:2])(x)
    assert_matches(run_meshax(g, (F,), "jit"), run_jax(g, (F,)), rtol=2e-5)


@pytest.mark.parametrize("name,params", [("pad_p", {}), ("squeeze_p", {"dimensions": (0,), "foo": 1}),
                                         ("top_k_p", {"k": 1}), ("cumlogsumexp_p", {"axis": 0})])
def test_wrong_params_raise_as_jax(name, params):
    x = np.ones((1, 3), np.float32)
    with pytest.raises(TypeError):
        getattr(jax.lax, name).bind(x, np.float32(0), **params) if name == "pad_p" else \
            getattr(jax.lax, name).bind(x, **params)
    with pytest.raises(TypeError):
        getattr(meshax.lax, name).bind(x, np.float32(0), **params) if name == "pad_p" else \
            getattr(meshax.lax, name).bind(x, **params)


def test_every_jax_primitive_name_is_a_primitive_with_jax_flags():
    names = sorted(n for n in JAX_NAMES["jax.lax"] if n.endswith("_p"))
    assert len(names) > 150
    for name in names:
        ours, theirs = getattr(meshax.lax, name), getattr(jax.lax, name)
        assert isinstance(ours, Primitive), name
        if isinstance(ours, JaxParamsPrimitive):
            assert (ours.name, ours.multiple_results) == (theirs.name, theirs.multiple_results), name
            assert name in CASES or name in COLLECTIVES or name in UNTESTED_HERE, name


UNTESTED_HERE = {"after_all_p", "create_token_p", "ragged_all_to_all_p"}  # their own tests below


def test_token_binds():
    token = meshax.lax.create_token_p.bind()
    assert type(token) is type(meshax.lax.create_token())
    assert type(meshax.lax.after_all_p.bind(token, token)) is type(token)
    assert type(meshax.jit(lambda: meshax.lax.after_all_p.bind())()) is type(token)
    assert type(jax.lax.after_all_p.bind()) is type(jax.lax.create_token())


def test_ragged_all_to_all_bind_in_shard_map():
    def case(L, x):
        me = L.lax.axis_index("x")
        ones = L.numpy.ones(8, np.int32)
        out = L.lax.ragged_all_to_all_p.bind(x[0] + 10 * me, L.numpy.zeros(8, np.float32),
                                             L.numpy.arange(8, dtype=np.int32), ones, ones * me, ones,
                                             axis_name=("x",), axis_index_groups=None)
        return out[None]
    x = np.tile(np.arange(8, dtype=np.float32), (8, 1))
    # XLA:CPU cannot run ragged-all-to-all: device j receives element j of each device i's (x[i] + 10 i) at i
    theirs = np.arange(8, dtype=np.float32)[:, None] + 10 * np.arange(8, dtype=np.float32)[None, :]
    ours_mesh = meshax.sharding.Mesh(np.array(meshax.devices()), ("x",))
    ours = meshax.shard_map(lambda a: case(meshax, a), mesh=ours_mesh, in_specs=meshax.sharding.PartitionSpec("x"),
                            out_specs=meshax.sharding.PartitionSpec("x"))(meshax.numpy.asarray(x))
    np.testing.assert_array_equal(np.asarray(ours), theirs)
    assert ours.dtype == np.float32
