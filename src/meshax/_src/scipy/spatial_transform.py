"""Rotations in 3 dimensions (as jax.scipy.spatial.transform): Rotation, stored as unit quaternions (x, y, z, w)
with any leading batch shape, and Slerp, spherical linear interpolation between key rotations. Every conversion
is written on whole (..., 4) arrays; the axis sequences of Euler angles are static."""
from __future__ import annotations

import re
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import numpy as jnp
from ..numpy import linalg as _linalg

_AXIS = {"x": 0, "y": 1, "z": 2}


def _norm(v: Any) -> Any:
    return jnp.sqrt(jnp.sum(v * v, axis=-1))


def _normalize(quat: Any) -> Any:
    return quat / _norm(quat)[..., None]


def _compose(p: Any, q: Any) -> Any:
    """The quaternion product p q (apply q, then p)."""
    pv, pw, qv, qw = p[..., :3], p[..., 3:], q[..., :3], q[..., 3:]
    vector = pw * qv + qw * pv + jnp.cross(pv, qv)
    scalar = pw * qw - jnp.sum(pv * qv, axis=-1, keepdims=True)
    return jnp.concatenate([vector, scalar], axis=-1)


def _check_seq(seq: str, lengths: Sequence[int], message: str) -> bool:
    """Whether the Euler axis sequence is extrinsic (lower case); raises for malformed sequences."""
    if len(seq) not in lengths:
        raise ValueError(message.format(seq))
    intrinsic = re.match(r"^[XYZ]{1,3}$", seq) is not None
    extrinsic = re.match(r"^[xyz]{1,3}$", seq) is not None
    if not (intrinsic or extrinsic):
        raise ValueError(f"Expected axes from `seq` to be from ['x', 'y', 'z'] or ['X', 'Y', 'Z'], got {seq}")
    if any(a == b for a, b in zip(seq, seq[1:])):
        raise ValueError(f"Expected consecutive axes to be different, got {seq}")
    return extrinsic


def _elementary(axis: int, angle: Any) -> Any:
    """Quaternions of rotations by `angle` (any shape) about the coordinate axis `axis`."""
    parts = [jnp.zeros_like(angle)] * 3 + [jnp.cos(angle / 2)]
    parts[axis] = jnp.sin(angle / 2)
    return jnp.stack(parts, axis=-1)


def _euler_from_quat(quat: Any, axes: list[int], extrinsic: bool, degrees: bool) -> Any:
    """Euler angles (..., 3) for the static axis sequence, by Bernardes and Viollet's direct method."""
    if not extrinsic:
        axes = axes[::-1]
    i, j, k = axes
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = (i - j) * (j - k) * (k - i) // 2
    w = quat[..., 3]
    if symmetric:
        a, b, c, d = w, quat[..., i], quat[..., j], quat[..., k] * sign
    else:
        a, b = w - quat[..., j], quat[..., i] + quat[..., k] * sign
        c, d = quat[..., j] + w, quat[..., k] * sign - quat[..., i]
    middle = 2 * jnp.arctan2(jnp.hypot(c, d), jnp.hypot(a, b))
    eps = 1e-7
    case = jnp.where(jnp.abs(middle) <= eps, 1, jnp.where(jnp.abs(middle - np.pi) <= eps, 2, 0))
    half_sum, half_diff = jnp.arctan2(b, a), jnp.arctan2(d, c)
    degenerate = jnp.where(case == 1, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))
    regular = case == 0
    if extrinsic:
        first = jnp.where(regular, half_sum - half_diff, degenerate)
        third = jnp.where(regular, half_sum + half_diff, jnp.zeros_like(half_sum))
    else:
        first = jnp.where(regular, half_sum + half_diff, degenerate)
        third = jnp.where(regular, half_sum - half_diff, jnp.zeros_like(half_sum))
    if not symmetric:
        if extrinsic:
            third = third * sign
        else:
            first = first * sign
        middle = middle - np.pi / 2
    angles = jnp.stack([first, middle, third], axis=-1)
    angles = (angles + np.pi) % (2 * np.pi) - np.pi
    return jnp.rad2deg(angles) if degrees else angles


