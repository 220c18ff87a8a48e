"""Mutable array references (as jax.ref): make, read, write and free Refs; `ds` slices index them."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.compat.top_level import empty_ref, free_ref
from meshax._src.compat.top_level import ref_addupdate as addupdate
from meshax._src.compat.top_level import ref_get as get
from meshax._src.compat.top_level import ref_set as set  # noqa: A004
from meshax._src.compat.top_level import ref_swap as swap
from meshax._src.transforms.refs import Ref, freeze, new_ref
from meshax._src.transforms.sharding_in_types import RefType as AbstractRef

__all__ = ["AbstractRef", "Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref", "set", "swap"]
