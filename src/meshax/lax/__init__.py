"""Lower-level operations (as jax.lax): elementwise, slicing, shapes, reductions, contractions, control flow,
collectives over mesh axes, sharding constraints, stop_gradient."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.transforms.autodiff import stop_gradient
from meshax._src.transforms.jit import with_sharding_constraint
from meshax._src.lax.control_flow import (associative_scan, cond, fori_loop, map, scan, select, select_n, switch,
                                          while_loop)
from meshax._src.lax.lax_ops import *  # noqa: F401,F403
from meshax._src.lax.lax_ops import __all__ as _ops_names
from meshax._src.lax.parallel import (
    all_gather, all_to_all, axis_index, pcast, pmax, pmean, pmin, ppermute, psum, psum_scatter, pswapaxes, pvary,
)
from meshax._src.transforms.autodiff import stop_gradient_p
from meshax._src.lax.parallel import axis_size_of as axis_size
from meshax._src.lax.slicing import *  # noqa: F401,F403
from meshax._src.lax.slicing import __all__ as _slicing_names
from meshax._src.lax.conv import *  # noqa: F401,F403
from meshax._src.lax.conv import __all__ as _conv_names
from meshax._src.lax.gather_scatter import *  # noqa: F401,F403
from meshax._src.lax.gather_scatter import __all__ as _gather_names
from meshax._src.lax.composite_ops import *  # noqa: F401,F403
from meshax._src.lax.composite_ops import __all__ as _more_names
from meshax._src.lax.special import *  # noqa: F401,F403
from meshax._src.lax.special import __all__ as _special_names
from meshax._src.random.prng import erf_inv
from meshax._src.lax.fft import fft
from meshax._src.lax.lax_more_enums import *  # noqa: F401,F403
from meshax._src.lax.lax_more_enums import __all__ as _enum_names
from meshax._src.lax.lax_more_elementwise import *  # noqa: F401,F403
from meshax._src.lax.lax_more_elementwise import __all__ as _elementwise_names
from meshax._src.lax.lax_more_ops import *  # noqa: F401,F403
from meshax._src.lax.lax_more_ops import __all__ as _other_names
from meshax._src.lax.lax_more_random import *  # noqa: F401,F403
from meshax._src.lax.lax_more_random import __all__ as _random_names
from meshax._src.lax.lax_more_ragged import *  # noqa: F401,F403
from meshax._src.lax.lax_more_ragged import __all__ as _ragged_names
from meshax._src.lax.lax_more_solves import *  # noqa: F401,F403
from meshax._src.lax.lax_more_solves import __all__ as _solve_names
from meshax._src.lax.lax_more_parallel import *  # noqa: F401,F403
from meshax._src.lax.lax_more_parallel import __all__ as _parallel_names
from meshax._src.compat.jax_names import JAX_NAMES as _JAX_NAMES
from meshax._src.lax.primitive_names import primitive_names as _primitive_names

globals().update(_primitive_names(_JAX_NAMES["jax.lax"]))

__all__ = sorted(["all_gather", "all_to_all", "associative_scan", "axis_index", "axis_size", "cond", "fori_loop",
                  "map", "pcast", "pmax", "pmean", "pmin", "ppermute", "psum", "psum_scatter", "pswapaxes", "pvary",
                  "stop_gradient_p", "scan",
                  "select", "select_n", "stop_gradient", "switch", "while_loop", "with_sharding_constraint",
                  "erf_inv", "fft", *_enum_names, *_elementwise_names, *_other_names, *_random_names,
                  *_ragged_names, *_solve_names, *_parallel_names, *_ops_names, *_slicing_names, *_conv_names, *_gather_names, *_more_names, *_special_names])


def __getattr__(name: str):
    """`lax.linalg` loads on first use; names of jax.lax that meshax does not have yet raise NotImplementedError
    (others AttributeError)."""
    if name == "linalg":
        import importlib

        return importlib.import_module("meshax.lax.linalg")
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.lax", name)
