"""jax.stages: a jitted call's stages, `jit(f).trace(*args)` -> Traced -> `.lower()` -> Lowered -> `.compile()`.

meshax has no compiler: all three hold the same traced program (a jaxpr), which meshax evaluates
with NumPy. `Lowered.as_text()` and `compiler_ir()` give that jaxpr's text (there is no StableHLO),
and a Compiled runs it on arguments of the types it was traced for.
"""
from __future__ import annotations

from typing import Any

from ..core.core import ShapedArray
from ..core.jaxpr import ClosedJaxpr, Jaxpr
from ..arrays.formats import Format, row_major
from ..runtime.devices import default_device
from ..sharding.mesh import current_mesh
from ..sharding.shardings import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from ..tree.tree_util import tree_flatten, tree_unflatten


class ArgInfo:
    """One argument's type as the program was traced for it, and whether it is donated."""

    def __init__(self, aval: ShapedArray, donated: bool) -> None:
        self._aval = aval
        self.donated = donated

    shape = property(lambda self: self._aval.shape)
    dtype = property(lambda self: self._aval.dtype)

    def __repr__(self) -> str:
        return f"ArgInfo(_aval={self._aval!r}, donated={self.donated})"


class _Stage:
    """What every stage knows: the jitted function, the call's cache key and its traced program."""

    def __init__(self, jitted: Any, key: tuple) -> None:
        self._jitted = jitted
        self._key = key
        signature, (program, consts, out_structure) = key
        self._program, self._consts, self.out_tree = program, consts, out_structure
        self.in_tree = signature[0]
        self.fun_name = getattr(jitted.fun, "__name__", "fun")

    @property
    def in_avals(self) -> Any:
        return tree_unflatten(self.in_tree, self._program.in_avals[len(self._consts):])

    @property
    def out_avals(self) -> Any:
        return tree_unflatten(self.out_tree, self._program.out_avals[:self.out_tree.num_leaves])

    @property
    def args_info(self) -> Any:
        donated = set(self._jitted.donate_argnums)
        dynamic_args, dynamic_kwargs = self.in_avals
        args = tuple(_arg_infos(a, i in donated) for i, a in enumerate(dynamic_args))
        return args, {k: _arg_infos(v, False) for k, v in dynamic_kwargs.items()}

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        return tuple(self._jitted.donate_argnums)

    @property
    def out_info(self) -> Any:
        """The results' types: a pytree of ShapeDtypeStructs (with shardings where out_shardings gives them)."""
        from .shape_eval import ShapeDtypeStruct

        structs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                   for a in self._program.out_avals[:self.out_tree.num_leaves]]  # then the Refs' final values
        return tree_unflatten(self.out_tree, structs)

    def _closed_jaxpr(self) -> ClosedJaxpr:
        count = len(self._consts)
        program = self._program
        return ClosedJaxpr(Jaxpr(program.invars[:count], program.invars[count:], program.equations,
                                 program.outvars, list(self._consts)))


def _arg_infos(avals: Any, donated: bool) -> Any:
    from ..tree.tree_util import tree_map

    return tree_map(lambda aval: ArgInfo(aval, donated), avals, is_leaf=lambda x: isinstance(x, ShapedArray))


class Traced(_Stage):
    """A jitted function traced for some arguments: its jaxpr and result types; `.lower()` for the next stage."""

    @property
    def jaxpr(self) -> ClosedJaxpr:
        return self._closed_jaxpr()

    def lower(self, **_options: Any) -> "Lowered":
        return Lowered(self._jitted, self._key)


class Lowered(_Stage):
    """The program for one signature of arguments. meshax does not lower to StableHLO: its text is the jaxpr's."""

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        return str(self._closed_jaxpr())

    def compiler_ir(self, dialect: str | None = None) -> ClosedJaxpr:
        """The program in meshax's own IR, the jaxpr (JAX gives an MLIR module here)."""
        return self._closed_jaxpr()

    def cost_analysis(self) -> dict[str, float]:
        return {}

    def compile(self, compiler_options: Any = None) -> "Compiled":
        return Compiled(self._jitted, self._key)


