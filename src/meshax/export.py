"""meshax.export: serialize a jitted function's program and run it back (as jax.export). meshax has no StableHLO:
the serialized program is meshax's jaxpr, and `Exported.mlir_module()` is its text."""
from meshax._src.export.exported import DisabledSafetyCheck, Exported
from meshax._src.export.exported import CALLING_CONVENTION_VERSION as maximum_supported_calling_convention_version
from meshax._src.export.exported import \
    MINIMUM_CALLING_CONVENTION_VERSION as minimum_supported_calling_convention_version
from meshax._src.export.exporting import default_export_platform, export
from meshax._src.export.serialize import deserialize
from meshax._src.export.shape_poly import (SymbolicScope, is_symbolic_dim, symbolic_args_specs, symbolic_dim_bounds,
                                           symbolic_shape)
from meshax._src.export.trees import register_namedtuple_serialization, register_pytree_node_serialization

__all__ = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform", "deserialize", "export",
           "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_dim_bounds", "symbolic_shape"]
