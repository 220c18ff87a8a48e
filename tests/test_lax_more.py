"""The rest of jax.lax that model code reaches for, against JAX: reduce (any computation, pytrees), top_k, multi-
operand sort, cumlogsumexp, reduce_precision, bit counts, special functions, convolutions and reduce_window; values
eagerly and under jit, gradients and vmap where JAX has them. Then the smaller top-level names (pure_callback,
ensure_compile_time_eval, linear_transpose, closure_convert, live_arrays...)."""
import jax
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from oracle import check_against_jax

_rng = np.random.default_rng(0)
A = _rng.normal(size=(3, 4, 5)).astype(np.float32)
POS = _rng.uniform(0.5, 4.0, size=(3, 4)).astype(np.float32)
UNIT = _rng.uniform(0.05, 0.95, size=(3, 4)).astype(np.float32)
IMG = _rng.normal(size=(2, 7, 6, 4)).astype(np.float32)  # NHWC
KER = _rng.normal(size=(3, 3, 4, 6)).astype(np.float32)  # HWIO
KER_GROUPED = _rng.normal(size=(3, 2, 2, 6)).astype(np.float32)  # HWIO with 2 feature groups
SIG = _rng.normal(size=(2, 3, 11)).astype(np.float32)  # NCW
KER_1D = _rng.normal(size=(5, 3, 4)).astype(np.float32)  # OIW
INTS = np.array([[0, 1, 7, -1, 255], [1 << 20, 3, -(1 << 31), 12, 1023]], np.int32)
TIES = np.array([[3., 1., 3., 5., 1.], [2., 2., 2., 0., 9.]], np.float32)
NHWC = ("NHWC", "HWIO", "NHWC")


def _argmax_pair(np_):
    """A variadic reduce computation: (value, index) of the larger value, the lower index on ties."""

    def combine(a, b):
        (va, ia), (vb, ib) = a, b
        take_a = (va > vb) | ((va == vb) & (ia < ib))
        return np_.where(take_a, va, vb), np_.where(take_a, ia, ib)

    return combine


