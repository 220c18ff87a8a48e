"""Issue 39: collectives and shard_map/jit specs as JAX 0.10 has them, each program run in meshax and in JAX.

psum of untraced values (psum(1, axis) is a Python int), in_specs/out_specs and jit shardings matched as tree
prefixes (a PartitionSpec is a leaf), out_specs longer than their output's rank refused, and axis_index_groups.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy  # noqa: F401  (meshax.numpy as L.numpy below)
from differential import assert_matches

LIBS = (meshax, jax)
GROUPS = {"halves": [[0, 1, 2, 3], [4, 5, 6, 7]], "strided": [[0, 2, 4, 6], [1, 3, 5, 7]],
          "pairs": [[3, 0], [1, 2], [7, 4], [5, 6]]}


def mesh_of(L: Any, shape: tuple = (8,), names: tuple = ("i",)) -> Any:
    return L.sharding.Mesh(np.array(L.devices()).reshape(shape), names)


def both(program: Callable[[Any], Any]) -> tuple[Any, Any]:
    """`program(L)` with L = meshax, then with L = jax."""
    return program(meshax), program(jax)


def same(program: Callable[[Any], Any], **tolerances: Any) -> None:
    """`program` gives the same tree, shapes, dtypes, weak types and values in meshax and in JAX."""
    ours, theirs = both(program)
    assert_matches(ours, theirs, **tolerances)


def raises_alike(program: Callable[[Any], Any], error: type) -> None:
    """`program` raises `error` (or a subclass) in meshax and in JAX."""
    for L in LIBS:
        with pytest.raises(error):
            program(L)


def wrapped(L: Any, jitted: bool, f: Callable) -> Callable:
    return L.jit(f) if jitted else f


def described(value: Any) -> Any:
    """A value's Python type and its value, for values that are not traced (in both libraries alike)."""
    if isinstance(value, dict):
        return {k: described(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    return (type(value).__name__, value)


# ---- 1: psum (and pmean, axis_size) of values that are not traced ---------------------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_psum_of_untraced_values_is_computed_in_their_own_type(jitted):
    def program(L):
        seen = {}

        def body(x):
            seen["psum 1"] = described(L.lax.psum(1, "i"))
            seen["psum 1.5"] = described(L.lax.psum(1.5, "i"))
            seen["psum float32"] = described(L.lax.psum(np.float32(2), "i"))
            seen["psum ndarray"] = described(L.lax.psum(np.ones(2), "i"))
            seen["psum tree"] = described(L.lax.psum({"a": 1, "b": 2.0}, "i"))
            seen["pmean 1"] = described(L.lax.pmean(1, "i"))
            seen["pmean ndarray"] = described(L.lax.pmean(np.arange(3.0), "i"))
            seen["axis_size"] = described(L.lax.axis_size("i"))
            return x

        mesh = mesh_of(L)
        wrapped(L, jitted, L.shard_map(body, mesh=mesh, in_specs=L.sharding.PartitionSpec("i"),
                                       out_specs=L.sharding.PartitionSpec("i")))(L.numpy.arange(8.0))
        return seen

    ours, theirs = both(program)
    assert ours == theirs
    assert ours["psum 1"] == ("int", 8)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_traced_results_of_untraced_operands_match_jax(jitted):
    """pmax/pmin of a Python int and psum of a bool are traced in JAX: their values, dtypes and weak types."""
    def program(L):
        P = L.sharding.PartitionSpec

        def body(x):
            return (L.lax.pmax(3, "i"), L.lax.pmin(3, "i"), L.lax.psum(True, "i"), L.lax.psum(np.bool_(True), "i"),
                    L.lax.pmax(2.5, "i"))

        return wrapped(L, jitted, L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P()))(
            L.numpy.arange(8.0))

    same(program)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_the_axis_size_from_psum_drives_python_control_flow_and_shapes(jitted):
    def program(L):
        P = L.sharding.PartitionSpec

        def body(x):
            n = L.lax.psum(1, "i")
            total = sum(x * k for k in range(n)) if n > 1 else x
            return L.numpy.zeros((n,)) + total

        return wrapped(L, jitted, L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P("i")))(
            L.numpy.arange(8.0))

    same(program)