def _from_matrix(matrix: Any) -> Any:
    """Quaternions of rotation matrices (..., 3, 3), from the largest of the diagonal and the trace."""
    m = matrix
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    decision = jnp.stack([m[..., 0, 0], m[..., 1, 1], m[..., 2, 2], trace], axis=-1)
    choice = jnp.argmax(decision, axis=-1)
    candidates = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        q = [None] * 4
        q[i] = 1 - trace + 2 * m[..., i, i]
        q[j] = m[..., j, i] + m[..., i, j]
        q[k] = m[..., k, i] + m[..., i, k]
        q[3] = m[..., k, j] - m[..., j, k]
        candidates.append(jnp.stack(q, axis=-1))
    candidates.append(jnp.stack([m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                                 m[..., 1, 0] - m[..., 0, 1], 1 + trace], axis=-1))
    quat = jnp.take_along_axis(jnp.stack(candidates, axis=-2), choice[..., None, None], axis=-2)[..., 0, :]
    return _normalize(quat)


def _as_matrix(quat: Any) -> Any:
    x, y, z, w = (quat[..., n] for n in range(4))
    rows = [[x * x - y * y - z * z + w * w, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), -x * x + y * y - z * z + w * w, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), -x * x - y * y + z * z + w * w]]
    return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def _as_rotvec(quat: Any, degrees: bool) -> Any:
    quat = jnp.where(quat[..., 3:] < 0, -quat, quat)
    angle = 2 * jnp.arctan2(_norm(quat[..., :3]), quat[..., 3])
    angle2 = angle * angle
    small = 2 + angle2 / 12 + 7 * angle2 * angle2 / 2880
    scale = jnp.where(angle <= 1e-3, small, angle / jnp.sin(angle / 2))
    if degrees:
        scale = jnp.rad2deg(scale)
    return scale[..., None] * quat[..., :3]


def _from_rotvec(rotvec: Any, degrees: bool) -> Any:
    if degrees:
        rotvec = jnp.deg2rad(rotvec)
    angle = _norm(rotvec)
    angle2 = angle * angle
    small = 0.5 - angle2 / 48 + angle2 * angle2 / 3840
    scale = jnp.where(angle <= 1e-3, small, jnp.sin(angle / 2) / angle)
    return jnp.concatenate([scale[..., None] * rotvec, jnp.cos(angle / 2)[..., None]], axis=-1)


def _canonical(quat: Any) -> Any:
    """Each quaternion or its negative: the one whose first nonzero entry in the order w, x, y, z is positive."""
    neg, zero = quat < 0, quat == 0
    flip = neg[..., 3] | (zero[..., 3] & (neg[..., 0] | (zero[..., 0] & (neg[..., 1] | (zero[..., 1] & neg[..., 2])))))
    return jnp.where(flip[..., None], -quat, quat)


