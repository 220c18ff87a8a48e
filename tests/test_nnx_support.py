"""What flax NNX needs of JAX, in meshax, against real JAX: the names it imports (`jax.extend.core.Effect`,
`jax.experimental.hijax`, `jax._src.state.types.AbstractRef`, `jax._src.tree_util._registry`,
`tree_util.register_static`/`KeyPath`), `jax.typeof` of typed keys, `out_sharding=jax.typeof(x).sharding`,
NamedSharding over the abstract mesh in use, `are_all_axes_*`, and NNX programs (sharding annotations on Auto
and Explicit meshes) that print JAX's numbers under `python -m meshax.as_jax`. At the end:
what nnx.Conv/ConvTranspose, nnx.remat over Dropout and nnx.shard_map need."""
from __future__ import annotations

import typing

import jax
import numpy as np
import pytest

import meshax
import meshax.experimental.hijax as hijax
from meshax.extend.core import Effect, Effects, no_effects

from multiprocess import PYTHON, REPO, child_env, collect, start

pytest.importorskip("flax")
MODES = ("eager", "jit")


def _modes(lib, fun):
    """`fun` as run eagerly and under `lib.jit`."""
    return {"eager": fun, "jit": lib.jit(fun)}


# ---- jax.extend.core effects and jax.experimental.hijax: flax's Variable module defines its types with them ---------

def test_effect_types_are_subclassable_like_jax():
    import jax.extend.core as jcore

    for lib_effect, lib_no_effects in ((Effect, no_effects), (jcore.Effect, jcore.no_effects)):
        class VariableEffect(lib_effect):
            pass

        a, b = VariableEffect(), VariableEffect()
        assert a == a and a != b and len({a, b}) == 2
        assert isinstance(lib_no_effects, frozenset) and not lib_no_effects
    assert typing.get_origin(Effects) is typing.get_origin(jcore.Effects)


def test_hijax_has_the_names_flax_defines_its_variable_with():
    import jax.experimental.hijax as jax_hijax
    import jax.extend.core as jcore

    used = ["AbstractValue", "HiPrim", "HiType", "Zero", "aval_method", "aval_property",  # JAX 0.12's, as flax uses
            "control_flow_allowed_effects", "instantiate_zeros", "is_undefined_primal", "register_hitype"]
    for lib in (jax_hijax, hijax):
        assert all(hasattr(lib, name) for name in used), [n for n in used if not hasattr(lib, n)]

        class MyEffect(Effect if lib is hijax else jcore.Effect):
            pass

        lib.control_flow_allowed_effects.add_type(MyEffect)
        assert lib.control_flow_allowed_effects.contains(MyEffect())

        class NewThing(lib.HiPrim):
            def __init__(self):
                self.in_avals, self.out_aval, self.params = (), (), {}
                super().__init__()

        class AbstractThing(lib.HiType):
            method = lib.aval_method(len)
            prop = lib.aval_property(fget=len)

        assert isinstance(NewThing(), lib.HiPrim)
        lib.register_hitype(type("Thing", (), {}), lambda thing: AbstractThing())


def test_binding_a_hijax_primitive_says_meshax_lacks_high_level_types():
    prim = hijax.HiPrimitive("new_variable")
    with pytest.raises(NotImplementedError, match="'new_variable'.*flax_hijax_variable"):
        prim.bind(meshax.numpy.ones(2))


# ---- pytrees: register_static, KeyPath ----------------------------------------------------------------------------

def _static_class(lib):
    @lib.tree_util.register_static
    class Scale:
        def __init__(self, value: float) -> None:
            self.value = value

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Scale) and other.value == self.value

        def __hash__(self) -> int:
            return hash(self.value)

    return Scale


@pytest.mark.parametrize("mode", MODES)
def test_register_static_makes_a_leafless_node_as_jax(mode):
    results = []
    for lib in (meshax, jax):
        Scale = _static_class(lib)
        tree = {"s": Scale(3.0), "x": lib.numpy.arange(3.0)}
        leaves, treedef = lib.tree_util.tree_flatten(tree)
        assert len(leaves) == 1 and treedef.num_leaves == 1
        assert lib.tree_util.tree_structure(tree) == lib.tree_util.tree_structure({"s": Scale(3.0), "x": 0})
        assert lib.tree_util.tree_structure(tree) != lib.tree_util.tree_structure({"s": Scale(2.0), "x": 0})
        assert lib.tree_util.tree_unflatten(treedef, leaves)["s"] == Scale(3.0)
        assert [str(lib.tree_util.keystr(p)) for p, _ in lib.tree_util.tree_leaves_with_path(tree)] == ["['x']"]
        fun = _modes(lib, lambda t: t["x"] * t["s"].value)[mode]
        results.append(np.asarray(fun(tree)))
    np.testing.assert_array_equal(*results)