def test_psum_of_one_over_a_tuple_of_axes():
    def program(L):
        P = L.sharding.PartitionSpec
        seen = {}

        def body(x):
            seen["ab"] = described(L.lax.psum(1, ("a", "b")))
            seen["b"] = described(L.lax.psum(1, "b"))
            seen["pmean ab"] = described(L.lax.pmean(2, ("a", "b")))
            return x * L.lax.psum(1, ("a", "b"))

        out = L.shard_map(body, mesh=mesh_of(L, (2, 4), ("a", "b")), in_specs=P(("a", "b")),
                          out_specs=P(("a", "b")))(L.numpy.arange(8.0))
        return seen, np.asarray(out).tolist()

    ours, theirs = both(program)
    assert ours == theirs
    assert ours[0]["ab"] == ("int", 8) and ours[0]["b"] == ("int", 4)


def test_psum_of_one_under_grad():
    def program(L):
        P = L.sharding.PartitionSpec

        def body(y):
            n = L.lax.psum(1, "i")
            return L.lax.psum(L.numpy.sum(L.numpy.stack([y * k for k in range(n)])), "i")

        loss = L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P())
        return L.grad(loss)(L.numpy.arange(8.0)), L.jit(L.grad(loss))(L.numpy.arange(8.0))

    same(program)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_psum_of_one_over_a_vmap_axis_is_the_batch_size(jitted):
    def program(L):
        seen = {}

        def body(x):
            seen["n"] = described(L.lax.psum(1, "v"))
            seen["mean"] = described(L.lax.pmean(2, "v"))
            return x * L.lax.psum(1, "v")

        out = wrapped(L, jitted, L.vmap(body, axis_name="v"))(L.numpy.arange(5.0))
        return seen, np.asarray(out).tolist()

    ours, theirs = both(program)
    assert ours == theirs
    assert ours[0]["n"] == ("int", 5)


EDGES = {
    "psum over no axes": (lambda L, v: L.lax.psum(v, ()), "i"),
    "pmean over no axes": (lambda L, v: L.lax.pmean(v, ()), "i"),
    "psum over a list of axes": (lambda L, v: L.lax.psum(v, ["i"]), None),
    "psum int8": (lambda L, v: L.lax.psum(v.astype("int8"), "i"), None),
    "pmean int32": (lambda L, v: L.lax.pmean(v.astype("int32"), "i"), None),
    "psum of a concrete array": (lambda L, v: v + L.lax.psum(L.numpy.float32(2), "i"), "i"),
}


@pytest.mark.parametrize("name", list(EDGES))
def test_reductions_of_edge_operands_match_jax(name):
    body, out = EDGES[name]

    def program(L):
        P = L.sharding.PartitionSpec
        return L.shard_map(lambda v: body(L, v), mesh=mesh_of(L), in_specs=P("i"), out_specs=P(out))(
            L.numpy.arange(16.0).reshape(8, 2))

    same(program)


# ---- 2: in_specs and out_specs are tree prefixes ---------------------------------------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("middle", ["P()", "None"])
def test_in_specs_are_a_prefix_of_the_arguments_not_zipped_with_their_leaves(jitted, middle):
    def program(L):
        P = L.sharding.PartitionSpec
        shapes = []

        def body(a, b, c):
            shapes.extend(tuple(x.shape) for x in L.tree.leaves((a, b, c)))
            return a

        specs = (P(), P() if middle == "P()" else None, P("i"))
        g = L.shard_map(body, mesh=mesh_of(L), in_specs=specs, out_specs=P())
        wrapped(L, jitted, g)(L.numpy.zeros(3), None, (L.numpy.zeros((16, 2)), L.numpy.zeros(16)))
        return shapes

    ours, theirs = both(program)
    assert ours == theirs == [(3,), (2, 2), (2,)]


def test_a_none_spec_replicates_its_argument():
    def program(L):
        P = L.sharding.PartitionSpec
        shapes = []

        def body(a, b, c):
            shapes.extend(tuple(x.shape) for x in L.tree.leaves((a, b, c)))
            return a

        L.shard_map(body, mesh=mesh_of(L), in_specs=(P(), None, P("i")), out_specs=P())(
            L.numpy.zeros(3), L.numpy.zeros(8), (L.numpy.zeros((16, 2)), L.numpy.zeros(16)))
        return shapes

    ours, theirs = both(program)
    assert ours == theirs


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_out_specs_are_a_prefix_of_the_outputs(jitted):
    def program(L):
        P = L.sharding.PartitionSpec
        results = {}
        for name, out_specs in (("P", (P("i"), P(), P())), ("None", (P("i"), None, P()))):
            g = L.shard_map(lambda x: ((x, x + 1), None, x), mesh=mesh_of(L), in_specs=P("i"),
                            out_specs=out_specs, check_vma=False)
            out = wrapped(L, jitted, g)(L.numpy.arange(16.0))
            results[name] = L.tree.map(lambda v: (tuple(v.shape), np.asarray(v).tolist()), out)
        return results

    ours, theirs = both(program)
    assert ours == theirs