CASES = {
    "reduce_add": lambda L, np_: L.lax.reduce(A, 0.0, L.lax.add, (0, 2)),
    "reduce_max_lambda": lambda L, np_: L.lax.reduce(A, -np.inf, lambda a, b: np_.maximum(a, b), (1,)),
    "reduce_generic_init": lambda L, np_: L.lax.reduce(A, np.float32(1.5), lambda a, b: a + b, (0, 1, 2)),
    "reduce_pytree": lambda L, np_: L.lax.reduce(
        (A, np.broadcast_to(np.arange(5, dtype=np.int32), A.shape)), (np.float32(-np.inf), np.int32(0)),
        _argmax_pair(np_), (2,)),
    "reduce_xor": lambda L, np_: L.lax.reduce_xor(INTS, (1,)),
    "top_k": lambda L, np_: L.lax.top_k(TIES, 3),
    "top_k_3d": lambda L, np_: L.lax.top_k(A, 2),
    "approx_max_k": lambda L, np_: L.lax.approx_max_k(TIES, 2),
    "approx_min_k": lambda L, np_: L.lax.approx_min_k(TIES, 2),
    "sort_one": lambda L, np_: L.lax.sort(A, dimension=1),
    "sort_two_operands": lambda L, np_: L.lax.sort((TIES, A[:2, 0]), dimension=-1),
    "sort_two_keys": lambda L, np_: L.lax.sort((np.array([2, 1, 2, 1, 1]), TIES[0], A[0, 0]), num_keys=2),
    "sort_key_val": lambda L, np_: L.lax.sort_key_val(TIES, A[:2, 1]),
    "cumlogsumexp": lambda L, np_: L.lax.cumlogsumexp(A, axis=2),
    "cumlogsumexp_reverse": lambda L, np_: L.lax.cumlogsumexp(A * 30, axis=0, reverse=True),
    "reduce_precision_bf16": lambda L, np_: L.lax.reduce_precision(A * 1000, 8, 7),
    "reduce_precision_fp16": lambda L, np_: L.lax.reduce_precision(
        np.array([1e-9, 7e4, 1e6, -3.3, np.nan, np.inf, 65519.], np.float32), 5, 10),
    "population_count": lambda L, np_: L.lax.population_count(INTS),
    "erfc": lambda L, np_: L.lax.erfc(A),
    "erf_inv": lambda L, np_: L.lax.erf_inv(UNIT * 2 - 1),
    "lgamma": lambda L, np_: L.lax.lgamma(POS),
    "digamma": lambda L, np_: L.lax.digamma(POS),
    "polygamma": lambda L, np_: L.lax.polygamma(np.full((3, 4), 2.0, np.float32), POS),
    "igamma": lambda L, np_: (L.lax.igamma(POS, UNIT * 3), L.lax.igammac(POS, UNIT * 3)),
    "zeta": lambda L, np_: L.lax.zeta(POS + 1, UNIT + 1),
    "betainc": lambda L, np_: L.lax.betainc(POS, POS[::-1], UNIT),
    "bessel": lambda L, np_: (L.lax.bessel_i0e(A), L.lax.bessel_i1e(A)),
    "conv_nhwc_same_strided": lambda L, np_: L.lax.conv_general_dilated(IMG, KER, (2, 1), "SAME",
                                                                         dimension_numbers=NHWC),
    "conv_dilated_padded": lambda L, np_: L.lax.conv_general_dilated(
        IMG, KER, (1, 2), ((2, 1), (0, 3)), lhs_dilation=(2, 1), rhs_dilation=(1, 2), dimension_numbers=NHWC),
    "conv_groups": lambda L, np_: L.lax.conv_general_dilated(IMG, KER_GROUPED, (1, 1), "VALID",
                                                             dimension_numbers=NHWC, feature_group_count=2),
    "conv_1d_default_layout": lambda L, np_: L.lax.conv(SIG, KER_1D, (2,), "SAME"),
    "conv_with_general_padding": lambda L, np_: L.lax.conv_with_general_padding(
        SIG, KER_1D, (1,), ((1, 2),), (2,), (2,)),
    "conv_transpose_same": lambda L, np_: L.lax.conv_transpose(IMG, KER, (2, 2), "SAME", dimension_numbers=NHWC),
    "conv_transpose_valid_kernel": lambda L, np_: L.lax.conv_transpose(
        IMG, np.swapaxes(KER, 2, 3), (2, 1), "VALID", dimension_numbers=NHWC, transpose_kernel=True),
    "conv_patches": lambda L, np_: L.lax.conv_general_dilated_patches(np.moveaxis(IMG, 3, 1), (2, 3), (1, 2),
                                                                      "VALID"),
    "max_pool": lambda L, np_: L.lax.reduce_window(IMG, -np.inf, L.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    "sum_pool_dilated": lambda L, np_: L.lax.reduce_window(IMG, 0.0, L.lax.add, (1, 2, 2, 1), (1, 1, 2, 1),
                                                           ((0, 0), (1, 0), (0, 1), (0, 0)), (1, 2, 1, 1),
                                                           (1, 1, 2, 1)),
    "tile_split_complex": lambda L, np_: (L.lax.tile(TIES, (2, 1)), L.lax.split(A, (1, 3), axis=1),
                                          L.lax.complex(TIES, TIES * 2)),
    "batch_matmul": lambda L, np_: L.lax.batch_matmul(A, np.swapaxes(A, 1, 2)),
    "mulhi": lambda L, np_: (L.lax.mulhi(INTS, INTS[::-1] * 7 + 1),
                             L.lax.mulhi(np.array([7, 4000000000], np.uint32), np.array([3, 4000000000], np.uint32))),
    "bitcast_convert_type": lambda L, np_: (L.lax.bitcast_convert_type(TIES, np.int32),
                                            L.lax.bitcast_convert_type(TIES, np.uint8),
                                            L.lax.bitcast_convert_type(INTS.view(np.uint8).reshape(2, 5, 4), np.int32)),
    "stack_unstack_broadcast_like": lambda L, np_: (L.lax.stack([TIES[0], TIES[1]], axis=1),
                                                    L.lax.unstack(A, axis=1),
                                                    L.lax.broadcast_like(TIES[0], A[:, :2]),
                                                    L.lax.shape_as_value((2, 3)), L.lax.empty((2, 2), np.float32)),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_values_as_jax(case, jitted):
    tolerance = {"rtol": 2e-4, "atol": 2e-4} if case.startswith("conv") else {"rtol": 2e-5, "atol": 1e-6}
    check_against_jax(CASES[case], jitted, **tolerance)


def _loss(name):
    """Scalar losses whose gradients go through the new operations."""
    return {
        "reduce_generic": lambda L, np_, x: L.lax.reduce(x, -np.inf, lambda a, b: np_.maximum(a, b), (1,)).sum(),
        "reduce_add": lambda L, np_, x: (L.lax.reduce(x, 0.0, L.lax.add, (0,)) ** 2).sum(),
        "top_k": lambda L, np_, x: (L.lax.top_k(x, 2)[0] ** 2).sum(),
        "sort_two_operands": lambda L, np_, x: (L.lax.sort((x[0], x[1]))[1] * np.arange(5.0)).sum(),
        "cumlogsumexp": lambda L, np_, x: (L.lax.cumlogsumexp(x, axis=1) * np.arange(5.0)).sum(),
        "special": lambda L, np_, x: (L.lax.erfc(x) + L.lax.lgamma(x * x + 1) + L.lax.digamma(x * x + 1)
                                      + L.lax.bessel_i0e(x) + L.lax.bessel_i1e(x)
                                      + L.lax.igamma(np.float32(2.0), x * x + 0.1)).sum(),
        "conv": lambda L, np_, x: (L.lax.conv_general_dilated(
            x.reshape(1, 2, 5, 1) * np.ones((1, 1, 1, 4), np.float32), KER[:2, :2], (1, 2), "SAME",
            rhs_dilation=(1, 2), dimension_numbers=NHWC) ** 2).sum(),
        "max_pool": lambda L, np_, x: (L.lax.reduce_window(x, -np.inf, L.lax.max, (2, 2), (1, 1), "VALID")
                                       ** 2).sum(),
        "avg_pool": lambda L, np_, x: (L.lax.reduce_window(x, 0.0, L.lax.add, (2, 3), (1, 2), "SAME") ** 2).sum(),
        "reduce_precision": lambda L, np_, x: (L.lax.reduce_precision(x, 8, 7) ** 2).sum(),
    }[name]


X = _rng.normal(size=(2, 5)).astype(np.float32)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", ["reduce_generic", "reduce_add", "top_k", "sort_two_operands", "cumlogsumexp",
                                  "special", "conv", "max_pool", "avg_pool", "reduce_precision"])
