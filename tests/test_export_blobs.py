"""meshax.export's blobs: run in a fresh process that lacks the function's code, rejected with a clear error when
foreign or damaged; pytree node registration, shardings over 8 devices and symbolic dimensions as in jax.export."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

import meshax
import meshax.export
import test_export
from differential import assert_matches
from meshax._src.export import wire
from meshax._src.tree.tree_util import tree_leaves as internal_leaves


def _program(L):
    """An MLP step over a pytree, with a scan, a cond and a closed-over constant."""
    table = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)

    def f(params, xs):
        def step(h, x):
            h = L.numpy.tanh(h @ params["w"] + x @ table)
            return h, L.lax.cond(h.sum() > 0, lambda v: v * 2, lambda v: -v, h.mean())
        h, ys = L.lax.scan(step, L.numpy.zeros(4), xs)
        return {"h": h, "ys": ys, "n": (xs > 0).sum()}

    params = {"w": np.eye(4, dtype=np.float32) * 0.5}
    return f, (params, np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3))


_FRESH = textwrap.dedent("""
    import collections
    import sys
    import numpy as np
    import meshax
    from meshax import export
    Point = collections.namedtuple("Point", "x y")  # the blob's namedtuple, registered under its serialized name
    export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")
    for name in sys.argv[1:]:
        exported = export.deserialize(bytearray(open(name + ".blob", "rb").read()))
        stored = np.load(name + ".in.npz")
        leaves = [stored[f"leaf{i}"] for i in range(len(stored.files))]
        leaves = [x if s is None else meshax.device_put(x, s) for x, s in zip(leaves, exported.in_shardings_jax())]
        args, kwargs = exported.in_tree.unflatten(leaves)
        out = meshax.tree_util.tree_leaves(exported.call(*args, **kwargs))
        np.savez(name + ".out.npz", **{f"leaf{i}": np.asarray(x) for i, x in enumerate(out)})
""")

FRESH_PROGRAMS = [test_export.mlp, test_export.scan_rnn, test_export.cond_program, test_export.while_program,
                  test_export.custom_vjp_program, test_export.random_program, test_export.typed_key_program,
                  test_export.linalg_program, test_export.shard_map_program, test_export.enum_params_program,
                  test_export.pytree_program, _program]


def test_blobs_run_in_a_fresh_process(tmp_path: Path) -> None:
    """The blobs, written here, run in a new process that has none of the functions' code: JAX's values."""
    names = []
    for program in FRESH_PROGRAMS:
        name = str(tmp_path / program.__name__)
        fun, args = program(meshax)
        (tmp_path / f"{program.__name__}.blob").write_bytes(bytes(meshax.export.export(meshax.jit(fun))(*args)
                                                                  .serialize()))
        leaves = internal_leaves(args)  # a key array's leaf is its uint32 data, as the exported in_tree says
        np.savez(name + ".in.npz", **{f"leaf{i}": np.asarray(x) for i, x in enumerate(leaves)})
        names.append(name)
    (tmp_path / "fresh.py").write_text(_FRESH)
    subprocess.run([sys.executable, str(tmp_path / "fresh.py"), *names], check=True, timeout=300,
                   env={**os.environ, "MESHAX_NUM_CPU_DEVICES": "8"}, cwd=tmp_path)
    for program, name in zip(FRESH_PROGRAMS, names):
        stored = np.load(name + ".out.npz")
        fun, args = program(jax)
        theirs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(fun)(*args))]
        ours = [stored[f"leaf{i}"] for i in range(len(stored.files))]
        assert_matches(ours, theirs, rtol=2e-5, atol=2e-6, check_weak=False)


_FRESH_SHARDED = textwrap.dedent("""
    import sys
    from meshax import export
    try:
        export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
    except ValueError as error:
        print(error)