def test_a_spec_covering_a_tuple_and_a_dict_of_specs_match_as_jax():
    def program(L):
        P = L.sharding.PartitionSpec
        shapes = []

        def body(a, b):
            shapes.append(L.tree.map(lambda x: tuple(x.shape), (a, b)))
            return b

        mesh = mesh_of(L)
        L.shard_map(body, mesh=mesh, in_specs=(P("i"), P()), out_specs=P())(
            (L.numpy.zeros(16), L.numpy.zeros(8)), L.numpy.zeros(8))
        L.shard_map(body, mesh=mesh, in_specs=({"x": P("i"), "y": P()}, P("i")), out_specs=P("i"))(
            {"y": L.numpy.zeros(16), "x": L.numpy.zeros(8)}, L.numpy.zeros(8))
        return shapes

    ours, theirs = both(program)
    assert ours == theirs


@pytest.mark.parametrize("case", ["too few", "nested too short", "dict keys", "list for tuple"])
def test_specs_that_are_no_prefix_raise_as_in_jax(case):
    def program(L):
        P = L.sharding.PartitionSpec
        specs, args = {
            "too few": ((P("i"),), (L.numpy.zeros(16), L.numpy.zeros(8))),
            "nested too short": (((P("i"),),), ((L.numpy.zeros(16), L.numpy.zeros(8)),)),
            "dict keys": (({"x": P("i"), "z": P()},), ({"x": L.numpy.zeros(8), "y": L.numpy.zeros(8)},)),
            "list for tuple": ([P("i"), P()], (L.numpy.zeros(16), L.numpy.zeros(8))),
        }[case]
        return L.shard_map(lambda *a: L.numpy.zeros(()), mesh=mesh_of(L), in_specs=specs, out_specs=P())(*args)

    raises_alike(program, ValueError)


# ---- 3: out_specs longer than the output's rank -----------------------------------------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", ["trailing None", "scalar", "extra axis"])
def test_out_specs_longer_than_the_output_rank_raise(jitted, case):
    def program(L):
        P = L.sharding.PartitionSpec
        body, out_specs = {
            "trailing None": (lambda x: x, P("i", None)),
            "scalar": (lambda x: x.sum(), P(None)),
            "extra axis": (lambda x: x, P(None, "i")),
        }[case]
        g = L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=out_specs, check_vma=False)
        return wrapped(L, jitted, g)(L.numpy.arange(16.0))

    raises_alike(program, ValueError)
    with pytest.raises(ValueError, match="longer than its output's rank"):
        program(meshax)


def test_the_older_spelling_keeps_accepting_trailing_nones_as_seed_003_writes_them():
    """Seed 003's psum_scatter example returns a vector under out_specs P('i', None)."""
    from meshax._src.transforms.shard_map import older_shard_map

    mesh = mesh_of(meshax, (4, 2), ("i", "j"))
    P = meshax.sharding.PartitionSpec
    scatter = older_shard_map(lambda x: meshax.lax.psum_scatter(x, "i", scatter_dimension=1), mesh=mesh,
                              in_specs=P("i", None), out_specs=P("i", None))
    x = np.array([[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8], [9, 7, 1, 2]])
    np.testing.assert_array_equal(np.asarray(scatter(x)), [22, 20, 12, 17])
    with pytest.raises(ValueError, match="longer than its output's rank"):
        older_shard_map(lambda x: x, mesh=mesh, in_specs=P("i"), out_specs=P("i", "j"))(np.arange(4.0))


# ---- 4: axis_index_groups --------------------------------------------------------------------------------------


def _grouped(L: Any, jitted: bool, body: Callable, data: Any, check_vma: bool = True) -> Any:
    P = L.sharding.PartitionSpec
    g = L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P("i"), check_vma=check_vma)
    return wrapped(L, jitted, g)(L.numpy.asarray(data))


