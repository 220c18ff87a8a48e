"""meshax.checkpoint in a real job (started by `meshax launch`): ckpt_job.py MODE DIR [STEP].

save      save expected(STEP) sharded over this job's devices to DIR, then restore it onto other layouts
restore   restore DIR (saved by meshax on any layout) onto this job's layouts and check every shard
restore-orbax  the same for a checkpoint that tests/programs/ckpt_orbax.py wrote with Orbax
crash     CheckpointManager(DIR): commit step 1, then the last process is SIGKILLed while writing step 2
resume    after `crash`: step 1 is the latest and restorable, step 2 is refused, the next saves clean up
missing   process 1 never calls save() and waits in another barrier: the job fails naming both barriers
disagree  processes passing different paths, trees, host values or steps, or one unable to save: every process
          raises naming the difference and the processes, nothing is written, and agreeing calls go on working
force-crash  save DIR/ckpt (step 1), then process 0 dies inside save(force=True) of step 2 between its renames
force-resume after `force-crash`: restore gives step 1; save(force=True) of step 3 replaces it
restore-split  restore DIR/ckpt (damaged by the test) onto Mesh((n,)) P('d'), whose row blocks split stored chunks
Every process prints `CHECK <name>` for each check it passed.
"""
import json
import os
import signal
import sys

import numpy as np

import meshax
from ckpt_common import assert_same, check_shards, expected, leaves_with_names, say
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
MODE, DIR = sys.argv[1], sys.argv[2]
STEP = int(sys.argv[3]) if len(sys.argv) > 3 else 1
devices = meshax.devices()
n = len(devices)
here = meshax.process_index()
ckpt = meshax.checkpoint


def ok(name: str) -> None:
    say(f"CHECK {name}")


class ChunkFiles:
    """Records the chunk files (`<root>/<leaf>/c/...`) this process opens for writing and for reading."""

    def __init__(self, root: str) -> None:
        self.root, self.opened, self.written = os.path.abspath(root), [], []

    def __enter__(self) -> "ChunkFiles":
        self.real = os.open

        def recording_open(path, flags, *args, **kwargs):
            path = os.path.abspath(os.fspath(path))
            relative = os.path.relpath(path, self.root).split(os.sep)
            writing = bool(flags & (os.O_WRONLY | os.O_RDWR))
            # <leaf>/c/i/j, or <leaf>/c if 0-d; directories (opened to fsync them) are not chunks
            if path.startswith(self.root + os.sep) and "c" in relative[1:] and not os.path.isdir(path):
                at = relative.index("c", 1)
                (self.written if writing else self.opened).append(
                    (relative[at - 1], tuple(int(i) for i in relative[at + 1:])))
            return self.real(path, flags, *args, **kwargs)

        os.open = recording_open
        return self

    def __exit__(self, *_) -> None:
        os.open = self.real


