"""meshax.scipy.spatial.transform (Rotation, Slerp) against JAX 0.12: every constructor, conversion, method and
property, single and batched, eagerly and under jit; errors of the same class; grad and vmap."""
from __future__ import annotations

import jax
import jax.scipy.spatial.transform  # noqa: F401
import numpy as np
import pytest

import meshax
import meshax.scipy.spatial.transform  # noqa: F401
from differential import check_modes as _check_modes, raises_like_jax

TOL = {"rtol": 2e-5, "atol": 2e-5}
QUATS = {
    "single": np.random.default_rng(0).normal(size=(4,)).astype(np.float32),
    "batch": np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32),
    "edges": np.array([[0, 0, 0, 1], [1, 0, 0, 0], [0, 0, 0, -1], [0, 1, 0, 0], [0, 0, 1e-9, 1]], np.float32),
}


def _arrays(obj):
    """Rotation and Slerp results as plain arrays (the two libraries' classes differ as pytree nodes)."""
    name = type(obj).__name__
    if name == "Rotation":
        return obj.quat
    if name == "Slerp":
        return (obj.times, obj.timedelta, obj.rotations.quat, obj.rotvecs)
    if isinstance(obj, tuple):
        return tuple(_arrays(o) for o in obj)
    return obj


def check_modes(case, *args, **tolerances):
    """differential.check_modes on the case's results with rotations as arrays."""
    _check_modes(lambda L, *xs: _arrays(case(L, *xs)), *args, **tolerances)


def R(L):
    return L.scipy.spatial.transform.Rotation


CONVERSIONS = {
    "from_quat": lambda L, q: R(L).from_quat(q),
    "as_matrix": lambda L, q: R(L).from_quat(q).as_matrix(),
    "from_matrix": lambda L, q: R(L).from_matrix(R(L).from_quat(q).as_matrix()),
    "as_mrp": lambda L, q: R(L).from_quat(q).as_mrp(),
    "from_mrp": lambda L, q: R(L).from_mrp(R(L).from_quat(q).as_mrp()),
    "as_rotvec": lambda L, q: R(L).from_quat(q).as_rotvec(),
    "as_rotvec_degrees": lambda L, q: R(L).from_quat(q).as_rotvec(degrees=True),
    "from_rotvec": lambda L, q: R(L).from_rotvec(R(L).from_quat(q).as_rotvec()),
    "from_rotvec_degrees": lambda L, q: R(L).from_rotvec(R(L).from_quat(q).as_rotvec(True), degrees=True),
    "as_quat": lambda L, q: R(L).from_quat(q).as_quat(),
    "as_quat_canonical": lambda L, q: R(L).from_quat(q).as_quat(canonical=True),
    "as_quat_scalar_first": lambda L, q: R(L).from_quat(q).as_quat(scalar_first=True),
    "as_quat_both": lambda L, q: R(L).from_quat(q).as_quat(True, True),
    "inv": lambda L, q: R(L).from_quat(q).inv(),
    "magnitude": lambda L, q: R(L).from_quat(q).magnitude(),
    "mul": lambda L, q: R(L).from_quat(q) * R(L).from_quat(q[::-1]),
    "mul_inverse": lambda L, q: R(L).from_quat(q) * R(L).from_quat(q).inv(),
}


@pytest.mark.parametrize("quats", QUATS, ids=str)
@pytest.mark.parametrize("name", CONVERSIONS)
def test_conversions(quats, name):
    check_modes(CONVERSIONS[name], QUATS[quats], **TOL)


@pytest.mark.parametrize("quats", QUATS, ids=str)
@pytest.mark.parametrize("seq", ["xyz", "ZYX", "xyx", "ZXZ", "yzx", "XZY", "zyz", "YXY"])
@pytest.mark.parametrize("degrees", [False, True])
def test_euler(quats, seq, degrees):
    check_modes(lambda L, q: R(L).from_quat(q).as_euler(seq, degrees=degrees), QUATS[quats], **TOL)
    check_modes(lambda L, q: R(L).from_euler(seq, R(L).from_quat(q).as_euler(seq, degrees), degrees=degrees),
                QUATS[quats], **TOL)


@pytest.mark.parametrize("seq,angles", [("x", 0.3), ("xy", [0.3, 0.2]), ("XYZ", [[0.1, 0.2, 0.3], [1, 2, 3]]),
                                        ("zX", [[0.5, -1.0]]), ("ZX", [[0.5, -1.0]])], ids=str)
def test_from_euler_lengths(seq, angles):
    if seq == "zX":
        raises_like_jax(lambda L, a: R(L).from_euler(seq, a), np.asarray(angles, np.float32))
        return
    check_modes(lambda L, a: R(L).from_euler(seq, a), np.asarray(angles, np.float32), **TOL)


