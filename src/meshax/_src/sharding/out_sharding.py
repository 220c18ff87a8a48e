"""`out_sharding=` for functions that make arrays (jnp creation functions, random distributions), as JAX 0.10 has."""
from __future__ import annotations

import functools
from typing import Any, Callable


def accepts_out_sharding(fun: Callable[..., Any]) -> Callable[..., Any]:
    """`fun` with an `out_sharding=` keyword: a PartitionSpec (over the mesh in use) or a Sharding its result is
    laid out as."""

    @functools.wraps(fun)
    def wrapped(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
        result = fun(*args, **kwargs)
        if out_sharding is None:
            return result
        from ..transforms.sharding_in_types import reshard

        return reshard(result, out_sharding)

    return wrapped
