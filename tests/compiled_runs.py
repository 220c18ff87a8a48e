"""Test support: compile numba programs in the caller's thread and record the calls that a compiled function made."""
from __future__ import annotations

import pytest

from meshax._src.interpreters import fusion, numba_program


def record_compiled_runs(monkeypatch: pytest.MonkeyPatch) -> list:
    """Compile in the foreground; return the list that every WholeProgram run by its compiled function joins."""
    monkeypatch.setattr(fusion.EXECUTORS["cpu"].numba.compiler, "background", False)
    runs = []
    original = numba_program.WholeProgram.__call__

    def call(self, inputs):
        outputs = original(self, inputs)
        if outputs is not None:
            runs.append(self)
        return outputs

    monkeypatch.setattr(numba_program.WholeProgram, "__call__", call)
    return runs