def chunk_indices(box, chunks):
    """Grid indices of the chunks that `box` touches."""
    ranges = [range(a // c, (b - 1) // c + 1) for (a, b), c in zip(box, chunks)]
    return {tuple(r[i] for r, i in zip(ranges, idx)) for idx in np.ndindex(*[len(r) for r in ranges])}


def expected_writes(tree) -> set:
    """(leaf, chunk index) this process must write: shards whose replica set's first mesh device is here,
    host leaves on process 0."""
    out = set()
    for name, value in leaves_with_names(tree):
        if isinstance(value, meshax.Array):
            order = {d: i for i, d in enumerate(value.sharding.mesh.devices.flat)}
            shard_shape = value.sharding.shard_shape(value.shape)
            firsts = {}
            for device, box in value.sharding.device_boxes(value.shape).items():
                if box not in firsts or order[device] < order[firsts[box]]:
                    firsts[box] = device
            out |= {(name, tuple(a // max(c, 1) for (a, _), c in zip(box, shard_shape)))
                    for box, d in firsts.items() if d.process_index == here and all(b > a for a, b in box)}
        elif value is not None and here == 0:
            out.add((name, (0,) * np.ndim(value)))
    return out


def check_reads(path: str, target, opened) -> None:
    """The chunk files this process opened are exactly those its own devices need (no process reads everything)."""
    needed = set()
    for name, t in leaves_with_names(target):
        if t is None:
            continue
        meta = json.load(open(os.path.join(path, name, "zarr.json")))
        chunks, shape = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]), tuple(meta["shape"])
        sharding = t.sharding if isinstance(t, meshax.ShapeDtypeStruct) else None
        boxes = [tuple((0, n) for n in shape)] if sharding is None else [  # host NumPy targets: all of it
            box for device, box in sharding.device_boxes(shape).items() if device.process_index == here]
        for box in boxes:
            if all(b > a for a, b in box):
                needed |= {(name, i) for i in chunk_indices(box, chunks)}
    extra, unread = set(opened) - needed, needed - set(opened)
    assert not extra, f"process {here} read chunks its devices do not need: {sorted(extra)}"
    assert not unread, f"process {here} did not open chunk files it needs (read another way?): {sorted(unread)}"


def save_layout():
    """Each leaf's sharding for saving: 2-D splits, an uneven split (10 over n/2 devices), replicas."""
    mesh = meshax.make_mesh((2, n // 2), ("x", "y"))
    s = lambda *spec: NamedSharding(mesh, P(*spec))
    return {"params": [{"w": s("x", "y"), "b": s("y")}, {"w": s(None, "y"), "b": s()}],
            "opt": {"count": s(), "mu": (s("y", None),)}, "key": s()}


def other_layouts():
    """Targets unlike the saved layout: a transposed mesh, a subset of 3 devices, and one device."""
    flipped = meshax.make_mesh((n // 2, 2), ("y", "x"))
    subset = meshax.make_mesh((3,), ("s",), devices=[devices[1], devices[-1], devices[n // 2]])
    return {
        "flipped": lambda name, shape: NamedSharding(flipped, P(*(["x", "y"][: len(shape)])[::-1])),
        "subset": lambda name, shape: NamedSharding(subset, P("s") if shape else P()),
        "one_device": lambda name, shape: NamedSharding(meshax.make_mesh((1,), ("o",), devices=[devices[-1]]), P()),
    }


def put(values: dict) -> dict:
    layout = save_layout()
    tree = dict(values)
    tree["params"] = [{k: meshax.device_put(v, layout["params"][i][k]) for k, v in layer.items()}
                      for i, layer in enumerate(values["params"])]
    tree["opt"] = {"count": meshax.device_put(values["opt"]["count"], layout["opt"]["count"]),
                   "mu": (meshax.device_put(values["opt"]["mu"][0], layout["opt"]["mu"][0]),)}
    tree["key"] = meshax.device_put(meshax.random.PRNGKey(STEP), layout["key"])
    return tree


def target_tree(want: dict, make) -> dict:
    """`want`'s structure with ShapeDtypeStruct(sharding=make(...)) for array leaves, NumPy kept for host ones."""
    def leaf(name, value):
        if value is None or name in ("host", "scalar"):
            return value
        value = np.asarray(value)
        return meshax.ShapeDtypeStruct(value.shape, value.dtype, sharding=make(name, value.shape))

    return meshax.tree_util.tree_map_with_path(
        lambda path, v: leaf(".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path), v),
        want, is_leaf=lambda x: x is None)


def check_restored(tag: str, got: dict, want: dict) -> None:
    for (name, g), (_, w) in zip(leaves_with_names(got), leaves_with_names(want)):
        if w is None:
            assert g is None, f"{tag} {name}: {g!r} is not None"
        elif isinstance(g, meshax.Array):
            check_shards(f"{tag} {name}", g, np.asarray(w))
        else:
            assert_same(f"{tag} {name}", g, w)
    ok(tag)


def restore_everywhere(path: str, want: dict) -> None:
    for tag, make in other_layouts().items():
        target = target_tree(want, make)
        with ChunkFiles(path) as files:
            got = ckpt.restore(path, target)
        if tag == "subset" and MODE != "restore-orbax":  # meshax's own chunk files
            check_reads(path, target, files.opened)  # e.g. a process without a device of the subset reads nothing
            ok("reads only its chunks")
        check_restored(f"restore {tag}", got, want)
    shardings = target_tree(want, lambda name, shape: NamedSharding(meshax.make_mesh((n,), ("d",)),
                                                                    P("d") if shape else P()))
    shardings = meshax.tree_util.tree_map(lambda t: t.sharding if isinstance(t, meshax.ShapeDtypeStruct) else t,
                                          shardings, is_leaf=lambda x: x is None)
    check_restored("restore shardings", ckpt.restore(path, shardings), want)
    host = ckpt.restore(path)  # target None: NumPy values, sequences as lists
    flat = dict(leaves_with_names(host))
    for name, w in leaves_with_names(want):
        if w is not None:
            assert_same(f"host {name}", flat[name], np.asarray(w))
    assert isinstance(host["scalar"], float) and host["none"] is None, host
    ok("restore host")


if MODE == "save":
    want = expected(STEP)
    path = os.path.join(DIR, "ckpt")
    tree = put(want)
    check_restored("saved", tree, want)
    with ChunkFiles(path + ".meshax-checkpoint-tmp") as files:
        ckpt.save(path, tree)
    assert set(files.written) == expected_writes(tree), (sorted(files.written), sorted(expected_writes(tree)))
    ok("writes only its shards")
    assert sorted(os.listdir(DIR)) == ["ckpt"], os.listdir(DIR)
    ok("committed")
    same = ckpt.restore(path, tree)  # the arrays themselves as target: their own layout
    for (name, a), (_, b) in zip(leaves_with_names(same), leaves_with_names(tree)):
        if isinstance(b, meshax.Array):
            assert a.sharding == b.sharding, (name, a.sharding, b.sharding)
    check_restored("restore same", same, want)
    restore_everywhere(path, want)
elif MODE in ("restore", "restore-orbax"):
    want = expected(STEP)
    if MODE == "restore-orbax":  # Orbax's tree also holds a typed key, jax.random.key(STEP): its uint32 data
        want["typed_key"] = np.array([0, STEP], np.uint32)
    restore_everywhere(os.path.join(DIR, "ckpt"), want)
elif MODE == "crash":
    manager = ckpt.CheckpointManager(DIR, max_to_keep=2)
    manager.save(1, put(expected(1)))
    assert manager.all_steps() == [1], manager.all_steps()
    ok("step 1 committed")
    if here == meshax.process_count() - 1:
        from meshax._src.checkpoint import zarr_io

        write_chunk = zarr_io.write_chunk

        def write_then_die(*args, **kwargs):
            write_chunk(*args, **kwargs)
            say("DYING mid-save")
            os.kill(os.getpid(), signal.SIGKILL)

        zarr_io.write_chunk = write_then_die
    STEP = 2
    manager.save(2, put(expected(2)))
    raise SystemExit("the save of step 2 should not have completed")
elif MODE == "resume":
    manager = ckpt.CheckpointManager(DIR, max_to_keep=2)
    assert manager.latest_step() == 1 and manager.all_steps() == [1], manager.all_steps()
    ok("latest is 1")
    try:
        ckpt.restore(os.path.join(DIR, "2", "default"))
        raise AssertionError("restored an uncommitted checkpoint")
    except FileNotFoundError:
        ok("uncommitted refused")
    check_restored("resume step 1", manager.restore(1, put(expected(1))), expected(1))
    for step in (2, 3):
        STEP = step
        manager.save(step, put(expected(step)))
    assert manager.all_steps() == [2, 3], manager.all_steps()
    assert sorted(os.listdir(DIR)) == ["2", "3"], os.listdir(DIR)  # the partial step 2 and step 1 are gone
    ok("partial cleaned, kept 2")
    check_restored("latest 3", manager.restore(None, put(expected(3))), expected(3))
    STEP = 4
    handle = ckpt.async_save(os.path.join(DIR, "async"), put(expected(4)))
    handle.wait()
    check_restored("async", ckpt.restore(os.path.join(DIR, "async"), put(expected(4))), expected(4))
elif MODE == "disagree":
    last = meshax.process_count() - 1

    def fails(tag: str, call, *needles: str) -> None:
        try:
            call()
        except (ValueError, TypeError) as error:
            for needle in needles:
                assert needle in str(error), (tag, needle, str(error))
            assert not [name for name in os.listdir(DIR) if name != "run"], os.listdir(DIR)  # nothing written
            ok(tag)
            return
        raise AssertionError(f"{tag}: no error")

    tree = put(expected(1))
    other = os.path.join(DIR, "other")
    fails("path", lambda: ckpt.save(other if here == last else os.path.join(DIR, "ckpt"), tree),
          f"processes {list(range(last))} '{os.path.join(DIR, 'ckpt')}', process {last} '{other}'")
    shrunk = dict(tree, params=[dict(tree["params"][0], w=tree["params"][0]["w"][:, :9]), tree["params"][1]])
    fails("tree", lambda: ckpt.save(os.path.join(DIR, "ckpt"), shrunk if here == last else tree),
          "leaf 'params.0.w'", "float32[16, 12]", "float32[16, 9]", f"process {last}")
    fails("host value", lambda: ckpt.save(os.path.join(DIR, "ckpt"), dict(tree, scalar=float(here))),
          "leaf 'scalar'", "different values", "process 0 and process 1")
    fails("one cannot", lambda: ckpt.save(os.path.join(DIR, "ckpt"), dict(tree, none="text") if here == 1 else tree),
          "leaf 'none' is a str" if here == 1 else "process 1 failed (process 1: TypeError: leaf 'none' is a str")
    manager = ckpt.CheckpointManager(os.path.join(DIR, "run"))
    for step in (1, 2):
        STEP = step
        assert manager.save(step, put(expected(step))) is True
    assert manager.save(1, tree) is False and manager.all_steps() == [1, 2]
    ok("old step refused")
    asked = 1 if here == last else 2
    fails("restore steps", lambda: manager.restore(asked, put(expected(asked))),
          f"processes {list(range(last))} 2, process {last} 1")
    check_restored("agreeing restore", manager.restore(None, put(expected(2))), expected(2))
elif MODE == "force-crash":
    path = os.path.join(DIR, "ckpt")
    ckpt.save(path, put(expected(1)))
    ok("step 1 saved")
    if here == 0:
        rename = os.rename

        def rename_then_die(source, target):
            if source.endswith(".meshax-checkpoint-tmp"):  # the old one is aside, the new one not yet in place
                say("DYING between the renames")
                os.kill(os.getpid(), signal.SIGKILL)
            rename(source, target)

        os.rename = rename_then_die
    STEP = 2
    ckpt.save(path, put(expected(2)), force=True)
    raise SystemExit("the save of step 2 should not have completed")
elif MODE == "force-resume":
    path = os.path.join(DIR, "ckpt")
    check_restored("restore step 1", ckpt.restore(path, put(expected(1))), expected(1))
    STEP = 3
    ckpt.save(path, put(expected(3)), force=True)
    assert sorted(os.listdir(DIR)) == ["ckpt"], os.listdir(DIR)
    check_restored("replaced by step 3", ckpt.restore(path, put(expected(3))), expected(3))
elif MODE == "restore-split":
    want = expected(STEP)
    target = target_tree(want, lambda name, shape: NamedSharding(meshax.make_mesh((n,), ("d",)),
                                                                 P("d") if shape else P()))
    try:
        check_restored("restore split intact", ckpt.restore(os.path.join(DIR, "ckpt"), target), want)
    except ValueError as error:
        say(f"CHECK corrupt {error}")
elif MODE == "missing":
    tree = put(expected(1))
    if here == 1:
        say("not calling save()")
    else:
        ckpt.save(os.path.join(DIR, "ckpt"), tree, timeout=60)
        ok("save returned although process 1 never called it")
    meshax.experimental.multihost_utils.sync_global_devices("after the failed save")
else:
    raise SystemExit(f"unknown mode {MODE}")