def test_gradients_as_jax(name, jitted):
    loss = _loss(name)
    check_against_jax(lambda L, np_: L.grad(lambda x: loss(L, np_, x))(X), jitted, rtol=2e-4, atol=2e-5)


def test_conv_gradients_with_respect_to_both_operands_as_jax():
    def case(L, np_):
        def loss(img, ker):
            out = L.lax.conv_general_dilated(img, ker, (2, 1), "SAME", dimension_numbers=NHWC,
                                             feature_group_count=2)
            return (out * out).sum()

        return L.grad(loss, argnums=(0, 1))(IMG, KER_GROUPED)

    check_against_jax(case, True, rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_vmap_as_jax(jitted):
    def case(L, np_):
        return (L.vmap(lambda x: L.lax.top_k(x, 2))(A),
                L.vmap(lambda img: L.lax.conv_general_dilated(img[None], KER, (1, 1), "VALID",
                                                              dimension_numbers=NHWC)[0])(IMG),
                L.vmap(lambda x: L.lax.reduce(x, 0.0, lambda a, b: a + b, (1,)))(A),
                L.vmap(lambda x: L.lax.lgamma(x))(POS))

    check_against_jax(case, jitted, rtol=2e-4, atol=2e-4)


def test_clz_as_jax():
    """Passed as an argument: XLA folds clz of constants wrongly (clz(-1) = -32 in jit(lambda: clz(INTS)))."""
    for ints in (INTS, np.array([0, 1, 128, 255], np.uint8)):
        expected = np.asarray(jax.jit(jax.lax.clz)(ints))
        np.testing.assert_array_equal(np.asarray(meshax.lax.clz(ints)), expected)
        np.testing.assert_array_equal(np.asarray(meshax.jit(meshax.lax.clz)(ints)), expected)


def test_mulhi_of_64_bit_integers():
    rng = np.random.default_rng(3)
    with meshax.enable_x64():
        for dtype in (np.int64, np.uint64):
            info = np.iinfo(dtype)
            x, y = (rng.integers(info.min, info.max, size=50, dtype=dtype, endpoint=True) for _ in range(2))
            expected = [((int(a) * int(b)) >> 64) % (1 << 64) for a, b in zip(x, y)]
            got = np.asarray(meshax.lax.mulhi(x, y)).view(np.uint64)
            assert [int(v) for v in got] == expected


def test_errors():
    with pytest.raises(NotImplementedError, match="batch_group_count"):
        meshax.lax.conv_general_dilated(IMG, KER, (1, 1), "SAME", dimension_numbers=NHWC, batch_group_count=2)
    with pytest.raises(NotImplementedError, match="with respect to a"):
        meshax.grad(lambda a: meshax.lax.igamma(a, np.float32(1.0)))(np.float32(2.0))
    with pytest.raises(ValueError, match="k=9"):
        meshax.lax.top_k(TIES, 9)


# ---- top-level names -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_pure_callback_as_jax(jitted):
    calls = []

    def host(x, scale):
        calls.append(type(x))
        return np.sort(np.asarray(x), axis=-1) * scale, np.asarray(x).sum(dtype=np.float32)

    def case(L, np_):
        shapes = (L.ShapeDtypeStruct(TIES.shape, np.float32), L.ShapeDtypeStruct((), np.float32))
        f = lambda x: L.pure_callback(host, shapes, x * 2, scale=np.float32(3))  # noqa: E731
        rows = L.vmap(lambda r: L.pure_callback(lambda v: np.cumsum(v), L.ShapeDtypeStruct((5,), np.float32), r,
                                                vmap_method="sequential"))(TIES)
        return (L.jit(f) if jitted else f)(TIES), rows

    check_against_jax(case, False)
    assert calls
    with pytest.raises(ValueError, match="do not support JVP"):
        meshax.grad(lambda x: meshax.pure_callback(np.sin, meshax.ShapeDtypeStruct((), np.float32), x))(1.0)


def test_ensure_compile_time_eval_gives_concrete_values_inside_jit():
    def case(L, np_):
        def f(x):
            with L.ensure_compile_time_eval():
                n = int(np_.sum(np_.arange(4)))  # concrete: usable as a Python int
            return x * n

        return L.jit(f)(TIES)

    check_against_jax(case, False)


def test_linear_transpose_and_closure_convert_as_jax():
    w = _rng.normal(size=(5, 3)).astype(np.float32)

    def case(L, np_):
        transpose = L.linear_transpose(lambda x: (x @ w, 2 * x.sum()), L.ShapeDtypeStruct((2, 5), np.float32))
        (ct,) = transpose((np.ones((2, 3), np.float32), np.float32(1.5)))
        scale = np_.asarray(np.float32(3.0))
        converted, consts = L.closure_convert(lambda x: np_.sin(x) * scale, TIES)
        return ct, converted(TIES, *consts), len(consts)

    check_against_jax(case, False)


def test_small_names_as_jax():
    assert (meshax.host_count(), meshax.host_id(), meshax.host_ids(), meshax.process_indices()) == \
           (jax.process_count(), jax.process_index(), [jax.process_index()], jax.process_indices())
    before = len(meshax.live_arrays())
    kept = mnp.ones(3)
    assert len(meshax.live_arrays()) == before + 1 and any(a is kept for a in meshax.live_arrays())
    kept.delete()  # a deleted Array is not live (as in JAX)
    assert len(meshax.live_arrays()) == before and not any(a is kept for a in meshax.live_arrays())
    assert "numpy" in meshax.print_environment_info(return_string=True)
    with meshax.enable_x64():
        assert mnp.ones(2, dtype=np.float64).dtype == np.float64
    assert mnp.ones(2, dtype=np.float64).dtype == np.float32
    with meshax.default_matmul_precision("highest"), meshax.numpy_rank_promotion("allow"), meshax.log_compiles():
        pass
    with pytest.raises(NotImplementedError, match="numpy_rank_promotion"):
        with meshax.numpy_rank_promotion("raise"):
            pass


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_custom_gradient_as_jax(jitted):
    def case(L, np_):
        @L.custom_gradient
        def clipped_square(x, y):
            value = x * x * y
            return value, lambda g: (np_.clip(g * 2 * x * y, -1.0, 1.0), g * x * x)

        grad = L.grad(lambda x, y: (clipped_square(x, y) + clipped_square(3 * x, y * y)).sum(), argnums=(0, 1))
        grad = L.jit(grad) if jitted else grad
        return clipped_square(TIES, A[:2, 0]), grad(TIES, A[:2, 0])

    check_against_jax(case, False)


def test_types_and_shape_helpers_as_jax():
    def program(lax):
        return [
            [repr(p) for p in lax.Precision], repr(lax.Precision("highest")), str(lax.Precision.HIGH),
            [m.name for m in lax.GatherScatterMode], lax.GatherScatterMode.from_any("clip").name,
            lax.GatherScatterMode.from_any(None).name,
            [int(n) for n in lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 1), [(1, 1), (0, 0)])],
            [int(n) for n in lax.conv_general_shape_tuple((2, 9, 9, 3), (3, 3, 3, 4), (2, 1), "SAME", NHWC)],
            [int(n) for n in lax.reduce_window_shape_tuple((2, 9, 9, 3), (1, 3, 3, 1), (1, 2, 2, 1),
                                                           [(0, 0), (1, 1), (1, 1), (0, 0)])],
            lax.conv_general_permutations(NHWC), lax.padtype_to_pads((9, 8), (3, 2), (2, 3), "SAME"),
            lax.padtype_to_pads((9, 8), (3, 2), (2, 3), "SAME_LOWER"), lax.broadcast_shapes((3, 1), (1, 4)),
        ]

    assert program(meshax.lax) == program(jax.lax)


