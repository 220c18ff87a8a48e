"""jnp.vectorize: a function of core-shaped arrays applied over broadcast leading ("loop") dimensions with vmap,
following NumPy's generalized-ufunc signatures such as "(n),(n)->()" (as jax.numpy.vectorize)."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable

import numpy as np

from ..numpy.shape_ops import broadcast_to
from ..numpy.promotion import _as_array
from .vmap import vmap

__all__ = ["vectorize"]

_DIMS = r"\((?:\w+(?:,\s*\w+)*)?\)"
_SIGNATURE = re.compile(rf"^\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*->\s*{_DIMS}(?:\s*,\s*{_DIMS})*\s*$")


def _parse(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    if not _SIGNATURE.match(signature):
        raise ValueError(f"not a valid gufunc signature: {signature!r} (expected e.g. '(n),(n)->()').")

    def groups(side: str) -> list[tuple[str, ...]]:
        return [tuple(d for d in re.split(r"\s*,\s*", g) if d) for g in re.findall(r"\(([^)]*)\)", side)]

    inputs, outputs = signature.split("->")
    return groups(inputs), groups(outputs)


def vectorize(pyfunc: Callable[..., Any], *, excluded: Any = frozenset(), signature: str | None = None) -> Callable:
    """`pyfunc` applied over the broadcast loop dimensions of its arguments (their dimensions before the core
    ones `signature` names; all of them without a signature). Arguments named in `excluded` (positions or
    keywords) are passed through unchanged."""
    in_core, out_core = _parse(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mapped_positions = [i for i in range(len(args)) if i not in excluded]
        fixed_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_names = [k for k in kwargs if k not in excluded]
        values = [_as_array(args[i]) for i in mapped_positions] + [_as_array(kwargs[k]) for k in mapped_names]
        cores = in_core if in_core is not None else [()] * len(values)
        if len(cores) != len(values):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(cores)} inputs, but {len(values)} "
                            "arguments were given (excluded ones not counted).")
        sizes: dict[str, int] = {}
        loops = []
        for value, core in zip(values, cores):
            if value.ndim < len(core):
                raise ValueError(f"vectorize: an input of shape {value.shape} has fewer dimensions than its core "
                                 f"dimensions {core} in {signature!r}.")
            for name, n in zip(core, value.shape[value.ndim - len(core):]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(f"vectorize: inconsistent size for core dimension {name!r}: {sizes[name]} vs "
                                     f"{n}.")
            loops.append(value.shape[:value.ndim - len(core)])
        loop_shape = np.broadcast_shapes(*loops) if loops else ()
        values = [broadcast_to(value, loop_shape + tuple(value.shape[len(loop):])) for value, loop in zip(values, loops)]

        def core_call(*core_values: Any) -> Any:
            full = list(args)
            for i, v in zip(mapped_positions, core_values):
                full[i] = v
            named = dict(fixed_kwargs, **dict(zip(mapped_names, core_values[len(mapped_positions):])))
            return pyfunc(*full, **named)

        call = core_call
        for _ in loop_shape:
            call = vmap(call)
        result = call(*values)
        _check_outputs(result, out_core, len(loop_shape), signature)
        return result

    return wrapped


def _check_outputs(result: Any, out_core: list[tuple[str, ...]] | None, loop_rank: int, signature: str | None) -> None:
    if out_core is None:
        return
    outputs = result if isinstance(result, tuple) and len(out_core) != 1 else (result,)
    if len(outputs) != len(out_core):
        raise ValueError(f"vectorize: the function returned {len(outputs)} outputs, but the signature {signature!r} "
                         f"has {len(out_core)}.")
    for out, core in zip(outputs, out_core):
        if np.ndim(out) - loop_rank != len(core):
            raise ValueError(f"vectorize: an output has {np.ndim(out) - loop_rank} core dimensions, but the "
                             f"signature {signature!r} says {len(core)}.")
