"""The cluster recipes (examples/cluster/*) install meshax from the user's MESHAX_SPEC, never from the package
index by name, and give every process of a job one secret MESHAX_JOB_TOKEN; the ssh recipe runs for real
through stand-ins for ssh/scp that run the 'remote' commands on this machine."""
from __future__ import annotations

import hashlib
import re
import stat

import pytest

from multiprocess import PYTHON, REPO, child_env, collect, free_port, lines_by_process, start

RECIPES = sorted(p for p in (REPO / "examples" / "cluster").iterdir() if p.is_file())
TIMEOUT = 120
# `pip install ... meshax` with meshax as a bare requirement (not a path, URL or "$MESHAX_SPEC").
BARE_INSTALL = re.compile(r"pip3?\s[^\n]*\binstall\s[^\n]*(?<![\w./$-])meshax(?![\w./-])")


def test_recipes_are_there():
    assert {p.name for p in RECIPES} >= {"indexed_job.yaml", "jobset.yaml", "mpiexec.sh", "slurm_demo.sbatch",
                                         "slurm_gpu_example.sbatch", "ssh_launch.sh"}


def test_the_pattern_catches_a_bare_install():
    assert BARE_INSTALL.search("meshax-venv/bin/pip install -q meshax")
    assert BARE_INSTALL.search("pip install --quiet --no-cache-dir --root-user-action=ignore meshax\n")
    assert not BARE_INSTALL.search('pip install --quiet "$MESHAX_SPEC"')
    assert not BARE_INSTALL.search("pip install -q dist/meshax-0.1.0-py3-none-any.whl")


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_no_bare_pip_install_meshax(recipe):
    text = recipe.read_text()
    assert not BARE_INSTALL.search(text), BARE_INSTALL.search(text)  # comments included
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    if "pip install" in code:
        assert re.search(r"pip[^\n]*install[^\n]*\$(MESHAX_SPEC|REMOTE_SPEC)", code), "installs something else"
        assert "MESHAX_SPEC:?" in code or '-z "$MESHAX_SPEC"' in code, "no clear error when MESHAX_SPEC is unset"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_every_recipe_gives_the_job_a_token(recipe):
    text = recipe.read_text()
    assert "MESHAX_JOB_TOKEN" in text
    if recipe.suffix == ".yaml":
        assert "secretKeyRef" in text and "secrets.token_hex(32)" in text
    else:
        assert "secrets.token_hex(32)" in text and "export MESHAX_JOB_TOKEN" in text


def test_sbatch_without_spec_stops_with_the_fix(tmp_path):
    venv = tmp_path / "venv"
    for recipe in ("slurm_demo.sbatch", "slurm_gpu_example.sbatch"):
        result = collect([start(["bash", str(REPO / "examples" / "cluster" / recipe)],
                                child_env(REPO=str(tmp_path), VENV=str(venv)))], TIMEOUT)[0]
        assert result.returncode != 0
        assert "set MESHAX_SPEC to what pip installs meshax from" in result.stderr
        assert not venv.exists()  # stopped before doing anything


def test_ssh_install_without_spec_stops_with_the_fix():
    result = collect([start(["bash", str(REPO / "examples" / "cluster" / "ssh_launch.sh"), "h1"],
                            child_env(INSTALL="1"))], TIMEOUT)[0]
    assert result.returncode == 2
    assert "INSTALL=1 needs MESHAX_SPEC" in result.stderr


SSH = """\
#!/usr/bin/env bash
# Stand-in for ssh: runs the command on this machine, in $FAKE_HOME/HOST, with our stdin unless -n.
while [ $# -gt 0 ]; do
    case $1 in -n) exec </dev/null; shift;; -o) shift 2;; -*) shift;; *) break;; esac
done
echo "$1" >> "$FAKE_HOME/hosts"
mkdir -p "$FAKE_HOME/$1" && cd "$FAKE_HOME/$1" && shift && exec bash -c "$*"
"""
SCP = """\
#!/usr/bin/env bash
# Stand-in for scp: copies FILE to HOST: as $FAKE_HOME/HOST/.
while [ $# -gt 0 ]; do case $1 in -o) shift 2;; -*) shift;; *) break;; esac; done
mkdir -p "$FAKE_HOME/${2%%:*}" && cp "$1" "$FAKE_HOME/${2%%:*}/"
"""
PROGRAM = """\
import hashlib, os, meshax
meshax.distributed.initialize()
token = os.environ.get("MESHAX_JOB_TOKEN", "")
print("token", len(token), hashlib.sha256(token.encode()).hexdigest()[:16], meshax.process_count(), len(meshax.devices()))
"""


@pytest.fixture
def fake_hosts(tmp_path):
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    for name, text in (("ssh", SSH), ("scp", SCP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = child_env(
        PATH=f"{bin_dir}:{child_env()['PATH']}", FAKE_HOME=str(home), SCRIPT=str(tmp_path / "prog.py"),
        PYTHON=PYTHON, COORDINATOR="127.0.0.1", PORT=str(free_port()), PROCS_PER_HOST="2", CPU_DEVICES="2",
    )
    return env, home


def run_ssh_recipe(env):
    return collect([start(["bash", str(REPO / "examples" / "cluster" / "ssh_launch.sh"), "h1", "h2"], env)],
                   TIMEOUT)[0]


def test_ssh_recipe_runs_one_job_with_one_fresh_token(fake_hosts):
    env, home = fake_hosts
    result = run_ssh_recipe(env)
    assert result.returncode == 0, result.stdout + result.stderr
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == [0, 1, 2, 3], result.stdout
    tokens = {tuple(lines[-1].split()[1:3]) for lines in by_process.values()}
    assert len(tokens) == 1  # the same secret in every process
    [(length, _)] = tokens
    assert length == "64"
    assert {lines[-1].split()[3:] == ["4", "8"] for lines in by_process.values()} == {True}
    assert sorted((home / "hosts").read_text().split()) == ["h1", "h1", "h2", "h2"]  # two processes per host
    # Each run makes a new secret.
    again = run_ssh_recipe({**env, "PORT": str(free_port())})
    assert again.returncode == 0, again.stderr
    assert {tuple(lines[-1].split()[1:3]) for lines in lines_by_process(again.stdout).values()} != tokens


def test_ssh_recipe_passes_the_users_token(fake_hosts):
    env, _ = fake_hosts
    result = run_ssh_recipe({**env, "MESHAX_JOB_TOKEN": "s3cret-for-this-job"})
    assert result.returncode == 0, result.stdout + result.stderr
    digest = hashlib.sha256(b"s3cret-for-this-job").hexdigest()[:16]
    assert {lines[-1] for lines in lines_by_process(result.stdout).values()} == {f"token 19 {digest} 4 8"}
