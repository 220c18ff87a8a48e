"""Runtime checks of traced values (as jax.experimental.checkify): `check`, `checkify`, `Error`."""
from meshax._src.transforms.checkify import (DivisionByZeroError, Error, ErrorCategory, FailedCheckError, JaxRuntimeError,
                                  NaNError, OOBError, all_checks, automatic_checks, check, check_error, checkify,
                                  debug_check, div_checks, float_checks, index_checks, init_error, nan_checks,
                                  user_checks)

__all__ = ["DivisionByZeroError", "Error", "ErrorCategory", "FailedCheckError", "JaxRuntimeError", "NaNError",
           "OOBError", "all_checks", "automatic_checks", "check", "check_error", "checkify", "debug_check",
           "div_checks", "float_checks", "index_checks", "init_error", "nan_checks", "user_checks"]


def __getattr__(name: str):
    """Names of jax.experimental.checkify that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.experimental.checkify", name)