# ---- gather and scatter with dimension numbers ------------------------------------------------------------------

CUBE = np.arange(60., dtype=np.float32).reshape(3, 4, 5)
ROWS = np.array([[0], [3], [2], [7]], np.int32)  # 7 is out of bounds
CORNERS = np.array([[1, 2], [0, 0], [2, 3]], np.int32)
PER_BATCH = np.array([[1], [0], [3]], np.int32)


def _dn(L):
    gd, sd = L.lax.GatherDimensionNumbers, L.lax.ScatterDimensionNumbers
    return {
        "rows": gd(offset_dims=(0, 2), collapsed_slice_dims=(1,), start_index_map=(1,)),
        "windows": gd(offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(0, 2)),
        "batched": gd(offset_dims=(1,), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,),
                      start_indices_batching_dims=(0,)),
        "scatter_rows": sd(update_window_dims=(0, 2), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,)),
        "scatter_batched": sd(update_window_dims=(1,), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                              operand_batching_dims=(0,), scatter_indices_batching_dims=(0,)),
    }


GATHER_CASES = {
    "gather_rows": lambda L, np_: L.lax.gather(CUBE, ROWS, _dn(L)["rows"], (3, 1, 5)),
    "gather_rows_fill": lambda L, np_: L.lax.gather(CUBE, ROWS, _dn(L)["rows"], (3, 1, 5), mode="fill",
                                                    fill_value=-1.0),
    "gather_windows": lambda L, np_: L.lax.gather(CUBE, CORNERS, _dn(L)["windows"], (1, 4, 2)),
    "gather_batched": lambda L, np_: L.lax.gather(CUBE, PER_BATCH, _dn(L)["batched"], (1, 1, 5)),
    "scatter_add_drops": lambda L, np_: L.lax.scatter_add(CUBE, ROWS, np.ones((3, 4, 5), np.float32),
                                                          _dn(L)["scatter_rows"]),
    "scatter_set": lambda L, np_: L.lax.scatter(CUBE, ROWS, np.full((3, 4, 5), 7.0, np.float32),
                                                _dn(L)["scatter_rows"]),
    "scatter_max_clip": lambda L, np_: L.lax.scatter_max(CUBE, ROWS, np.full((3, 4, 5), 30.0, np.float32),
                                                         _dn(L)["scatter_rows"], mode="clip"),
    "scatter_mul_sub_min": lambda L, np_: (
        L.lax.scatter_mul(CUBE, ROWS[:3], np.full((3, 3, 5), 2.0, np.float32), _dn(L)["scatter_rows"]),
        L.lax.scatter_sub(CUBE, ROWS[:3], np.ones((3, 3, 5), np.float32), _dn(L)["scatter_rows"]),
        L.lax.scatter_min(CUBE, ROWS[:3], np.full((3, 3, 5), 20.0, np.float32), _dn(L)["scatter_rows"])),
    "scatter_batched": lambda L, np_: L.lax.scatter_add(CUBE, PER_BATCH, np.ones((3, 5), np.float32),
                                                        _dn(L)["scatter_batched"]),
    "scatter_apply": lambda L, np_: L.lax.scatter_apply(CUBE, ROWS, lambda v: v * -1, _dn(L)["scatter_rows"],
                                                        update_shape=(3, 4, 5)),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", sorted(GATHER_CASES))
def test_gather_scatter_as_jax(case, jitted):
    check_against_jax(GATHER_CASES[case], jitted)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_gather_scatter_gradients_and_vmap_as_jax(jitted):
    def case(L, np_):
        def loss(x, u):
            picked = L.lax.gather(x, CORNERS, _dn(L)["windows"], (1, 4, 2))
            spread = L.lax.scatter_add(x, ROWS, u, _dn(L)["scatter_rows"])
            return (picked ** 2).sum() + (spread ** 2).sum()

        grads = L.grad(loss, argnums=(0, 1))(CUBE / 10, np.ones((3, 4, 5), np.float32))
        mapped = L.vmap(lambda x: L.lax.gather(x, CORNERS, _dn(L)["windows"], (1, 4, 2)))(np.stack([CUBE, -CUBE]))
        return grads, mapped

    check_against_jax(case, jitted, rtol=2e-5, atol=1e-4)


def test_primitive_names_bind_as_jax():
    def program(L):
        x = np.array([0.5, 1.5], np.float32)
        return (L.lax.sin_p.bind(x, accuracy=None), L.lax.add_p.bind(x, x), L.lax.cumsum_p.bind(x, axis=0, reverse=True),
                L.lax.argmax_p.bind(x, axes=(0,), index_dtype=np.int32), L.lax.lgamma_p.bind(x))

    for ours, theirs in zip(program(meshax), program(jax)):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)  # XLA's lgamma: ~3 ulp
    jaxpr = meshax.make_jaxpr(lambda x: meshax.lax.sin(x) + 1)(np.float32(1))
    assert [eq.primitive for eq in jaxpr.jaxpr.equations] == [meshax.lax.sin_p, meshax.lax.add_p]


