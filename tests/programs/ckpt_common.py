"""Shared by the ckpt_* programs: the pytree they save (NumPy values of a step) and the checks of what comes back.

Importing this module imports neither meshax nor JAX, so the Orbax programs (under JAX) use it too.
"""
import sys

import numpy as np

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = np.dtype(np.float16)


def expected(step: int) -> dict:
    """The values saved at `step`: floats, bfloat16, ints, a raw PRNG key, a NumPy leaf, a scalar and a None."""
    rng = np.random.default_rng(step)
    return {
        "params": [
            {"w": rng.standard_normal((16, 12)).astype(np.float32), "b": (np.arange(12) / 8 + step).astype(BF16)},
            {"w": rng.standard_normal((12, 10)).astype(np.float32), "b": np.full(10, step, np.float32)},
        ],
        "opt": {"count": np.int32(step), "mu": (rng.standard_normal((16, 12)).astype(np.float32),)},
        "key": np.array([0, step], np.uint32),  # PRNGKey(step)
        "none": None,
        "host": np.arange(12, dtype=np.int8).reshape(3, 4) * step,
        "scalar": 2.5 * step,
    }


REFUSAL_STEPS = (5, 6, 7, 3, 7, 6, 8)  # saved in turn by both CheckpointManagers: which saves do they refuse?


def leaves_with_names(tree, prefix=""):
    """[(dotted name, leaf)] of a tree of dicts, lists and tuples (None leaves included)."""
    if isinstance(tree, dict):
        return [p for k in sorted(tree) for p in leaves_with_names(tree[k], f"{prefix}{k}.")]
    if isinstance(tree, (list, tuple)):
        return [p for i, v in enumerate(tree) for p in leaves_with_names(v, f"{prefix}{i}.")]
    return [(prefix[:-1], tree)]


def assert_same(name: str, got, want) -> None:
    """`got` (a host value, or one shard) equals `want` exactly, dtype included."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got.view(np.uint8) if got.dtype == BF16 else got,
                          want.view(np.uint8) if want.dtype == BF16 else want), f"{name}: values differ"


def check_shards(name: str, array, want, sharding=None) -> None:
    """Every addressable shard of a (meshax or JAX) array equals the same block of `want`."""
    if sharding is not None:
        assert array.sharding == sharding, f"{name}: sharding {array.sharding} != {sharding}"
    assert tuple(array.shape) == want.shape, f"{name}: shape {array.shape} != {want.shape}"
    for shard in array.addressable_shards:
        assert_same(f"{name}{shard.index}", np.asarray(shard.data), np.asarray(want)[shard.index])


def say(*lines: str) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()
