"""Lower-level operations (as jax.lax): collectives over mesh axes, sharding constraints, stop_gradient."""
from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.ad_api import stop_gradient
from meshax._src.jit import with_sharding_constraint
from meshax._src.lax.control_flow import (associative_scan, cond, fori_loop, map, scan, select, select_n, switch,
                                          while_loop)
from meshax._src.lax.parallel import (
    all_gather, all_to_all, axis_index, pcast, pmax, pmean, pmin, ppermute, psum, psum_scatter, pvary,
)
from meshax._src.lax.parallel import axis_size_of as axis_size

__all__ = ["all_gather", "all_to_all", "associative_scan", "axis_index", "axis_size", "cond", "fori_loop", "map", "pcast", "pmax", "pmean",
           "pmin", "ppermute", "psum", "psum_scatter", "pvary", "scan", "select", "select_n", "stop_gradient", "switch",
           "while_loop", "with_sharding_constraint"]
