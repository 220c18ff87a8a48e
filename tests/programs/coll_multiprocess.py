"""Every collective inside shard_map, on meshes whose groups span processes, checked against NumPy.

Every process draws the same cases from one seed: meshes over all 8 global devices (make_mesh in
four shapes, and the same shapes over a shuffled device order, so that a collective's group
mixes devices of several processes in no particular order), then for each mesh and each collective
(psum, pmean, pmax, pmin, with NaN and inf too, all_gather, psum_scatter, ppermute, all_to_all,
axis_index) random axis names, dtype and in_specs. The body returns its result with a new leading
dimension sharded over all mesh axes, so the output keeps every device's block apart; each block is
compared with the value computed by NumPy from the global input and the device's mesh coordinates,
through process_allgather and through this process's own shards.

Started by `meshax launch` (or by hand: program ADDRESS ID N); needs 8 devices in all. Optional
arguments: `only=name,name` or `skip=name,name` (collective kinds, see KINDS) to run part of the cases.
Prints `collectives ok: N cases` (the launcher adds `[p] `); a wrong result raises, naming the case.

ppermute's axis names are passed in mesh axis order (JAX 0.12 raises RuntimeError for another order;
axis_index, all_gather, psum_scatter and all_to_all follow the order passed), and pmax/pmin propagate
NaN as NumPy does (JAX on CPU drops NaN in pmax/pmin; meshax follows NumPy, see fault_nan_reduce.py).

The case list and the NumPy reference do not need meshax (`cases()`, `expected_blocks()`), so that
they can also be checked against JAX in one process.
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field

import numpy as np

SEED = 20240611
MESH_SHAPES = [((8,), ("i",)), ((4, 2), ("a", "b")), ((2, 4), ("a", "b")), ((2, 2, 2), ("x", "y", "z"))]

# kind -> how many cases per mesh
KINDS = {
    "psum": 3, "pmean": 1, "pmax": 3, "pmin": 3,
    "psum_nan": 2, "pmax_nan": 2, "pmin_nan": 2,
    "all_gather": 8, "psum_scatter": 4, "ppermute": 4, "all_to_all": 4, "axis_index": 1,
}


@dataclass
class MeshDesc:
    shape: tuple[int, ...]
    names: tuple[str, ...]
    perm: list[int] | None  # None: make_mesh; else Mesh(np.array(devices)[perm].reshape(shape), names)

    def __str__(self):
        how = "make_mesh" if self.perm is None else f"perm={self.perm}"
        return f"{'x'.join(map(str, self.shape))}{self.names} {how}"


@dataclass
class Case:
    number: int
    mesh: int                # index into the mesh list
    kind: str                # key of KINDS
    collective: str          # the lax function
    axes: object             # axis_name as passed: a str or a tuple of names
    dtype: str
    in_spec: tuple           # PartitionSpec entries of the input
    out_names: tuple         # the leading output dimension is sharded over these (all mesh axes)
    block: tuple             # each device's input block shape
    params: dict = field(default_factory=dict)
    jit: bool = True

    def describe(self, meshes):
        params = "".join(f" {k}={v}" for k, v in self.params.items())
        return (f"case {self.number}: mesh {meshes[self.mesh]}, {self.collective}{params} axes={self.axes!r} "
                f"dtype={self.dtype} in_spec=P{self.in_spec} out_spec=P({self.out_names},) block={self.block} "
                f"{'jit' if self.jit else 'no jit'}")


def axes_tuple(axes):
    return (axes,) if isinstance(axes, str) else tuple(axes)


def mesh_descs(rng) -> list[MeshDesc]:
    descs = [MeshDesc(shape, names, None) for shape, names in MESH_SHAPES]
    for shape, names in MESH_SHAPES:
        descs.append(MeshDesc(shape, names, [int(i) for i in rng.permutation(8)]))
    return descs


def random_axes(rng, names):
    k = int(rng.integers(1, len(names) + 1))
    axes = tuple(str(a) for a in rng.permutation(names)[:k])
    if len(axes) == 1 and rng.random() < 0.5:
        return axes[0]
    return axes


def random_spec(rng, names, ndim):
    """Each mesh axis goes to one dimension or to none, in random order within a dimension."""
    per_dim = [[] for _ in range(ndim)]
    for name in rng.permutation(names):
        where = int(rng.integers(0, ndim + 1))
        if where < ndim:
            per_dim[where].append(str(name))
    entries = []
    for axes in per_dim:
        if not axes:
            entries.append(None)
        elif len(axes) == 1 and rng.random() < 0.7:
            entries.append(axes[0])
        else:
            entries.append(tuple(axes))
    while entries and entries[-1] is None and rng.random() < 0.5:
        entries.pop()  # a shorter spec: trailing dimensions unsharded
    return tuple(entries)


def cases() -> tuple[list[MeshDesc], list[Case]]:
    rng = np.random.default_rng(SEED)
    meshes = mesh_descs(rng)
    out: list[Case] = []
    for m, desc in enumerate(meshes):
        sizes = dict(zip(desc.names, desc.shape))
        for kind, count in KINDS.items():
            for trial in range(count):
                axes = random_axes(rng, desc.names)
                n = int(np.prod([sizes[a] for a in axes_tuple(axes)]))
                dtype = ["float32", "int32"][(trial + m) % 2]
                params: dict = {}
                collective = kind.replace("_nan", "")
                if kind in ("pmax", "pmin") and trial == 1 and m % 2 == 0:
                    dtype = "bool"
                if kind.endswith("_nan"):
                    dtype = "float32"
                    params["nan"] = True
                if kind == "pmean":
                    dtype = "float32" if m % 3 else "int32"
                block = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
                if kind == "all_gather":
                    params["axis"] = (trial // 2) % 2
                    params["tiled"] = bool(trial % 2)
                elif kind == "psum_scatter":
                    tiled = bool(trial % 2)
                    dim = int(rng.integers(0, 2))
                    params["scatter_dimension"] = dim
                    params["tiled"] = tiled
                    block = list(block)
                    block[dim] = n * (int(rng.integers(1, 3)) if tiled else 1)
                    block = tuple(block)
                elif kind == "ppermute":
                    targets = [int(t) for t in rng.permutation(n)]
                    pairs = list(enumerate(targets))
                    if trial in (1, 3) and n > 1:
                        pairs = pairs[: int(rng.integers(1, n))]   # partial: some receive nothing
                    elif trial == 2:
                        pairs = [(s, (s + 1) % n) for s in range(n)]  # a ring
                        pairs = [pairs[i] for i in rng.permutation(len(pairs))]
                    params["perm"] = pairs
                    if not isinstance(axes, str):  # JAX 0.12 refuses ppermute axis names out of the mesh's order
                        axes = tuple(sorted(axes, key=desc.names.index))
                elif kind == "all_to_all":
                    ndim = 2 if trial < 2 else 3
                    tiled = trial == 0 if trial < 2 else (trial + m) % 2 == 0
                    split = int(rng.integers(0, ndim))
                    concat = int(rng.integers(0, ndim))
                    params.update(split_axis=split, concat_axis=concat, tiled=tiled)
                    block = [int(rng.integers(1, 3)) for _ in range(ndim)]
                    block[split] = n * (int(rng.integers(1, 3)) if tiled else 1)
                    block = tuple(block)
                elif kind == "axis_index":
                    dtype = "float32"
                spec = random_spec(rng, desc.names, len(block))
                out_names = tuple(str(a) for a in rng.permutation(desc.names))
                jit = bool(rng.random() < 0.75)
                out.append(Case(len(out), m, kind, collective, axes, dtype, spec, out_names, block, params, jit))
    return meshes, out


# ---- NumPy reference ------------------------------------------------------------------------------------------


def spec_axes(entry):
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def linear(coords, names, sizes, axes):
    """Row-major index of a device along `axes` (the first axis the slowest)."""
    index = 0
    for a in axes:
        index = index * sizes[a] + coords[names.index(a)]
    return index


def global_shape(case, desc):
    sizes = dict(zip(desc.names, desc.shape))
    shape = list(case.block)
    for d, entry in enumerate(case.in_spec):
        shape[d] *= int(np.prod([sizes[a] for a in spec_axes(entry)]))
    return tuple(shape)


def global_value(case, desc):
    rng = np.random.default_rng((SEED, case.number))
    shape = global_shape(case, desc)
    if case.dtype == "bool":
        return rng.random(shape) < 0.5
    if case.dtype == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    value = rng.standard_normal(shape).astype(np.float32)
    if case.params.get("nan"):
        special = rng.random(shape)
        value[special < 0.08] = np.nan
        value[(special >= 0.08) & (special < 0.14)] = np.inf
        value[(special >= 0.14) & (special < 0.20)] = -np.inf
    return value


def block_of(value, case, desc, coords):
    sizes = dict(zip(desc.names, desc.shape))
    index = []
    for d, size in enumerate(case.block):
        entry = case.in_spec[d] if d < len(case.in_spec) else None
        k = linear(coords, desc.names, sizes, spec_axes(entry))
        index.append(slice(k * size, (k + 1) * size))
    return value[tuple(index)]


def reference(case, xs, m):
    """The result of device m of a group whose blocks are xs (in group order)."""
    p = case.params
    n = len(xs)
    c = case.collective
    if c in ("psum", "pmean", "psum_scatter"):
        total = np.sum(np.stack(xs), axis=0).astype(xs[0].dtype)
        if c == "pmean":
            return (np.sum(np.stack(xs), axis=0) / n).astype(np.float32)
        if c == "psum":
            return total
        dim = p["scatter_dimension"]
        if p["tiled"]:
            return np.split(total, n, axis=dim)[m]
        return np.take(total, m, axis=dim)
    if c == "pmax":
        return np.max(np.stack(xs), axis=0)
    if c == "pmin":
        return np.min(np.stack(xs), axis=0)
    if c == "all_gather":
        return (np.concatenate if p["tiled"] else np.stack)(xs, axis=p["axis"])
    if c == "ppermute":
        source = {t: s for s, t in p["perm"]}
        return xs[source[m]].copy() if m in source else np.zeros_like(xs[0])
    if c == "all_to_all":
        split, concat = p["split_axis"], p["concat_axis"]
        if p["tiled"]:
            return np.concatenate([np.split(x, n, axis=split)[m] for x in xs], axis=concat)
        return np.stack([np.take(x, m, axis=split) for x in xs], axis=concat)
    if c == "axis_index":
        return np.array([m, n], np.int32)
    raise ValueError(c)


def expected_blocks(case, desc, device_coords, value):
    """{device: expected output block} for every device of the mesh; device_coords: {device: coords}."""
    with np.errstate(invalid="ignore"):  # inf - inf in the NaN cases
        return _expected_blocks(case, desc, device_coords, value)


def _expected_blocks(case, desc, device_coords, value):
    sizes = dict(zip(desc.names, desc.shape))
    axes = axes_tuple(case.axes)
    if case.collective == "ppermute":
        axes = tuple(sorted(axes, key=desc.names.index))  # as JAX, ppermute numbers devices in mesh axis order
    others = [i for i, a in enumerate(desc.names) if a not in axes]
    groups: dict = {}
    for device, coords in device_coords.items():
        key = tuple(coords[i] for i in others)
        groups.setdefault(key, []).append((linear(coords, desc.names, sizes, axes), device))
    out = {}
    for members in groups.values():
        members.sort(key=lambda t: t[0])
        assert [k for k, _ in members] == list(range(len(members)))
        xs = [block_of(value, case, desc, device_coords[d]) for _, d in members]
        for k, device in members:
            out[device] = reference(case, xs, k)
    return out


def output_row(case, desc, coords):
    return linear(coords, desc.names, dict(zip(desc.names, desc.shape)), case.out_names)


def body(case, lax, jnp):
    """The shard_map body: the collective's result with a new leading dimension of size 1."""
    p = case.params
    axes = case.axes
    c = case.collective

    def run(x):
        if c in ("psum", "pmean", "pmax", "pmin"):
            y = getattr(lax, c)(x, axes)
        elif c == "all_gather":
            y = lax.all_gather(x, axes, axis=p["axis"], tiled=p["tiled"])
        elif c == "psum_scatter":
            y = lax.psum_scatter(x, axes, scatter_dimension=p["scatter_dimension"], tiled=p["tiled"])
        elif c == "ppermute":
            y = lax.ppermute(x, axes, perm=p["perm"])
        elif c == "all_to_all":
            y = lax.all_to_all(x, axes, p["split_axis"], p["concat_axis"], tiled=p["tiled"])
        elif c == "axis_index":
            y = jnp.stack([lax.axis_index(axes), lax.psum(1, axes)]).astype(jnp.int32)
        else:
            raise ValueError(c)
        return jnp.expand_dims(y, 0)

    return run