""")


def test_blob_sharded_over_8_devices_in_a_fresh_one_device_process_raises(tmp_path: Path) -> None:
    mesh = meshax.make_mesh((8,), ("x",))
    sharding = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("x"))
    spec = meshax.ShapeDtypeStruct((8,), np.float32, sharding=sharding)
    (tmp_path / "f.blob").write_bytes(bytes(meshax.export.export(meshax.jit(lambda a: a * 2))(spec).serialize()))
    (tmp_path / "fresh.py").write_text(_FRESH_SHARDED)
    env = {**os.environ, "MESHAX_NUM_CPU_DEVICES": "1"}
    done = subprocess.run([sys.executable, str(tmp_path / "fresh.py"), str(tmp_path / "f.blob")], check=True,
                          timeout=180, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert "this job has no devices [1, 2, 3, 4, 5, 6, 7]" in done.stdout, done.stdout + done.stderr


def _blob() -> bytearray:
    fun, args = _program(meshax)
    return meshax.export.export(meshax.jit(fun))(*args).serialize()


def _resealed(header_edit) -> bytearray:
    """A blob whose header is edited by `header_edit` (a dict -> None), with a valid checksum again."""
    header, buffers = wire.unpack(_blob())
    header_edit(header)
    return wire.pack(header, [bytes(b) for b in buffers])


def _rename_first_primitive(header: dict) -> None:
    header["program"]["eqns"][0][0] = "no_such_primitive"


def _bad_dtype(header: dict) -> None:
    header["in_avals"][0]["dtype"] = {"dtype": "object"}


def _bad_kind(header: dict) -> None:
    header["program"]["eqns"][0][3] = {"axes": {"pickle": "cos\nsystem\n"}}


def _bad_variable(header: dict) -> None:
    header["program"]["outvars"][0] = 10 ** 6


@pytest.mark.parametrize("damage, message", [
    (lambda b: bytearray(b"garbage"), "not a serialized meshax Exported"),
    (lambda b: b[:20], "truncated"),
    (lambda b: b[:-7], "corrupt"),
    (lambda b: b[:40] + bytearray([b[40] ^ 0xFF]) + b[41:], "corrupt"),
    (lambda b: b[:len(wire.MAGIC)] + bytearray([9, 0, 0, 0]) + b[len(wire.MAGIC) + 4:], "format version 9"),
    (lambda b: "a string", "bytearray"),
    (lambda b: _resealed(_rename_first_primitive), "no_such_primitive"),
    (lambda b: _resealed(_bad_dtype), "object"),
    (lambda b: _resealed(_bad_kind), "'pickle'"),
    (lambda b: _resealed(_bad_variable), "undefined variable"),
], ids=["foreign", "truncated", "cut", "flipped", "version", "not_bytes", "primitive", "dtype", "kind", "variable"])
def test_foreign_or_damaged_blob_raises_a_clear_error(damage, message) -> None:
    with pytest.raises(ValueError, match=message):
        meshax.export.deserialize(damage(_blob()))


class Pair:
    def __init__(self, first, second, tag="t"):
        self.first, self.second, self.tag = first, second, tag


def _register_pair(L) -> None:
    L.tree_util.register_pytree_node(Pair, lambda p: ((p.first, p.second), p.tag),
                                     lambda tag, children: Pair(*children, tag))


for _L in (meshax, jax):
    _register_pair(_L)


class Unregistered(Pair):
    pass


for _L in (meshax, jax):
    _L.tree_util.register_pytree_node(Unregistered, lambda p: ((p.first, p.second), None),
                                      lambda _, children: Unregistered(*children))
    _L.export.register_pytree_node_serialization(Pair, serialized_name="test_export_blobs.Pair",
                                                 serialize_auxdata=lambda tag: tag.encode(),
                                                 deserialize_auxdata=lambda data: data.decode())


def _pair_fun(L):
    return lambda p: Pair(p.first * 2, p.second.sum(), p.tag + "!")


@pytest.mark.parametrize("L", [meshax, jax], ids=["meshax", "jax"])
def test_registered_custom_node_round_trips(L) -> None:
    if L is jax:
        pytest.importorskip("flatbuffers")
    x = np.arange(3, dtype=np.float32)
    exported = L.export.deserialize(L.export.export(L.jit(_pair_fun(L)))(Pair(x, x, "a")).serialize())
    assert str(exported.in_tree) == "PyTreeDef(((CustomNode(Pair[a], [*, *]),), {}))"
    out = exported.call(Pair(x, x, "a"))
    assert isinstance(out, Pair) and out.tag == "a!"
    np.testing.assert_array_equal(np.asarray(out.first), x * 2)


@pytest.mark.parametrize("tree", ["unregistered", "int_keys"])
def test_unserializable_trees_raise_as_jax(tree) -> None:
    x = np.ones(2, np.float32)
    arg = Unregistered(x, x) if tree == "unregistered" else {1: x}

    def run(L):
        exported = L.export.export(L.jit(lambda t: t))(arg)
        try:
            exported.serialize()
        except Exception as error:  # noqa: BLE001 - compared by class and message
            return type(error), str(error).split("`")[0].split(" Found")[0]
        return None

    ours = run(meshax)
    if ours is not None and _jax_can_serialize():
        assert ours == run(jax)
    assert ours is not None and ours[0] is (ValueError if tree == "unregistered" else TypeError)


def _jax_can_serialize() -> bool:
    try:
        import flatbuffers  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("call", ["duplicate_type", "duplicate_name", "not_namedtuple"])
def test_registration_errors_as_jax(call) -> None:
    class Fresh(tuple):
        pass

    def run(L):
        try:
            if call == "duplicate_type":
                L.export.register_pytree_node_serialization(Pair, serialized_name="other", serialize_auxdata=bytes,
                                                            deserialize_auxdata=bytes)
            elif call == "duplicate_name":
                L.export.register_pytree_node_serialization(Fresh, serialized_name="test_export_blobs.Pair",
                                                            serialize_auxdata=bytes, deserialize_auxdata=bytes)
            else:
                L.export.register_namedtuple_serialization(Fresh, serialized_name="fresh")
        except Exception as error:  # noqa: BLE001
            return type(error)
        return None

    assert run(meshax) is run(jax) is ValueError


def _mesh(L):
    return L.make_mesh((4, 2), ("x", "y"), axis_types=(L.sharding.AxisType.Auto,) * 2)


SPECS = [("x", "y"), ("x",), (None, "y"), (("x", "y"),), ("y", "x"), ()]


@pytest.mark.parametrize("spec", SPECS, ids=str)
@pytest.mark.parametrize("given_as", ["array", "shape_dtype_struct"])
def test_sharded_inputs_over_8_devices_match_jax(spec, given_as) -> None:
    data = np.arange(32, dtype=np.float32).reshape(8, 4)

    def run(L):
        mesh = _mesh(L)
        sharding = L.sharding.NamedSharding(mesh, L.sharding.PartitionSpec(*spec))
        a = L.device_put(data, sharding)
        spec_arg = a if given_as == "array" else L.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding)
        exported = L.export.export(L.jit(lambda a, b: (a * 2, (a @ b).sum(0))))(spec_arg, np.ones((4, 6), np.float32))
        if L is meshax or _jax_can_serialize():
            exported = L.export.deserialize(exported.serialize())
        out = exported.call(a, np.ones((4, 6), np.float32))
        shardings = [None if s is None else tuple(s.spec) for s in exported.in_shardings_jax(mesh)]
        return exported.nr_devices, shardings, exported.out_shardings_jax(mesh), out, tuple(out[0].sharding.spec)

    ours, theirs = run(meshax), run(jax)
    assert ours[:3] == theirs[:3]
    assert_matches(ours[3], theirs[3], check_weak=False)
    assert ours[4] == theirs[4]


def test_out_shardings_and_constraints_match_jax() -> None:
    data = np.arange(32, dtype=np.float32).reshape(8, 4)

    def run(L):
        mesh, P = _mesh(L), L.sharding.PartitionSpec
        s = L.sharding.NamedSharding(mesh, P("x", "y"))

        def f(a):
            b = L.lax.with_sharding_constraint(a + 1, L.sharding.NamedSharding(mesh, P("y")))
            return b * 2, a.sum(1)

        out_shardings = (L.sharding.NamedSharding(mesh, P(None, "x")), L.sharding.NamedSharding(mesh, P()))
        jitted = L.jit(f, out_shardings=out_shardings)
        exported = L.export.export(jitted)(L.ShapeDtypeStruct(data.shape, data.dtype, sharding=s))
        if L is meshax or _jax_can_serialize():
            exported = L.export.deserialize(exported.serialize())
        out = exported.call(L.device_put(data, s))
        specs = [tuple(s.spec) for s in exported.out_shardings_jax(mesh)]
        return exported.nr_devices, specs, out, [tuple(o.sharding.spec) for o in out]

    ours, theirs = run(meshax), run(jax)
    assert ours[:2] == theirs[:2]
    assert_matches(ours[2], theirs[2], check_weak=False)
    assert ours[3] == theirs[3]


@pytest.mark.parametrize("L", [meshax, jax], ids=["meshax", "jax"])
def test_sharded_export_called_on_one_device_raises(L) -> None:
    mesh = _mesh(L)
    a = L.device_put(np.ones((8, 4), np.float32), L.sharding.NamedSharding(mesh, L.sharding.PartitionSpec("x")))
    exported = L.export.export(L.jit(lambda a: a * 2))(a)
    with pytest.raises(ValueError, match="exported for 8 devices"):
        exported.call(np.ones((8, 4), np.float32))


def test_program_calling_an_exported_function_exports_again() -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def run(L):
        inner = L.export.export(L.jit(lambda v: L.numpy.sin(v) * 2))(x)
        outer = L.export.export(L.jit(lambda v: inner.call(v) + 1))(x)
        if L is meshax:
            outer = L.export.deserialize(outer.serialize())
        return outer.call(x)

    assert_matches(run(meshax), run(jax), check_weak=False)


# ---- symbolic dimensions ----

def _dims(L, text="b, 4", **kwargs):
    return L.export.symbolic_shape(text, **kwargs)


EXPRESSIONS = {
    "add": lambda b: b + 1, "radd": lambda b: 1 + b, "mul": lambda b: 2 * b, "square": lambda b: b * b,
    "sub": lambda b: b - 1, "rsub": lambda b: 3 - b, "poly": lambda b: b * b - 2 * b + 1,
    "product": lambda b: (b + 1) * (b - 1), "floordiv": lambda b: b // 2, "mod": lambda b: b % 3,
    "exact_div": lambda b: (4 * b) // 2, "neg": lambda b: -b, "affine": lambda b: 2 * b + 3,
}


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_symbolic_dimension_arithmetic_and_bounds_match_jax(name) -> None:
    def run(L):
        b = _dims(L)[0]
        value = EXPRESSIONS[name](b)
        return str(value), L.export.is_symbolic_dim(value), L.export.symbolic_dim_bounds(value)

    assert run(meshax) == run(jax)


@pytest.mark.parametrize("text, constraints", [
    ("b, 4", ()), ("(batch, 2*n)", ()), ("a, b", ("a >= 3", "a <= 10")), ("n, 3, mod(n, 2)", ()),
    ("m, floordiv(m, 4)", ("m >= 8",)), ("_, k", ()),
])
def test_symbolic_shape_matches_jax(text, constraints) -> None:
    def run(L):
        dims = L.export.symbolic_shape(text, constraints=constraints, like=(5, None) if "_" in text else None)
        return [str(d) for d in dims], [L.export.symbolic_dim_bounds(d) for d in dims]

    assert run(meshax) == run(jax)


@pytest.mark.parametrize("comparison", ["ge1", "gt0", "ge2", "lt0", "eq_self", "eq_other", "le_plus"])
def test_symbolic_comparisons_match_jax(comparison) -> None:
    def run(L):
        b, c = L.export.symbolic_shape("b, c")
        try:
            return {"ge1": lambda: b >= 1, "gt0": lambda: b > 0, "ge2": lambda: b >= 2, "lt0": lambda: b < 0,
                    "eq_self": lambda: b == b, "eq_other": lambda: b == c, "le_plus": lambda: b <= b + 1}[comparison]()
        except Exception as error:  # noqa: BLE001
            return type(error).__name__

    assert run(meshax) == run(jax)


@pytest.mark.parametrize("text", ["b,,", "b + ", "3.5", "f(b)"])
def test_bad_symbolic_shape_raises_value_error_as_jax(text) -> None:
    for L in (meshax, jax):
        with pytest.raises(ValueError):
            L.export.symbolic_shape(text)


def test_symbolic_args_specs_match_jax() -> None:
    x = np.ones((3, 4), np.float32)

    def run(L):
        specs = L.export.symbolic_args_specs((x, {"y": x}), ("b, 4", {"y": "b, _"}))
        return [(tuple(str(d) for d in s.shape), s.dtype) for s in L.tree_util.tree_leaves(specs)]

    assert run(meshax) == run(jax)


def test_export_with_symbolic_dimensions_is_not_implemented() -> None:
    specs = meshax.export.symbolic_args_specs((np.ones((3, 4), np.float32),), "b, 4")
    with pytest.raises(NotImplementedError, match="symbolic dimensions"):
        meshax.export.export(meshax.jit(lambda x: x * 2))(*specs)


def test_blob_header_is_json_with_a_checksum() -> None:
    blob = _blob()
    assert bytes(blob[:len(wire.MAGIC)]) == wire.MAGIC
    header, _ = wire.unpack(blob)
    assert json.loads(json.dumps(header)) == header and header["fun_name"] == "f"
    digest = bytes(blob[len(wire.MAGIC) + 12:len(wire.MAGIC) + 44])
    assert digest == hashlib.sha256(bytes(blob[len(wire.MAGIC) + 44:])).digest()


def _nodes(tree, path=()):
    yield path, tree
    children = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, child in children:
        yield from _nodes(child, path + (key,))


@pytest.mark.parametrize("seed", range(4))
def test_forged_headers_raise_value_error_or_load(seed) -> None:
    """Blobs whose header is edited at random (checksum made valid again): deserialize raises ValueError naming
    the problem, or (for an edit that keeps the program well typed) loads; it never fails in another way."""
    import copy
    import random

    header, buffers = wire.unpack(_blob())
    buffers = [bytes(b) for b in buffers]
    paths = [p for p, _ in _nodes(header)][1:]
    rng = random.Random(seed)
    replacements = [None, 0, -1, 10 ** 9, "x", [], {}, {"tuple": 3}, [1, 2], {"float": "zz"}, True, 2.5,
                    {"dtype": "float32"}, {"array": ["float32", [2], 99]}]
    for _ in range(100):
        edited = copy.deepcopy(header)
        path = rng.choice(paths)
        parent = edited
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = rng.choice(replacements)
        try:
            meshax.export.deserialize(wire.pack(edited, buffers))
        except ValueError:
            pass
