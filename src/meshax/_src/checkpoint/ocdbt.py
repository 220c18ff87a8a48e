"""Reading Orbax's default (OCDBT) checkpoints through TensorStore, the optional `meshax[tensorstore]` extra."""
from __future__ import annotations

import numpy as np

from ..sharding.shardings import Box


def _tensorstore():
    try:
        import tensorstore
    except ImportError:
        raise ImportError(
            "this checkpoint is in Orbax's OCDBT format, which meshax reads through TensorStore; "
            "install it with `pip install meshax[tensorstore]` (or save with use_ocdbt=False)."
        ) from None
    return tensorstore


class OcdbtLeaf:
    """One array of an OCDBT checkpoint, opened read-only."""

    def __init__(self, path: str, name: str, zarr3: bool) -> None:
        ts = _tensorstore()
        spec = {"driver": "zarr3" if zarr3 else "zarr",
                "kvstore": {"driver": "ocdbt", "base": f"file://{path}/", "path": name}}
        try:
            self.store = ts.open(spec, open=True, read=True).result()
        except Exception as error:
            raise FileNotFoundError(f"the OCDBT checkpoint {path} has no readable array '{name}' ({error}).") from None
        self.shape = tuple(int(n) for n in self.store.shape)
        self.dtype = np.dtype(self.store.dtype.numpy_dtype)

    def read_box(self, box: Box) -> np.ndarray:
        region = tuple(slice(a, b) for a, b in box)
        return np.asarray(self.store[region].read().result()) if region else np.asarray(self.store.read().result())

    def read_boxes(self, boxes: list[Box], start: float = 0.0) -> dict[Box, np.ndarray]:
        return {box: self.read_box(box) for box in boxes}
