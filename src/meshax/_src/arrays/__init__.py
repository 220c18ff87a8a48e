"""Arrays: meshax.Array, placing data on devices (device_put, make_array_from_*), moving arrays between shardings, multihost utilities and collectives over local shards."""