class Rotation(NamedTuple):
    """Rotations in 3 dimensions, held as unit quaternions (x, y, z, w) of shape (4,) or (N, 4)."""
    quat: Any

    @classmethod
    def concatenate(cls, rotations: Sequence[Rotation]) -> Rotation:
        """The rotations of several Rotation objects as one."""
        return cls(jnp.concatenate([r.quat for r in rotations]))

    @classmethod
    def from_euler(cls, seq: str, angles: Any, degrees: bool = False) -> Rotation:
        """Rotations from Euler angles about 1 to 3 axes: 'xyz' extrinsic (fixed), 'XYZ' intrinsic (moving)."""
        extrinsic = _check_seq(seq, (1, 2, 3), "Expected axis specification to be a non-empty string of upto 3 "
                                               "characters, got {}")
        angles = jnp.atleast_1d(jnp.asarray(angles))
        if angles.shape[-1] != len(seq):
            raise ValueError(f"Expected the last dimension of angles to have {len(seq)} entries for seq={seq!r}, got "
                             f"shape {angles.shape}.")
        if degrees:
            angles = jnp.deg2rad(angles)
        result = None
        for n, axis in enumerate(seq.lower()):
            quat = _elementary(_AXIS[axis], angles[..., n])
            result = quat if result is None else (_compose(quat, result) if extrinsic else _compose(result, quat))
        return cls(result)

    @classmethod
    def from_matrix(cls, matrix: Any) -> Rotation:
        """Rotations from rotation matrices (3, 3) or (N, 3, 3)."""
        return cls(_from_matrix(jnp.asarray(matrix)))

    @classmethod
    def from_mrp(cls, mrp: Any) -> Rotation:
        """Rotations from modified Rodrigues parameters."""
        mrp = jnp.asarray(mrp)
        squared = jnp.sum(mrp * mrp, axis=-1, keepdims=True) + 1
        return cls(jnp.concatenate([2 * mrp[..., :3], 2 - squared], axis=-1) / squared)

    @classmethod
    def from_quat(cls, quat: Any) -> Rotation:
        """Rotations from quaternions (x, y, z, w), normalized."""
        return cls(_normalize(jnp.asarray(quat)))

    @classmethod
    def from_rotvec(cls, rotvec: Any, degrees: bool = False) -> Rotation:
        """Rotations from rotation vectors (axis times angle)."""
        return cls(_from_rotvec(jnp.asarray(rotvec), degrees))

    @classmethod
    def identity(cls, num: int | None = None, dtype: Any = float) -> Rotation:
        """The identity rotation (only a single one: num must be None, as in JAX)."""
        assert num is None, f"Rotation.identity supports only num=None, got num={num}."
        return cls(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=dtype))

    @classmethod
    def random(cls, random_key: Any, num: int | None = None) -> Rotation:
        """Not implemented, as in JAX."""
        raise NotImplementedError("Rotation.random is not implemented (as in JAX); build rotations with from_quat "
                                  "of normalized random normal quaternions.")

    def __getitem__(self, indexer: Any) -> Rotation:
        if self.single:
            raise TypeError("Single rotation is not subscriptable.")
        return Rotation(self.quat[indexer])

    def __len__(self) -> int:
        if self.single:
            raise TypeError("Single rotation has no len().")
        return self.quat.shape[0]

    def __mul__(self, other: Rotation) -> Rotation:  # type: ignore[override]
        """The composition: apply `other`, then self."""
        return Rotation.from_quat(_compose(self.quat, other.quat))

    def apply(self, vectors: Any, inverse: bool = False) -> Any:
        """The rotated vectors (by the inverse rotation if `inverse`)."""
        matrix = self.as_matrix()
        if inverse:
            matrix = jnp.swapaxes(matrix, -1, -2)
        return jnp.matmul(matrix, jnp.asarray(vectors)[..., None])[..., 0]

    def as_euler(self, seq: str, degrees: bool = False) -> Any:
        """Euler angles about the 3 axes of `seq` (extrinsic lower case, intrinsic upper case)."""
        extrinsic = _check_seq(seq, (3,), "Expected 3 axes, got {}.")
        return _euler_from_quat(self.quat, [_AXIS[a] for a in seq.lower()], extrinsic, degrees)

    def as_matrix(self) -> Any:
        """Rotation matrices (3, 3) or (N, 3, 3)."""
        return _as_matrix(self.quat)

    def as_mrp(self) -> Any:
        """Modified Rodrigues parameters (the shorter rotation)."""
        sign = jnp.where(self.quat[..., 3:] < 0, -1.0, 1.0)
        return sign * self.quat[..., :3] / (1.0 + sign * self.quat[..., 3:])

    def as_rotvec(self, degrees: bool = False) -> Any:
        """Rotation vectors: the axis times the angle in [0, pi] (degrees if asked)."""
        return _as_rotvec(self.quat, degrees)

    def as_quat(self, canonical: bool = False, scalar_first: bool = False) -> Any:
        """Quaternions (x, y, z, w), or (w, x, y, z) if `scalar_first`; `canonical` picks the sign with w >= 0."""
        quat = _canonical(self.quat) if canonical else self.quat
        return jnp.roll(quat, shift=1, axis=-1) if scalar_first else quat

    def inv(self) -> Rotation:
        """The inverse rotations."""
        return Rotation(self.quat * jnp.array([-1, -1, -1, 1], dtype=self.quat.dtype))

    def magnitude(self) -> Any:
        """The rotation angles in [0, pi]."""
        return 2.0 * jnp.arctan2(_norm(self.quat[..., :3]), jnp.abs(self.quat[..., 3]))

    def mean(self, weights: Any = None) -> Rotation:
        """The (weighted) mean rotation: the dominant eigenvector of the quaternions' weighted outer products."""
        w = (jnp.ones(self.quat.shape[0], dtype=self.quat.dtype) if weights is None
             else jnp.asarray(weights, dtype=self.quat.dtype))
        if w.ndim != 1:
            raise ValueError(f"Expected `weights` to be 1 dimensional, got shape {w.shape}.")
        if w.shape[0] != len(self):
            raise ValueError(f"Expected `weights` to have number of values equal to number of rotations, got "
                             f"{w.shape[0]} values and {len(self)} rotations.")
        k = jnp.dot(w[None, :] * self.quat.T, self.quat)
        return Rotation(_linalg.eigh(k)[1][:, -1])

    @property
    def single(self) -> bool:
        """Whether this holds one rotation (a quaternion of shape (4,))."""
        return self.quat.ndim == 1


