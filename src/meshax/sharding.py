"""Meshes and shardings: how arrays are laid out over devices."""
from meshax._src.sharding.mesh import (AbstractMesh, AxisType, Mesh, get_abstract_mesh, set_mesh, use_abstract_mesh,
                                       use_mesh)
from meshax._src.sharding.shardings import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from meshax._src.transforms.sharding_in_types import auto_axes, explicit_axes, reshard

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding", "SingleDeviceSharding",
           "auto_axes", "explicit_axes", "get_abstract_mesh", "reshard", "set_mesh", "use_abstract_mesh",
           "use_mesh"]