def test_errors_and_dtypes_modules_as_jax():
    def program(L):
        caught = []
        for fn in (lambda x: 1 if x > 0 else 0, lambda x: int(x), lambda x: np.asarray(x), lambda x: [0, 1][x]):
            try:
                L.jit(fn)(np.int32(1))
            except L.errors.ConcretizationTypeError as error:
                caught.append(("concretization", type(error).__name__))
            except TypeError as error:
                caught.append(("type", type(error).__name__))
        d = L.dtypes
        return caught, [str(d.result_type(1, np.float32(2))), d.result_type(np.int8(1), 2, return_weak_type_flag=True),
                        d.scalar_type_of(np.int8(1)), d.scalar_type_of(2.0), d.itemsize_bits(np.int16),
                        str(d.canonicalize_dtype(np.float64)), d.issubdtype(np.float32, np.floating),
                        np.dtype(d.bfloat16).name, d.float0, int(d.iinfo(np.int8).max), float(d.finfo(np.float32).eps)]

    ours, theirs = program(meshax), program(jax)
    assert ours[1] == theirs[1]
    # meshax's Tracer{Integer,Array}ConversionError also are ConcretizationTypeErrors (JAX's are plain TypeErrors)
    assert [name for _, name in ours[0]] == [name for _, name in theirs[0]]


