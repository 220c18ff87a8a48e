"""Packaging: the license, the metadata of the built wheel and sdist, and CI's wheel check being wired in."""
from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile

import pytest

import meshax
from multiprocess import REPO

tomllib = pytest.importorskip("tomllib")
BUILD_TIMEOUT = 240


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_license_is_the_full_apache_2_text():
    text = (REPO / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    for clause in ("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "9. Accepting Warranty or Additional",
                   "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License to your work."):
        assert clause in text
    assert len(text.splitlines()) == 202


def test_project_metadata():
    project = pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert {"jax", "mpi", "spmd"} <= set(project["keywords"])
    classifiers = project["classifiers"]
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the license expression replaces them
    assert project["urls"]
    assert {"build>=1.2", "twine>=6.1"} <= set(project["optional-dependencies"]["test"])
    assert project["scripts"] == {"meshax": "meshax._src.launch.launcher:main"}


def test_ci_checks_the_wheel_before_the_suite():
    assert "exec bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()
    lines = (REPO / "scripts" / "test.sh").read_text().splitlines()
    wheel = next(i for i, line in enumerate(lines) if "scripts/check_wheel.sh" in line)
    suite = next(i for i, line in enumerate(lines) if "-m pytest" in line)
    assert wheel < suite
    check = (REPO / "scripts" / "check_wheel.sh").read_text()
    for step in ("set -euo pipefail", "-m build", "twine check --strict", "-m venv", "meshax\" --version",
                 "meshax\" info", "meshax\" launch -n 4", "got result: -0.12398731708526611"):
        assert step in check, step
    assert "pip install -e" not in check and "-e ." not in check


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [wheel], [sdist] = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    return wheel, sdist


def test_twine_check_passes(dist):
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2


def test_wheel_contents(dist):
    wheel, _ = dist
    version = meshax.__version__
    assert wheel.name == f"meshax-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"meshax-{version}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert f"{info}/licenses/LICENSE" in names
    assert {"meshax/__init__.py", "meshax/__main__.py", "meshax/_src/launch/cli.py", "meshax/_src/launch/launcher.py"} <= names
    assert not [n for n in names if n.startswith("tests/")]
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert f"Version: {version}" in headers
    assert "License-Expression: Apache-2.0" in headers
    assert "License-File: LICENSE" in headers
    assert "Classifier: Topic :: System :: Distributed Computing" in headers
    assert "meshax = meshax._src.launch.launcher:main" in entry_points


def test_sdist_contents(dist):
    _, sdist = dist
    root = f"meshax-{meshax.__version__}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    assert {f"{root}/LICENSE", f"{root}/README.md", f"{root}/pyproject.toml", f"{root}/src/meshax/__init__.py"} <= names