class Slerp(NamedTuple):
    """Spherical linear interpolation between key rotations at increasing key times: call it on times."""
    times: Any
    timedelta: Any
    rotations: Rotation
    rotvecs: Any

    @classmethod
    def init(cls, times: Any, rotations: Rotation) -> Slerp:
        """The interpolator through `rotations` (at least 2) at the 1-D increasing `times`."""
        if not isinstance(rotations, Rotation):
            raise TypeError(f"`rotations` must be a `Rotation` instance, got {type(rotations).__name__}.")
        if rotations.single or len(rotations) == 1:
            raise ValueError("`rotations` must be a sequence of at least 2 rotations.")
        times = jnp.asarray(times, dtype=rotations.quat.dtype)
        if times.ndim != 1:
            raise ValueError(f"Expected times to be specified in a 1 dimensional array, got {times.ndim} dimensions.")
        if times.shape[0] != len(rotations):
            raise ValueError(f"Expected number of rotations to be equal to number of timestamps given, got "
                             f"{len(rotations)} rotations and {times.shape[0]} timestamps.")
        starts = Rotation(rotations.quat[:-1])
        steps = (starts.inv() * Rotation(rotations.quat[1:])).as_rotvec()
        return cls(times=times, timedelta=jnp.diff(times), rotations=starts, rotvecs=steps)

    def __call__(self, times: Any) -> Rotation:  # type: ignore[override]
        """The interpolated rotations at `times` (a scalar gives a single rotation)."""
        at = jnp.asarray(times, dtype=self.times.dtype)
        if at.ndim > 1:
            raise ValueError(f"`times` must be at most 1-dimensional, got shape {at.shape}.")
        single = at.ndim == 0
        at = jnp.atleast_1d(at)
        index = jnp.maximum(jnp.searchsorted(self.times, at) - 1, 0)
        alpha = (at - self.times[index]) / self.timedelta[index]
        result = self.rotations[index] * Rotation.from_rotvec(self.rotvecs[index] * alpha[:, None])
        return result[0] if single else result