def _windowed_loss(L, img, ker):
    """A convolution with every window option (strides, padding, input and kernel dilation), squared and summed."""
    out = L.lax.conv_general_dilated(img, ker, (1, 2), ((1, 2), (0, 1)), lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                     dimension_numbers=NHWC)
    return (out * out).sum()


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_conv_windows_under_grad_jvp_and_vmap_as_jax(jitted):
    """The input's windows (one copy) and their transpose (the windows summed back) under every transformation."""
    def case(L, np_):
        grads = L.grad(lambda i, k: _windowed_loss(L, i, k), argnums=(0, 1))(IMG, KER)
        tangent = L.jvp(lambda i: _windowed_loss(L, i, KER), (IMG,), (np.ones_like(IMG),))
        per_image = L.vmap(L.grad(lambda i: _windowed_loss(L, i[None], KER)))(IMG)
        return grads, tangent, per_image

    check_against_jax(case, jitted, rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("spec", [("b",), (None, "b"), (None, None, "b")], ids=["batch", "rows", "columns"])
def test_conv_gradients_of_a_split_input_equal_the_whole_ones(spec):
    """Split along the batch (kept split) or along a spatial dimension (gathered: a window spans it)."""
    mesh = meshax.make_mesh((2,), ("b",), devices=meshax.devices()[:2])
    split = meshax.device_put(np.concatenate([IMG, IMG[::-1]]), meshax.sharding.NamedSharding(
        mesh, meshax.sharding.PartitionSpec(*spec)))
    grad = meshax.jit(meshax.grad(lambda i, k: _windowed_loss(meshax, i, k), argnums=(0, 1)))
    whole = jax.grad(lambda i, k: _windowed_loss(jax, i, k), argnums=(0, 1))(np.asarray(split), KER)
    for ours, theirs in zip(grad(split, KER), whole):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-4, atol=2e-3)