class Compiled(_Stage):
    """A program ready to run: call it with the non-static arguments it was lowered for."""

    def as_text(self) -> str:
        return str(self._closed_jaxpr())

    def cost_analysis(self) -> dict[str, float]:
        return {}

    def memory_analysis(self) -> None:
        return None

    @property
    def input_shardings(self) -> Any:
        """Each argument's sharding as the program was traced for it (None where the argument had none)."""
        dynamic_args, dynamic_kwargs = tree_unflatten(self.in_tree, [_plain(s)[3] for s in self._key[0][1]])
        return tuple(dynamic_args), dict(dynamic_kwargs)

    @property
    def output_shardings(self) -> Any:
        """out_shardings as given to jit (None: meshax chooses the results' layout when the program runs)."""
        return self._jitted.out_shardings

    def _default_sharding(self) -> Any:
        """Where a value without a sharding lives: replicated over the context mesh (`set_mesh`), else on the
        default device when no argument is placed elsewhere."""
        mesh = current_mesh()
        if mesh is not None:
            return NamedSharding(mesh, PartitionSpec())
        placed = tree_flatten(self.input_shardings, is_leaf=lambda s: s is None or isinstance(s, Sharding))[0]
        if any(s is not None and not isinstance(s, SingleDeviceSharding) for s in placed):
            return None
        return SingleDeviceSharding(default_device())

    @property
    def input_formats(self) -> Any:
        """Each argument's Format: the row-major layout of its rank and its input sharding."""
        (args, kwargs), (sharding_args, sharding_kwargs) = self.in_avals, self.input_shardings
        default = self._default_sharding()
        return (tuple(Format(row_major(len(a.shape)), s or default) for a, s in zip(args, sharding_args)),
                {k: Format(row_major(len(a.shape)), sharding_kwargs[k] or default) for k, a in kwargs.items()})

    @property
    def output_formats(self) -> Any:
        """Each result's Format: the row-major layout of its rank and its out_sharding."""
        avals, structure = tree_flatten(self.out_avals, is_leaf=lambda a: isinstance(a, ShapedArray))
        given = self._jitted.out_shardings
        shardings = tree_flatten(given, is_leaf=lambda s: s is None or isinstance(s, Sharding))[0] \
            if isinstance(given, (tuple, list, dict)) else [given] * len(avals)
        if len(shardings) != len(avals):
            shardings = [None] * len(avals)
        default = self._default_sharding()
        return tree_unflatten(structure, [Format(row_major(a.ndim), s or default) for a, s in zip(avals, shardings)])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self._jitted
        leaves, structure = jitted._flatten(args, kwargs)
        signature = jitted._signatures(leaves)
        expected_structure, expected = self._key[0][:2]
        if structure != expected_structure or not all(map(_matches, expected, signature)):
            raise TypeError(_mismatch(jitted.fun, expected_structure, expected, structure, signature))
        return jitted._run(self._key, leaves)

    call = __call__


def _mismatch(fun: Any, structure: Any, expected: tuple, got_structure: Any, got: list) -> str:
    if structure != got_structure:
        return (f"Function compiled with input pytree does not match the input pytree it was called with: compiled "
                f"for {structure}, called with {got_structure}; pass arguments like those it was lowered with "
                "(without the static ones), or call the jitted function, which traces again for new arguments.")
    lines = [f"Argument {i} compiled with {_type(e)} and called with {_type(g)}"
             for i, (e, g) in enumerate(zip(expected, got)) if e != g]
    return ("Argument types differ from the types for which this computation was compiled. The mismatches are:\n"
            + "\n".join(lines))


def _matches(expected: tuple, got: tuple) -> bool:
    """An argument fits the type it was compiled for; compiled without a sharding (a ShapeDtypeStruct), any
    placement holding the whole value on each device fits (one device, or replicated), as in JAX."""
    if expected == got:
        return True
    if expected[0] == "Ref" or got[0] == "Ref":
        return False
    return expected[3] is None and expected[:3] == got[:3] and getattr(got[3], "is_fully_replicated", False)


def _plain(signature: tuple) -> tuple:
    """An argument's (shape, dtype, weak type, sharding), also for a Ref's ("Ref", signature)."""
    return signature[1] if signature[0] == "Ref" else signature


def _type(signature: tuple) -> str:
    shape, dtype, weak, sharding = _plain(signature)
    return str(ShapedArray(tuple(shape), dtype)) + (" (weak)" if weak else "") + (f" on {sharding}" if sharding is not None else "")
