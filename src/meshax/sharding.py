"""Meshes and shardings: how arrays are laid out over devices."""
from meshax._src.mesh import AxisType, Mesh, use_mesh
from meshax._src.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

__all__ = ["AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding", "SingleDeviceSharding", "use_mesh"]