GROUPED = {
    "pmax": (lambda L, g: lambda v: L.lax.pmax(v, "i", axis_index_groups=g), True),
    "pmin": (lambda L, g: lambda v: L.lax.pmin(v, "i", axis_index_groups=g), True),
    "psum": (lambda L, g: lambda v: L.lax.psum(v, "i", axis_index_groups=g), False),
    "pmean": (lambda L, g: lambda v: L.lax.pmean(v, "i", axis_index_groups=g), False),
    "psum int": (lambda L, g: lambda v: L.lax.psum(v.astype("int32"), "i", axis_index_groups=g), False),
    "psum 1": (lambda L, g: lambda v: v * L.lax.psum(1, "i", axis_index_groups=g), True),
    "all_gather": (lambda L, g: lambda v: L.lax.all_gather(v, "i", axis_index_groups=g), True),
    "all_gather axis 1": (lambda L, g: lambda v: L.lax.all_gather(v, "i", axis=1, axis_index_groups=g), True),
    "all_gather tiled": (lambda L, g: lambda v: L.lax.all_gather(v, "i", axis_index_groups=g, tiled=True), True),
    "psum_scatter tiled": (lambda L, g: lambda v: L.lax.psum_scatter(v, "i", axis_index_groups=g, tiled=True),
                           True),
    "psum_scatter": (lambda L, g: lambda v: L.lax.psum_scatter(v[:len(g[0])], "i", axis_index_groups=g), True),
    "all_to_all": (lambda L, g: lambda v: L.lax.all_to_all(v, "i", 0, 0, axis_index_groups=g, tiled=True), True),
}


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("groups", list(GROUPS))
@pytest.mark.parametrize("name", list(GROUPED))
def test_collectives_with_axis_index_groups_give_jax_values(name, groups, jitted):
    make, check_vma = GROUPED[name]
    data = np.arange(64.0).reshape(32, 2) ** 1.5  # each device a different (4, 2) block
    same(lambda L: _grouped(L, jitted, make(L, GROUPS[groups]), data, check_vma), rtol=1e-5)


GROUPED_EDGES = {
    "pmax of an invariant value": (
        lambda L, v: v + L.lax.pmax(L.numpy.ones(2), "i", axis_index_groups=GROUPS["halves"]), True),
    "pmax of a Python scalar": (lambda L, v: v + L.lax.pmax(2, "i", axis_index_groups=GROUPS["halves"]), True),
    "psum int8": (lambda L, v: L.lax.psum(v.astype("int8"), "i", axis_index_groups=GROUPS["halves"]), False),
    "psum bool": (lambda L, v: L.lax.psum(v > 3, "i", axis_index_groups=GROUPS["halves"]), False),
    "all_gather int16": (lambda L, v: L.lax.all_gather(v.astype("int16"), "i", axis_index_groups=GROUPS["strided"],
                                                       tiled=True), True),
}


@pytest.mark.parametrize("name", list(GROUPED_EDGES))
def test_grouped_collectives_of_edge_operands_match_jax(name):
    body, check_vma = GROUPED_EDGES[name]
    same(lambda L: _grouped(L, False, lambda v: body(L, v), np.arange(16.0).reshape(8, 2), check_vma))


def test_grouped_pmax_is_typed_varying_where_jax_types_it_invariant():
    """A README difference: the groups' maxima differ between groups, so meshax types the result varying and an
    out_specs that replicates it raises (JAX types it invariant and returns device 0's group's value)."""
    P = meshax.sharding.PartitionSpec
    body = functools.partial(meshax.lax.pmax, axis_name="i", axis_index_groups=GROUPS["halves"])
    with pytest.raises(ValueError, match="replicated"):
        meshax.shard_map(body, mesh=mesh_of(meshax), in_specs=P("i"), out_specs=P())(meshax.numpy.arange(8.0))


@pytest.mark.parametrize("name", ["psum", "pmean"])
def test_psum_with_groups_under_check_vma_raises_as_in_jax(name):
    make, _ = GROUPED[name]
    raises_alike(lambda L: _grouped(L, False, make(L, GROUPS["halves"]), np.arange(16.0)), NotImplementedError)


@pytest.mark.parametrize("groups", [[[0, 1, 2, 3], [4, 5, 6, 8]], [[0, 1, 2, 3], [3, 4, 5, 6]]],
                         ids=["out of range", "repeated"])
@pytest.mark.parametrize("name", ["pmax", "psum 1", "all_gather"])
def test_groups_that_do_not_cover_each_index_once_raise(name, groups):
    make, _ = GROUPED[name]
    raises_alike(lambda L: _grouped(L, False, make(L, groups), np.arange(16.0)), ValueError)


@pytest.mark.parametrize("axes,groups", [(("a", "b"), [[0, 2], [1, 3], [4, 6], [5, 7]]), ("b", [[0, 3], [2, 1]])],
                         ids=["two axes", "minor axis"])
