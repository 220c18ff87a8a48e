"""tools/run_doc_pages.py: it extracts pages' cells, compares outputs fairly, and every cell of the pages in
tests/jax_doc_pages gives under meshax what it gives under JAX."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import run_doc_pages  # noqa: E402

PAGES = REPO / "tests" / "jax_doc_pages"


def test_cells_are_extracted_from_myst_and_python_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n```{code-cell} ipython3\n:tags: [raises-exception]\n%matplotlib inline\nx = 1\n```\n"
                    "more\n```python\nprint(x)\n```\n```bash\nls\n```\n")
    assert run_doc_pages.cells_of(page) == ["x = 1", "print(x)"]


def test_outputs_compare_numbers_to_a_tolerance_and_spec_spellings():
    same = run_doc_pages.same_output
    assert same("[1.0000001 2.]", "[1. 2.]")
    assert not same("[1.1 2.]", "[1. 2.]")
    assert same("PartitionSpec('x',)", "P('x',)")
    assert same("NamedSharding(mesh=Mesh('a': 4), spec=PartitionSpec('a',))",
                "NamedSharding(mesh=Mesh('a': 4, axis_types=(Auto,)), spec=P('a',))")
    assert not same("AbstractMesh('a': 4)", "AbstractMesh('a': 4, axis_types=(Auto,))")
    assert not same("float32[3]", "float32[4]")
    assert same("<function f at 0x7f00>", "<function f at 0x7fab>")


def test_verdicts():
    ok = {"output": "1\n", "error": None}
    assert run_doc_pages.compare([ok, {"output": "", "error": "TypeError"}, {"output": "2\n", "error": None}],
                                 [ok, ok, ok]) == ["same", "fails", "differs"]
    both = {"output": "", "error": "ValueError"}
    assert run_doc_pages.compare([both], [both]) == ["same"]
    assert run_doc_pages.compare([], [ok]) == ["missing"]


def test_every_cell_of_the_pages_matches_jax(tmp_path):
    report = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(REPO / "tools" / "run_doc_pages.py"), str(PAGES), "--show-diffs",
                           "--json", str(report)], env=env, capture_output=True, text=True, timeout=900)
    verdicts = json.loads(report.read_text())
    pages = {Path(name).name: cells for name, cells in verdicts.items() if cells}
    assert {"gradient-checkpointing.md", "custom-jvp-vjp.md", "Common_Gotchas_in_JAX.md", "aot.md",
            "shard_map.md"} <= set(pages), done.stdout + done.stderr
    assert all(v == "same" for cells in pages.values() for v in cells), done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cells," in done.stdout


@pytest.mark.parametrize("library", ["jax", "meshax"])
def test_a_cell_that_raises_is_recorded_not_fatal(tmp_path, library):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport jax\n1 / 0\n```\n```python\nprint(jax.numpy.ones(2).sum())\n```\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, str(REPO / "tools" / "run_doc_pages.py"), "--run-page", str(page),
                           "--library", library], env=env, capture_output=True, text=True, timeout=300)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULTS ")][-1]
    results = json.loads(line[len("RESULTS "):])
    assert results == [{"output": "", "error": "ZeroDivisionError"}, {"output": "2.0\n", "error": None}]
