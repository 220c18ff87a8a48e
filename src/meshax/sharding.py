"""Meshes and shardings: how arrays are laid out over devices."""
from meshax._src.mesh import (AbstractMesh, AxisType, Mesh, get_abstract_mesh, set_mesh, use_abstract_mesh,
                              use_mesh)
from meshax._src.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from meshax._src.sharding_api import auto_axes, explicit_axes, reshard

__all__ = ["AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding", "SingleDeviceSharding",
           "auto_axes", "explicit_axes", "get_abstract_mesh", "reshard", "set_mesh", "use_abstract_mesh",
           "use_mesh"]
