"""jax.ad_checkpoint: rematerialisation (checkpoint/remat), naming values for its policies, and listing the
values a backward pass keeps."""
from ._src.transforms.ad_checkpoint import checkpoint_name, print_saved_residuals, saved_residuals
from ._src.transforms.remat import checkpoint, checkpoint_policies, remat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "print_saved_residuals", "remat",
           "saved_residuals"]
