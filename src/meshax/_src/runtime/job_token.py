"""The job's secret: every connection to the coordinator proves it knows it.

It comes from `MESHAX_JOB_TOKEN` (set by `meshax launch`, or by the user on every
process), else from a per-user file `~/.meshax/job_token` that the first process to
need it creates (mode 0600), so that processes started by hand on one host, or on
hosts sharing a home directory, agree without configuration.
"""
from __future__ import annotations

import os
import secrets
import stat

ENV_VAR = "MESHAX_JOB_TOKEN"
FIX = (f"set the same {ENV_VAR} on every process of the job (e.g. export {ENV_VAR}=$(python -c "
       "'import secrets; print(secrets.token_hex(32))'))")


def new_token() -> str:
    """A fresh random token: 32 bytes as hex."""
    return secrets.token_hex(32)


def token_file() -> str:
    """Where the per-user token lives: ~/.meshax/job_token."""
    return os.path.join(os.path.expanduser("~"), ".meshax", "job_token")


def job_token(*, per_user_file: bool = True) -> bytes:
    """The job's secret: `MESHAX_JOB_TOKEN`, else the per-user token file (created if missing),
    or with `per_user_file=False` a fresh random token."""
    value = os.environ.get(ENV_VAR)
    if value is not None:
        if not value.strip():
            raise ValueError(f"{ENV_VAR} is set but empty; {FIX}.")
        return value.strip().encode("utf-8")
    if not per_user_file:
        return new_token().encode("ascii")
    return _token_from_file(token_file())


def _token_from_file(path: str) -> bytes:
    try:
        try:
            return _read(path)
        except FileNotFoundError:
            _create(path)
            return _read(path)
    except OSError as error:
        raise RuntimeError(
            f"meshax cannot read or create its per-user job token file {path} ({error.strerror or error}); {FIX}."
        ) from None


def _create(path: str) -> None:
    """Write a new token next to `path`, then link it into place: the first of racing processes wins whole."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(new_token() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass  # another process created it first: everyone uses that one
    finally:
        os.unlink(temporary)


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise RuntimeError(
                f"meshax's job token file {path} is owned by uid {info.st_uid} with mode "
                f"{stat.filemode(info.st_mode)}; it must be yours and private: run chmod 600 {path} "
                f"(or delete it), or {FIX}."
            )
        text = os.read(fd, 4096).decode("utf-8", errors="replace").strip()
    finally:
        os.close(fd)
    if not text:
        raise RuntimeError(f"meshax's job token file {path} is empty; delete it (a new one is made), or {FIX}.")
    return text.encode("utf-8")