def test_key_path_types_as_jax():
    for lib in (meshax, jax):
        assert typing.get_origin(lib.tree_util.KeyPath) is tuple
        assert isinstance(lib.tree_util.KeyEntry, typing.TypeVar)


# ---- jax.typeof of typed PRNG keys (flax asks it of every Variable's leaves) -----------------------------------------

@pytest.mark.parametrize("mode", ("eager", "jit", "vmap"))
def test_typeof_a_key_array_is_its_key_type(mode):
    found = []
    for lib in (meshax, jax):
        keys = lib.random.split(lib.random.key(0), 3)
        probe = {"eager": lambda f, k: f(k), "jit": lambda f, k: lib.jit(f)(k),
                 "vmap": lambda f, k: lib.vmap(f)(k)}[mode]
        types = []
        probe(lambda k: types.append((str(lib.typeof(k)), repr(lib.typeof(k)), str(lib.typeof(k).dtype),
                                      lib.typeof(k).shape, lib.typeof(k).weak_type)) or k, keys)
        found.append(types)
    assert found[0] == found[1]
    assert found[0][0][0] == ("key<fry>[]" if mode == "vmap" else "key<fry>[3]")


# ---- out_sharding=jax.typeof(x).sharding (nnx.Dropout passes it to random.bernoulli) --------------------------------

def _spec(sharding):
    """A sharding's spec without trailing None entries (P() and P(None, None) lay out alike), or None."""
    spec = list(getattr(sharding, "spec", None) or ())
    while spec and spec[-1] is None:
        spec.pop()
    return tuple(spec)


def _dropout_mask(lib, axis_type):
    x = lib.numpy.ones((4, 2))
    key = lib.random.key(0)
    mask = lambda k, x: lib.random.bernoulli(k, 0.5, (4, 2), out_sharding=lib.typeof(x).sharding)  # noqa: E731
    if axis_type is None:
        return [(np.asarray(m), None) for m in (mask(key, x), lib.jit(mask)(key, x))]
    mesh = lib.make_mesh((2, 4), ("data", "model"), axis_types=(axis_type(lib),) * 2)
    with lib.set_mesh(mesh):
        x = lib.device_put(x, lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("data", None)))
        return [(np.asarray(m), _spec(m.sharding)) for m in (mask(key, x), lib.jit(mask)(key, x))]


@pytest.mark.parametrize("axis_type", [None, lambda lib: lib.sharding.AxisType.Auto,
                                       lambda lib: lib.sharding.AxisType.Explicit], ids=["no-mesh", "auto", "explicit"])
def test_out_sharding_of_a_types_sharding(axis_type):
    ours, theirs = _dropout_mask(meshax, axis_type), _dropout_mask(jax, axis_type)
    for (a, spec_a), (b, spec_b) in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
        assert spec_a == spec_b


# ---- NamedSharding over the abstract mesh in use (flax's Variables are sharded with one) ----------------------------

@pytest.mark.parametrize("kind", ["Auto", "Explicit"])
def test_named_sharding_over_the_abstract_mesh_in_use(kind):
    results = []
    for lib in (meshax, jax):
        axis_type = getattr(lib.sharding.AxisType, kind)
        mesh = lib.make_mesh((2, 4), ("data", "model"), axis_types=(axis_type, axis_type))
        with lib.set_mesh(mesh):
            abstract = lib.sharding.get_abstract_mesh()
            sharding = lib.sharding.NamedSharding(abstract, lib.sharding.PartitionSpec(None, "model"))
            x = lib.numpy.arange(32.0).reshape(4, 8)
            place = lib.sharding.reshard if kind == "Explicit" else lib.lax.with_sharding_constraint
            eager = place(x, sharding)
            jitted = lib.jit(lambda x: place(x * 2, sharding))(x)
            results.append([(np.asarray(y), _spec(y.sharding), y.sharding.mesh.axis_names) for y in (eager, jitted)])
    for (a, spec_a, names_a), (b, spec_b, names_b) in zip(*results):
        np.testing.assert_array_equal(a, b)
        assert (spec_a, names_a) == (spec_b, names_b) == ((None, "model"), ("data", "model"))


def test_named_sharding_over_an_abstract_mesh_needs_that_mesh_in_use():
    abstract = meshax.sharding.AbstractMesh((2, 4), ("data", "model"))
    with pytest.raises(ValueError, match="set_mesh"):
        meshax.sharding.NamedSharding(abstract, meshax.sharding.PartitionSpec("data"))
    with meshax.set_mesh(meshax.make_mesh((4, 2), ("data", "model"))):
        with pytest.raises(ValueError, match="set_mesh"):  # the mesh in use has other axis sizes
            meshax.sharding.NamedSharding(abstract, meshax.sharding.PartitionSpec("data"))