@pytest.mark.parametrize("quats", ["single", "batch"])
@pytest.mark.parametrize("inverse", [False, True])
def test_apply(quats, inverse):
    q = QUATS[quats]
    vectors = np.random.default_rng(2).normal(size=q.shape[:-1] + (3,)).astype(np.float32)
    check_modes(lambda L, r, v: R(L).from_quat(r).apply(v, inverse=inverse), q, vectors, **TOL)
    check_modes(lambda L, r, v: R(L).from_quat(r).apply(v, inverse=inverse), q, vectors[..., :1, :] if
                vectors.ndim > 1 else vectors, **TOL)


def test_batch_methods_and_properties():
    q = QUATS["batch"]
    check_modes(lambda L, r: R(L).from_quat(r)[1:3], q, **TOL)
    check_modes(lambda L, r: R(L).from_quat(r)[2], q, **TOL)
    check_modes(lambda L, r: R(L).from_quat(r).mean(), q, **TOL)
    check_modes(lambda L, r, w: R(L).from_quat(r).mean(w), q, np.arange(1.0, 6.0, dtype=np.float32), **TOL)
    check_modes(lambda L, a, b: R(L).concatenate([R(L).from_quat(a), R(L).from_quat(b)]), q, QUATS["edges"], **TOL)
    check_modes(lambda L: R(L).identity())
    check_modes(lambda L: R(L).identity(dtype=np.float32))
    for lib in (jax, meshax):
        assert len(R(lib).from_quat(q)) == 5 and not R(lib).from_quat(q).single
        assert R(lib).from_quat(QUATS["single"]).single


@pytest.mark.parametrize("call", [
    lambda L: R(L).from_quat(QUATS["single"])[0],
    lambda L: len(R(L).from_quat(QUATS["single"])),
    lambda L: R(L).from_euler("", [1.0]),
    lambda L: R(L).from_euler("xyzx", [1.0, 2.0, 3.0, 4.0]),
    lambda L: R(L).from_euler("xx", [1.0, 2.0]),
    lambda L: R(L).from_euler("xYz", [1.0, 2.0, 3.0]),
    lambda L: R(L).from_euler("abc", [1.0, 2.0, 3.0]),
    lambda L: R(L).from_quat(QUATS["batch"]).as_euler("xy"),
    lambda L: R(L).from_quat(QUATS["batch"]).as_euler("xxy"),
    lambda L: R(L).from_quat(QUATS["batch"]).as_euler("xYz"),
    lambda L: R(L).from_quat(QUATS["batch"]).mean(np.ones((5, 1))),
    lambda L: R(L).from_quat(QUATS["batch"]).mean(np.ones(4)),
    lambda L: R(L).identity(3),
    lambda L: R(L).random(None),
    lambda L: L.scipy.spatial.transform.Slerp.init([0.0], R(L).from_quat(QUATS["batch"][:1])),
    lambda L: L.scipy.spatial.transform.Slerp.init([0.0, 1.0], R(L).from_quat(QUATS["batch"])),
    lambda L: L.scipy.spatial.transform.Slerp.init([[0.0, 1.0]], R(L).from_quat(QUATS["batch"][:2])),
    lambda L: L.scipy.spatial.transform.Slerp.init([0.0, 1.0], QUATS["batch"][:2]),
    lambda L: L.scipy.spatial.transform.Slerp.init([0.0, 1.0], R(L).from_quat(QUATS["batch"][:2]))(np.ones((1, 1))),
])
def test_errors(call):
    raises_like_jax(call)


@pytest.mark.parametrize("times", [0.5, [0.0, 0.3, 1.7, 2.9, 3.0], [2.5]], ids=str)
def test_slerp(times):
    keys = QUATS["batch"][:4]
    key_times = np.array([0.0, 1.0, 2.5, 3.0], np.float32)

    def case(L, k, kt, t):
        slerp = L.scipy.spatial.transform.Slerp.init(kt, R(L).from_quat(k))
        return slerp, slerp(t)

    check_modes(case, keys, key_times, np.asarray(times, np.float32), **TOL)


def test_grad_and_vmap():
    q = QUATS["batch"]
    check_modes(lambda L, r: L.grad(lambda x: R(L).from_quat(x).as_euler("xyz").sum())(r), q, rtol=1e-4, atol=1e-4)
    check_modes(lambda L, r: L.grad(lambda x: R(L).from_rotvec(x).as_matrix().sum())(r[:, :3]), q,
                rtol=1e-4, atol=1e-4)
    check_modes(lambda L, r: L.vmap(lambda x: R(L).from_quat(x).as_rotvec())(r), q, **TOL)
    check_modes(lambda L, r: L.vmap(lambda x: R(L).from_quat(x).apply(x[:3]))(r), q, **TOL)
    check_modes(lambda L, r: L.vmap(lambda x: R(L).from_matrix(R(L).from_quat(x).as_matrix()).as_quat())(r), q,
                **TOL)
