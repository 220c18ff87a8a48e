"""Vector quantization (as jax.scipy.cluster.vq)."""
from __future__ import annotations

from typing import Any

from .. import numpy as jnp
from ..numpy import _promote_inexact
from ..numpy import linalg as _linalg


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """Each observation's nearest code (index into code_book) and its Euclidean distance to it."""
    obs, code_book = _promote_inexact(jnp.asarray(obs), jnp.asarray(code_book))
    if obs.ndim != code_book.ndim:
        raise ValueError(f"Observation and code_book should have the same rank, got {obs.ndim} and "
                         f"{code_book.ndim}.")
    if obs.ndim == 1:
        obs, code_book = obs[..., None], code_book[..., None]
    if obs.ndim != 2:
        raise ValueError(f"ndim different than 1 or 2 are not supported, got {obs.ndim}.")
    if obs.shape[1] != code_book.shape[1]:
        raise TypeError(f"obs and code_book must have the same number of features, got shapes {obs.shape} and "
                        f"{code_book.shape}.")
    distances = _linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)
    codes = jnp.argmin(distances, axis=-1)
    return codes, jnp.take_along_axis(distances, codes[:, None], axis=1)[:, 0]