@pytest.mark.parametrize("types", [("Auto", "Auto"), ("Explicit", "Explicit"), ("Auto", "Explicit")])
def test_are_all_axes_of_a_type(types):
    found = []
    for lib in (meshax, jax):
        mesh = lib.make_mesh((2, 4), ("a", "b"), axis_types=tuple(getattr(lib.sharding.AxisType, t) for t in types))
        with lib.set_mesh(mesh):
            abstract = lib.sharding.get_abstract_mesh()
        found.append([(m.are_all_axes_auto, m.are_all_axes_explicit, m.are_all_axes_manual) for m in (mesh, abstract)])
    assert found[0] == found[1]


# ---- under the alias: the private modules flax imports, and NNX programs -----------------------------------------

PRIVATE_NAMES = """
import collections, jax, jax.numpy as jnp, jax.experimental.checkify
from jax._src.state.types import AbstractRef
from jax._src.tree_util import _registry
from jax._src import checkify
from jax.extend.core import Effect
from jax.experimental import hijax
ref = jax.new_ref(jnp.ones(2))
print("ref type", isinstance(jax.typeof(ref), AbstractRef), isinstance(jax.typeof(jnp.ones(2)), AbstractRef))
print("registry", [t in _registry for t in (tuple, list, dict, type(None), collections.OrderedDict, int)])
print("key is a leaf", type(jax.random.key(0)) in _registry, type(jnp.ones(2)) in _registry)
public = jax.experimental.checkify
print("checkify", checkify.user_checks == public.user_checks, checkify.checkify is public.checkify)
"""


def _run_both(args: list[str], devices: int = 8, timeout: float = 180) -> tuple[str, str]:
    procs = [start([PYTHON, "-m", "meshax.as_jax", *args], child_env(devices)),
             start([PYTHON, *args], child_env(devices, JAX_PLATFORMS="cpu"))]
    ours, theirs = collect(procs, timeout)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.returncode == 0, ours.stderr[-3000:]
    return ours.stdout, theirs.stdout


def test_private_modules_flax_imports_answer_as_jax():
    ours, theirs = _run_both(["-c", PRIVATE_NAMES], devices=1)
    assert ours == theirs
    assert "ref type True False" in ours


@pytest.mark.parametrize("axis_type", ["Auto", "Explicit"])
def test_nnx_sharding_annotations_print_jax_numbers(axis_type):
    from test_ecosystem import assert_same_report

    program = str(REPO / "tests" / "ecosystem_programs" / "flax_nnx_sharding.py")
    ours, theirs = _run_both([program, axis_type])
    assert "step 2 loss" in ours
    assert_same_report(ours, theirs)


# ---- what nnx.Conv, nnx.ConvTranspose, nnx.remat over Dropout and nnx.shard_map need ----

@pytest.mark.parametrize("mode", MODES)
def test_conv_general_dilated_takes_out_sharding(mode):
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    rhs = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    results = [np.asarray(_modes(lib, lambda a, b: lib.lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                                                                  out_sharding=None))[mode](lhs, rhs))
               for lib in (meshax, jax)]
    np.testing.assert_allclose(*results, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_conv_transpose_defaults_to_channels_last(mode):
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    rhs = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    results = [np.asarray(_modes(lib, lambda a, b: lib.lax.conv_transpose(a, b, (2, 2), "SAME"))[mode](lhs, rhs))
               for lib in (meshax, jax)]
    np.testing.assert_allclose(*results, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_grad_through_checkpoint_with_an_integer_output(mode):
    """nnx.remat of a module holding Dropout returns its integer RNG counter: its tangent is a symbolic zero."""
    def loss(lib, x, n):
        y, m = lib.checkpoint(lambda x, n: (x * 2.0, n + 1))(x, n)
        return lib.numpy.sum(y) + m.astype(np.float32)

    args = (np.ones(3, np.float32), np.int32(2))
    results = [np.asarray(_modes(lib, lib.grad(lambda x, n: loss(lib, x, n)))[mode](*args)) for lib in (meshax, jax)]
    np.testing.assert_array_equal(*results)


@pytest.mark.parametrize("mode", MODES)
def test_shard_map_with_empty_axis_names_maps_every_axis(mode):
    """nnx.shard_map passes axis_names=frozenset() when none are given."""
    results = []
    for lib in (meshax, jax):
        mesh = lib.make_mesh((2, 4), ("a", "b"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        total = lib.shard_map(lambda x: lib.lax.psum(x, ("a", "b")), mesh=mesh,
                              in_specs=lib.sharding.PartitionSpec(("a", "b")), out_specs=lib.sharding.PartitionSpec(),
                              axis_names=frozenset())
        results.append(np.asarray(_modes(lib, total)[mode](np.arange(8.0, dtype=np.float32))))
    np.testing.assert_array_equal(*results)