def _executed_primitives(function, *args):
    """The primitives of the program a jitted `function` runs (simplified, fused: interpreters/fusion.py)."""
    from meshax._src.interpreters.fusion import executable

    outer = meshax.make_jaxpr(function)(*args).jaxpr
    (call,) = [eq for eq in outer.equations if eq.primitive.name == "jit"]
    return {eq.primitive.name for eq in executable(call.params["jaxpr"]).equations}


@pytest.mark.parametrize("options", [dict(window_strides=(1, 1), padding="SAME"),
                                     dict(window_strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2)),
                                     dict(window_strides=(1, 2), padding=((0, 0), (1, 1)), lhs_dilation=(2, 1))],
                         ids=["same", "strided-dilated", "input-dilated"])
def test_a_jitted_convolutions_input_gradient_is_one_windows_product_sum(options):
    """Under jit a convolution's input gradient (the windows of g @ kernel^T summed back) runs as one
    conv_windows_product_sum (window_products.py, installed in simplify.py), with JAX's values; split along the batch on
    two devices too (its sharding rule keeps the split)."""
    def loss(L, img, ker):
        out = L.lax.conv_general_dilated(img, ker, dimension_numbers=NHWC, **options)
        return (out * L.numpy.tanh(out)).sum()

    grad = meshax.jit(meshax.grad(lambda i, k: loss(meshax, i, k), argnums=(0, 1)))
    assert "conv_windows_product_sum" in _executed_primitives(grad, IMG, KER)
    assert "conv_windows_sum" not in _executed_primitives(grad, IMG, KER)
    theirs = jax.grad(lambda i, k: loss(jax, i, k), argnums=(0, 1))(IMG, KER)
    mesh = meshax.make_mesh((2,), ("b",), devices=meshax.devices()[:2])
    split = meshax.device_put(IMG, meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("b")))
    for inputs in [(IMG, KER), (IMG, KER), (split, KER)]:  # the second run is the generated program
        for ours, want in zip(grad(*inputs), theirs):
            np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("threads", [2, 3])
def test_convolution_kernels_spread_over_free_threads_give_the_same_bits(threads, monkeypatch):
    """The windows' copy and their sum (windows.py), and the products with windows (window_products.py) run their
    blocks of images on the threads free now: bit for bit what one thread gives, and a jitted convolution's
    gradients are JAX's."""
    from meshax._src.primitives import window_products as WP
    from meshax._src.primitives import windows as W
    from meshax._src.runtime import compute_pool

    rng = np.random.default_rng(7)
    x = rng.normal(size=(9, 8, 7, 4)).astype(np.float32)
    g = rng.normal(size=(9, 6, 5, 6)).astype(np.float32)
    kernel = rng.normal(size=(9, 4, 6)).astype(np.float32)
    params = dict(first=1, window=(3, 3), strides=(1, 1), dilation=(1, 1), pads=((0, 0), (0, 0)))
    y = rng.normal(size=(9, 6, 5, 9, 4)).astype(np.float32)

    def kernels():
        return (W._windows_impl(x, **params), W._windows_sum_impl(y, sizes=(8, 7), **params),
                WP._product_sum_impl(g, kernel, sizes=(8, 7), **params),
                WP._product_sum_impl(g[:, ::2], kernel, sizes=(8, 7), **dict(params, strides=(2, 1))),
                WP._windows_product_impl(x, kernel, **params), WP._windows_gradient_impl(x, g, **params))

    monkeypatch.setattr(W, "SUM_BLOCK_BYTES", 2 * 8 * 7 * 4 * 4)  # blocks of 2 images
    monkeypatch.setattr(WP, "WINDOW_BLOCK_BYTES", 2 * 6 * 5 * 9 * 4 * 4)  # windows of 2 images
    monkeypatch.setattr(WP, "MIN_BLOCK_BYTES", 0)
    monkeypatch.setattr(WP, "FLIPPED_MIN_FEATURES", 1)  # the stride-1 input gradient as a product of windows
    monkeypatch.setattr(compute_pool, "available_threads", lambda: 1)
    alone = kernels()
    spread = []
    original = compute_pool.run_each
    monkeypatch.setattr(compute_pool, "run_each",
                        lambda calls, **options: (spread.append(len(calls)), original(calls, **options))[1])
    monkeypatch.setattr(compute_pool, "available_threads", lambda: threads)
    for ours, want in zip(kernels(), alone, strict=True):
        assert ours.tobytes() == want.tobytes()
    assert spread == [threads] * 6, spread
    grad = meshax.jit(meshax.grad(lambda i, k: _windowed_loss(meshax, i, k), argnums=(0, 1)))
    theirs = jax.grad(lambda i, k: _windowed_loss(jax, i, k), argnums=(0, 1))(x, KER)
    for ours, want in zip(grad(x, KER), theirs):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(want), rtol=2e-4, atol=2e-3)


