"""jnp.vectorize: a function on core-shaped arrays applied over broadcast leading dimensions, by vmap."""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Collection

import numpy as np

_DIMS = r"\w+(?:,\w+)*"
_ARGUMENT = rf"\((?:{_DIMS})?\)"
_SIGNATURE = re.compile(rf"^{_ARGUMENT}(?:,{_ARGUMENT})*->{_ARGUMENT}(?:,{_ARGUMENT})*$")


def _parse_signature(signature: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """'(m,n),(n)->(m)' -> ([('m','n'), ('n',)], [('m',)])."""
    compact = signature.replace(" ", "")
    if not _SIGNATURE.match(compact):
        raise ValueError(f"not a valid gufunc signature: {signature!r}")
    inputs, outputs = compact.split("->")
    parse = lambda side: [tuple(filter(None, group.split(","))) for group in re.findall(r"\((.*?)\)", side)]
    return parse(inputs), parse(outputs)


def vectorize(pyfunc: Callable[..., Any], *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """`pyfunc` (written for arrays of its core shapes, scalars without a signature) mapped over the broadcast
    leading dimensions of its arguments; positional arguments in `excluded` are passed through unchanged."""
    from meshax._src.numpy import asarray, broadcast_shapes, broadcast_to, expand_dims
    from meshax._src.vmap_api import vmap

    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError(f"excluded must contain only integers and strings, got {excluded!r}")
    in_core, out_core = _parse_signature(signature) if signature is not None else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        excluded_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
        mapped_kwargs = {k: v for k, v in kwargs.items() if k not in excluded}
        positions = [i for i in range(len(args)) if i not in excluded]
        arrays = [asarray(args[i]) for i in positions] + [asarray(v) for v in mapped_kwargs.values()]
        cores = in_core if in_core is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"wrong number of positional arguments: expected {len(cores)}, got {len(arrays)}")
        sizes: dict[str, int] = {}
        batch_shapes = []
        for array, core in zip(arrays, cores):
            if array.ndim < len(core):
                raise ValueError(f"input with shape {array.shape} does not have enough dimensions for its core "
                                 f"dimensions {core} in signature {signature!r}")
            core_shape = array.shape[array.ndim - len(core):]
            for name, size in zip(core, core_shape):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs {sizes[name]}")
            batch_shapes.append(array.shape[:array.ndim - len(core)])
        batch = broadcast_shapes(*batch_shapes) if batch_shapes else ()
        arrays = [broadcast_to(a, batch + a.shape[len(b):]) for a, b in zip(arrays, batch_shapes)]

        def core_call(*flat: Any) -> Any:
            call_args = list(args)
            for i, value in zip(positions, flat):
                call_args[i] = value
            rest = dict(zip(mapped_kwargs, flat[len(positions):]))
            out = pyfunc(*call_args, **rest, **excluded_kwargs)
            if out_core is not None:
                _check_outputs(out, out_core, sizes, signature)
            return out

        function = core_call
        for _ in batch:
            function = vmap(function)
        return function(*arrays)

    return wrapped


def _check_outputs(out: Any, out_core: list[tuple[str, ...]], sizes: dict[str, int], signature: str) -> None:
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(out_core):
        raise ValueError(f"wrong number of outputs from the function: expected {len(out_core)} for signature "
                         f"{signature!r}, got {len(outs)}")
    for value, core in zip(outs, out_core):
        shape = np.shape(value)
        if len(shape) != len(core):
            raise ValueError(f"output shape {shape} does not match the core dimensions {core} of signature "
                             f"{signature!r}")
        for name, size in zip(core, shape):
            if sizes.setdefault(name, size) != size:
                raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs {sizes[name]}")