@pytest.mark.parametrize("op", ["pmax", "all_gather"])
def test_groups_over_named_axes_of_a_two_dimensional_mesh(op, axes, groups):
    def program(L):
        P = L.sharding.PartitionSpec
        body = functools.partial(getattr(L.lax, op), axis_name=axes, axis_index_groups=groups)
        return L.shard_map(body, mesh=mesh_of(L, (2, 4), ("a", "b")), in_specs=P(("a", "b")),
                           out_specs=P(("a", "b")))(L.numpy.arange(16.0).reshape(8, 2))

    same(program)


def test_gradients_through_grouped_collectives():
    def program(L):
        P = L.sharding.PartitionSpec
        mesh, weights = mesh_of(L), L.numpy.arange(16.0).reshape(8, 2)

        def summed(x):
            return L.shard_map(lambda v: L.lax.psum(v ** 2, "i", axis_index_groups=GROUPS["pairs"]), mesh=mesh,
                               in_specs=P("i"), out_specs=P("i"), check_vma=False)(x)

        def gathered(x):
            return L.shard_map(lambda v: L.lax.all_gather(v ** 2, "i", axis_index_groups=GROUPS["halves"],
                                                          tiled=True), mesh=mesh, in_specs=P("i"),
                               out_specs=P("i"))(x)

        x = L.numpy.arange(16.0).reshape(8, 2)
        return (L.grad(lambda x: (summed(x) * weights).sum())(x),
                L.jit(L.grad(lambda x: (gathered(x) * L.numpy.tile(weights, (4, 1))).sum()))(x))

    same(program)


@pytest.mark.parametrize("op", ["psum", "pmax", "all_gather"])
def test_groups_over_a_vmap_axis_raise_not_implemented(op):
    raises_alike(lambda L: L.vmap(lambda v: getattr(L.lax, op)(v, "v", axis_index_groups=[[0, 1], [2, 3]]),
                                  axis_name="v")(L.numpy.arange(4.0)), NotImplementedError)


# ---- 5: jit in_shardings / out_shardings with a lone PartitionSpec ------------------------------------------------


def _context_mesh(L: Any) -> Any:
    return L.make_mesh((8,), ("dev",), axis_types=(L.sharding.AxisType.Auto,))


def _placed(out: Any) -> Any:
    return [(np.asarray(v).tolist(), tuple(v.sharding.spec)) for v in jax.tree.leaves(out)]


@pytest.mark.parametrize("case", ["one arg", "two args", "tree arg", "host arg", "tuple of one"])
def test_a_lone_partition_spec_in_in_shardings_is_a_leaf_on_the_context_mesh(case):
    def program(L):
        P = L.sharding.PartitionSpec
        a8, a16 = L.numpy.arange(8.0), L.numpy.arange(16.0)
        f, shardings, args = {
            "one arg": (lambda x: x * 2, P("dev"), (a8,)),
            "two args": (lambda a, b: (a * 2, b * 1), P("dev"), (a8, a16)),
            "tree arg": (lambda t: t["a"] + t["b"], P("dev"), ({"a": a8, "b": a8},)),
            "host arg": (lambda x: x * 2, P("dev"), (np.arange(8.0),)),
            "tuple of one": (lambda x: x * 2, (P("dev"),), (a8,)),
        }[case]
        with L.set_mesh(_context_mesh(L)):
            return _placed(L.jit(f, in_shardings=shardings)(*args))

    ours, theirs = both(program)
    assert ours == theirs


@pytest.mark.parametrize("case", ["one output", "tuple of outputs", "prefix"])
def test_a_lone_partition_spec_in_out_shardings_is_a_leaf_on_the_context_mesh(case):
    def program(L):
        P = L.sharding.PartitionSpec
        f, shardings = {
            "one output": (lambda x: x * 2, P("dev")),
            "tuple of outputs": (lambda x: (x, x + 1), P("dev")),
            "prefix": (lambda x: (x * 1, (x, x)), (P("dev"), P())),
        }[case]
        x = L.numpy.arange(8.0)
        with L.set_mesh(_context_mesh(L)):
            return _placed(L.jit(f, out_shardings=shardings)(x))

    ours, theirs = both(program)
    assert ours == theirs


@pytest.mark.parametrize("where", ["in_shardings", "out_shardings"])
def test_a_partition_spec_without_a_context_mesh_raises_runtime_error(where):
    raises_alike(lambda L: L.jit(lambda x: x * 2, **{where: L.sharding.PartitionSpec("dev")})(L.numpy.arange(8.0)),
                 RuntimeError)