@pytest.mark.parametrize("flipped_from", [1, 8], ids=["flipped", "by-positions"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("pads, strides, dilation", [
    (((1, 1), (1, 1)), (1, 1), (1, 1)), (((0, 2), (1, 0)), (1, 1), (1, 1)), (((2, 1), (1, 2)), (2, 1), (1, 2)),
    (((3, 3), (0, 0)), (1, 2), (2, 1))])
def test_padded_windows_and_their_sums_are_those_of_the_padded_input(pads, strides, dilation, threads, flipped_from,
                                                                      monkeypatch):
    """Zeros padded around the input inside the windows' copy and the products with windows (a few images at a
    time), and the sums cropped to the unpadded input inside the windows' sum and product sum: bit for bit the
    windows of np.pad's copy and their products, and the interior of the padded input's sums, in blocks of images
    over 1 or 2 threads."""
    from meshax._src.primitives import window_products as WP
    from meshax._src.primitives import windows as W
    from meshax._src.runtime import compute_pool

    monkeypatch.setattr(W, "SUM_BLOCK_BYTES", 3 * 10 * 9 * 4 * 4)  # blocks of a few padded images
    monkeypatch.setattr(WP, "WINDOW_BLOCK_BYTES", 3 * 10 * 9 * 6 * 4 * 4)
    monkeypatch.setattr(WP, "MIN_BLOCK_BYTES", 0)
    monkeypatch.setattr(WP, "FLIPPED_MIN_FEATURES", flipped_from)
    monkeypatch.setattr(compute_pool, "available_threads", lambda: threads)
    rng = np.random.default_rng(11)
    x = rng.normal(size=(7, 6, 5, 4)).astype(np.float32)
    base = dict(first=1, window=(3, 2), strides=strides, dilation=dilation)
    unpadded = ((0, 0), (0, 0))
    wide = np.pad(x, ((0, 0),) + pads + ((0, 0),))
    want = W._windows_impl(wide, pads=unpadded, **base)
    ours = W._windows_impl(x, pads=pads, **base)
    assert ours.shape == want.shape and ours.tobytes() == want.tobytes()
    y = rng.normal(size=want.shape).astype(np.float32)
    g = rng.normal(size=want.shape[:3] + (5,)).astype(np.float32)
    kernel = rng.normal(size=(6, 4, 5)).astype(np.float32)
    inside = (slice(None),) + tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, x.shape[1:3]))
    for summed, whole in ((W._windows_sum_impl(y, sizes=x.shape[1:3], pads=pads, **base),
                           W._windows_sum_impl(y, sizes=wide.shape[1:3], pads=unpadded, **base)),
                          (WP._product_sum_impl(g, kernel, sizes=x.shape[1:3], pads=pads, **base),
                           WP._product_sum_impl(g, kernel, sizes=wide.shape[1:3], pads=unpadded, **base))):
        assert summed.shape == x.shape and summed.tobytes() == np.ascontiguousarray(whole[inside]).tobytes()
    for product, whole in ((WP._windows_product_impl(x, kernel[:, :, :4], pads=pads, **base),
                            WP._windows_product_impl(wide, kernel[:, :, :4], pads=unpadded, **base)),
                           (WP._windows_gradient_impl(x, g, pads=pads, **base),
                            WP._windows_gradient_impl(wide, g, pads=unpadded, **base))):
        assert product.tobytes() == whole.tobytes()
