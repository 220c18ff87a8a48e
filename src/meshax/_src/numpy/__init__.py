"""meshax.numpy: NumPy's API on (possibly process-spanning) arrays, built on the primitives.

Every function promotes its inputs with JAX's rules, then binds primitives, so the
same code runs eagerly (partitioned over the arrays' meshes) and under jit/shard_map.
Each module has one job; each imports only those before it here.
"""
from types import ModuleType as _ModuleType

from .promotion import *  # noqa: F401,F403
from .ufuncs import *  # noqa: F401,F403
from .shape_ops import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .masked_selection import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .searching import *  # noqa: F401,F403
from .products import *  # noqa: F401,F403
from .logic import *  # noqa: F401,F403
from .numerics import *  # noqa: F401,F403
from .polynomials import *  # noqa: F401,F403
from .set_ops import *  # noqa: F401,F403
from .index_tricks import *  # noqa: F401,F403
from .ufunc_objects import *  # noqa: F401,F403
from .insertion import *  # noqa: F401,F403
from .bits import *  # noqa: F401,F403
from .extremes import *  # noqa: F401,F403
from .index_grids import *  # noqa: F401,F403
from .files import *  # noqa: F401,F403
from .indexing import _IndexUpdateHelper  # noqa: F401  (x.at, installed by methods)
from .promotion import _axes, _cast, _lift, _ndim, _promote, _promote_inexact  # noqa: F401  (for lax_parallel, random, nn, ad)

# What `import *` gives: the names above but this package's own modules (meshax.numpy drops the helpers by name).
__all__ = sorted(_name for _name, _value in globals().items() if not _name.startswith("_")
                 and not (isinstance(_value, _ModuleType) and _value.__name__.startswith(__name__ + ".")))