@pytest.mark.filterwarnings("ignore:.*context manager has been deprecated:DeprecationWarning")
def test_a_partition_spec_inside_with_mesh_is_placed_on_that_mesh():
    """A README difference: meshax takes the mesh of `with mesh:` for jit's bare PartitionSpecs, as for
    device_put's; JAX 0.10 asks for set_mesh (RuntimeError)."""
    mesh = _context_mesh(meshax)
    with mesh:
        out = meshax.jit(lambda x: x * 2, in_shardings=meshax.sharding.PartitionSpec("dev"))(np.arange(8.0))
    assert out.sharding == meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("dev"))
    with _context_mesh(jax), pytest.raises(RuntimeError):
        jax.jit(lambda x: x * 2, in_shardings=jax.sharding.PartitionSpec("dev"))(np.arange(8.0))


def test_in_shardings_that_are_no_prefix_of_the_arguments_raise():
    def program(L):
        sharding = L.sharding.NamedSharding(_context_mesh(L), L.sharding.PartitionSpec("dev"))
        return L.jit(lambda a, b: a + b, in_shardings=(sharding,))(L.numpy.arange(8.0), L.numpy.arange(8.0))

    raises_alike(program, ValueError)


# ---- all_gather's `to` keyword ----------------------------------------------------------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("case", ["tiled", "axis 1", "invariant operand"])
def test_all_gather_to_invarying_is_typed_invariant(jitted, case):
    def program(L):
        P = L.sharding.PartitionSpec
        body = {
            "tiled": lambda v: L.lax.all_gather(v, "i", to="invarying", tiled=True),
            "axis 1": lambda v: L.lax.all_gather(v, "i", to="invarying", axis=1),
            "invariant operand": lambda v: L.lax.all_gather(L.numpy.ones(2), "i", to="invarying"),
        }[case]
        g = L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P())  # out_specs P(): invariant
        return wrapped(L, jitted, g)(L.numpy.arange(16.0).reshape(8, 2))

    same(program)


@pytest.mark.parametrize("check_vma", [True, False])
def test_gradients_of_all_gather_to_invarying(check_vma):
    def program(L):
        P = L.sharding.PartitionSpec
        weights = L.numpy.arange(16.0).reshape(8, 2)

        def loss(x):
            gathered = L.shard_map(lambda v: L.lax.all_gather(v ** 2, "i", to="invarying", tiled=True),
                                   mesh=mesh_of(L), in_specs=P("i"), out_specs=P(), check_vma=check_vma)(x)
            return (gathered * weights).sum()

        def of_invariant(c):
            return L.shard_map(lambda v: v * L.lax.all_gather(c * 1.0, "i", to="invarying").sum(), mesh=mesh_of(L),
                               in_specs=P("i"), out_specs=P("i"), check_vma=check_vma)(weights).sum()

        return (L.grad(loss)(weights), L.jit(L.grad(loss))(weights), L.grad(of_invariant)(L.numpy.float32(3.0)))

    same(program)


def test_all_gather_to_reduced_on_explicit_axes():
    def program(L):
        P = L.sharding.PartitionSpec
        mesh = L.make_mesh((8,), ("i",), axis_types=(L.sharding.AxisType.Explicit,))
        x = L.device_put(L.numpy.arange(16.0).reshape(8, 2), L.sharding.NamedSharding(mesh, P("i")))
        types = []

        def body(v):
            gathered = L.lax.all_gather(v, "i", to="reduced", tiled=True)
            types.append(str(L.typeof(gathered)))
            return gathered

        out = L.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P(reduced={"i"}))(x)
        return types, np.asarray(out).tolist()

    ours, theirs = both(program)
    assert ours == theirs


@pytest.mark.parametrize("case", ["unknown target", "groups"])
def test_all_gather_to_errors(case):
    def program(L):
        P = L.sharding.PartitionSpec
        body = {
            "unknown target": lambda v: L.lax.all_gather(v, "i", to="sideways"),
            "groups": lambda v: L.lax.all_gather(v, "i", to="invarying", axis_index_groups=GROUPS["halves"]),
        }[case]
        return L.shard_map(body, mesh=mesh_of(L), in_specs=P("i"), out_specs=P("i"))(L.numpy.arange(16.0))

    raises_alike(program, ValueError if case == "unknown target" else NotImplementedError)