def compare(what, got, want):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True, err_msg=what)
        assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN in other places"
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# ---- the program --------------------------------------------------------------------------------------------------


def main(argv):
    import meshax
    import meshax.numpy as jnp
    from arr_common import init
    from meshax.experimental.multihost_utils import process_allgather
    from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

    only = skip = None
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "only":
            only = set(value.split(","))
        elif key == "skip":
            skip = set(value.split(","))
        elif ":" not in arg and not arg.isdigit():
            raise SystemExit(f"unknown argument {arg!r}")
    for names in (only or set()) | (skip or set()):
        assert names in KINDS, names

    init()
    assert meshax.device_count() == 8, meshax.device_count()
    here = meshax.process_index()
    devices = meshax.devices()
    descs, all_cases = cases()
    meshes = []
    for desc in descs:
        if desc.perm is None:
            meshes.append(meshax.make_mesh(desc.shape, desc.names))
        else:
            meshes.append(Mesh(np.array(devices, dtype=object)[desc.perm].reshape(desc.shape), desc.names))
    for mesh, desc in zip(meshes, descs):
        assert tuple(mesh.axis_names) == desc.names and mesh.devices.shape == desc.shape
        assert len({d.process_index for d in mesh.devices.flat}) == meshax.process_count()

    done = 0
    for case in all_cases:
        if (only is not None and case.kind not in only) or (skip is not None and case.kind in skip):
            continue
        desc, mesh = descs[case.mesh], meshes[case.mesh]
        name = case.describe(descs)
        coords = {d: tuple(int(i) for i in c) for c, d in zip(itertools.product(*map(range, desc.shape)),
                                                                 mesh.devices.flat)}
        value = global_value(case, desc)
        want = expected_blocks(case, desc, coords, value)
        try:
            x = meshax.device_put(value, NamedSharding(mesh, P(*case.in_spec)))
            f = meshax.shard_map(body(case, meshax.lax, jnp), mesh=mesh, in_specs=P(*case.in_spec),
                                 out_specs=P(case.out_names))
            result = (meshax.jit(f) if case.jit else f)(x)
            gathered = process_allgather(result, tiled=True)
            shards = [(s.device, np.asarray(s.data)) for s in result.addressable_shards]
        except Exception as e:
            raise RuntimeError(f"[{here}] {name}: raised {type(e).__name__}: {e}") from e
        try:
            first = next(iter(want.values()))
            assert gathered.shape == (8, *first.shape), f"global shape {gathered.shape}"
            for device, block in want.items():
                compare(f"device {device} (coords {coords[device]})", gathered[output_row(case, desc, coords[device])],
                        block)
            mine = {d for d in mesh.devices.flat if d.process_index == here}
            assert {d for d, _ in shards} == mine, f"addressable shards on {[d for d, _ in shards]}, expected {mine}"
            for device, data in shards:
                compare(f"addressable shard of device {device} (coords {coords[device]})", data, want[device][None])
        except AssertionError as e:
            raise AssertionError(f"[{here}] collective gave a wrong result: {name}\n{e}") from None
        done += 1
    print(f"collectives ok: {done} cases", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
