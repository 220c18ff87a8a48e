"""Meshes and shardings: how arrays are laid out over devices."""
from meshax._src.sharding.mesh import (AbstractMesh, AxisType, Mesh, get_abstract_mesh, set_mesh, use_abstract_mesh,
                                       use_mesh)
from meshax._src.sharding.shardings import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from meshax._src.transforms.sharding_in_types import auto_axes, explicit_axes, reshard
from meshax._src.compat.config_states import no_collectives
from meshax._src.compat.small_modules import AbstractDevice, make_single_device_sharding
from meshax._src.sharding.aval_sharding import ManualAxisType, UnreducedKind
from meshax._src.compat.top_level import get_mesh

__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "ManualAxisType", "Mesh", "NamedSharding", "PartitionSpec",
           "Sharding", "SingleDeviceSharding", "UnreducedKind", "auto_axes", "explicit_axes", "get_abstract_mesh",
           "get_mesh", "make_single_device_sharding", "no_collectives", "reshard", "set_mesh", "use_abstract_mesh",
           "use_mesh"]
