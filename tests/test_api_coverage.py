"""Every public name of JAX's modules (the committed list in src/meshax/_src/compat/jax_names.py, written by
tools/jax_names.py from the JAX release meshax follows) exists in meshax's module of the same path, or has a row in
the README's "JAX names meshax does not provide" table; and every row there is such a name (no stale rows)."""
from __future__ import annotations

import importlib
import re

import pytest

from meshax._src.compat.jax_names import JAX_NAMES, JAX_VERSION
from multiprocess import REPO

# JAX's internals for library authors: meshax mirrors the parts its users' libraries call (the README says so).
PARTIAL_MODULES = ("jax.extend.core", "jax.interpreters.ad", "jax.interpreters.batching",
                   "jax.interpreters.partial_eval")
ROW = re.compile(r"^\| `(jax(?:\.\w+)+)` \| (.+) \|$")


def readme_rows() -> dict[str, str]:
    """`jax.module.name` -> why meshax does not provide it, from the README's table."""
    text = (REPO / "README.md").read_text()
    start = text.index("### JAX names meshax does not provide")
    block = text[start:text.index("\n#", start + 1)]
    rows = {}
    for line in block.splitlines():
        match = ROW.match(line)
        if match:
            assert match.group(2).strip(), f"README row for {match.group(1)} gives no reason"
            rows[match.group(1)] = match.group(2)
    return rows


def _meshax_module(module: str):
    return importlib.import_module("meshax" + module[len("jax"):])


@pytest.mark.parametrize("module", sorted(JAX_NAMES))
def test_every_jax_name_exists_or_has_a_readme_row(module):
    exempt = readme_rows()
    if module in exempt or module in PARTIAL_MODULES:
        return
    ours = _meshax_module(module)
    missing = [name for name in sorted(JAX_NAMES[module])
               if f"{module}.{name}" not in exempt and not hasattr(ours, name)]
    assert not missing, f"{module} lacks {len(missing)} of JAX {JAX_VERSION}'s names (add them, or a README row " \
                        f"under 'JAX names meshax does not provide' saying why): {' '.join(missing)}"


def test_every_readme_row_is_a_jax_name_meshax_lacks():
    for qualified in readme_rows():
        module, _, name = qualified.rpartition(".")
        if qualified in JAX_NAMES:  # a whole module
            with pytest.raises(ImportError):
                _meshax_module(qualified)
            continue
        assert name in JAX_NAMES.get(module, ()), f"README row {qualified}: JAX {JAX_VERSION} has no such name"
        assert not hasattr(_meshax_module(module), name), f"README row {qualified}: meshax has it (drop the row)"


def test_the_committed_list_is_the_installed_jax_s():
    """tools/jax_names.py regenerates the list; under the JAX release it names, it reproduces the committed file
    (in a fresh process: which submodules `dir(jax)` shows depends on what was imported before)."""
    import subprocess
    import sys

    jax = pytest.importorskip("jax")
    if jax.__version__ != JAX_VERSION:
        pytest.skip(f"the list is JAX {JAX_VERSION}'s; installed: {jax.__version__}")
    result = subprocess.run([sys.executable, str(REPO / "tools" / "jax_names.py"), "--print"], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == (REPO / "src/meshax/_src/compat/jax_names.py").read_text()
