"""jax.ad_checkpoint: rematerialisation (checkpoint/remat), naming values for its policies, and listing the
values a backward pass keeps."""
from ._src.transforms.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals
from ._src.transforms.remat import checkpoint, checkpoint_policies, name_p, remat
from ._src.compat.small_modules import Offloadable, Recompute, Saveable, checkpoint_name_fwd

__all__ = ["Offloadable", "Recompute", "Saveable", "checkpoint", "checkpoint_name", "checkpoint_name_fwd",
           "checkpoint_policies", "name_p", "print_saved_residuals", "remat", "saved_residuals"]
