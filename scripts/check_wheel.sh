#!/usr/bin/env bash
# Build meshax's wheel and sdist, check their metadata with twine, install the wheel (not -e) into a
# fresh venv, import every module of the package from it (so every import is a declared dependency) and run
# `meshax --version`, `meshax info` and the toy demo on 4 processes from it.
# Fails on the first step that fails. Run by scripts/test.sh; PYTHON is the interpreter that has
# `build` and `twine` (default: .venv/bin/python, as scripts/test.sh sets it up).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
PYTHON=${PYTHON:-$repo/.venv/bin/python}
EXPECTED="got result: -0.12398731708526611"

work=$(mktemp -d "${TMPDIR:-/tmp}/meshax-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { echo "check_wheel: $*"; }

step "building the sdist and the wheel"
if ! "$PYTHON" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1; then
    cat "$work/build.log"
    echo "check_wheel: python -m build failed (log above)" >&2
    exit 1
fi
wheels=("$work"/dist/meshax-*.whl)
step "twine check --strict $(cd "$work/dist" && echo *)"
"$PYTHON" -m twine check --strict "$work"/dist/*

step "installing ${wheels[0]##*/} into a fresh venv"
python3 -m venv "$work/venv"
# Nothing from this checkout may leak in: no PYTHONPATH, and run from the scratch directory.
unset PYTHONPATH
cd "$work"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "${wheels[0]}"
"$work/venv/bin/python" -c "import meshax, sys; assert meshax.__file__.startswith(sys.prefix), meshax.__file__"

step "importing every module of the installed package (no extras installed)"
"$work/venv/bin/python" - <<'PY'
import importlib, pkgutil, sys
import meshax

failed = []
walked = pkgutil.walk_packages(meshax.__path__, "meshax.", onerror=lambda name: failed.append(f"{name}: {sys.exc_info()[1]!r}"))
names = sorted(m.name for m in walked if not m.name.endswith("__main__"))  # __main__ runs the command line
for name in names:
    try:
        importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - every failure is reported below
        failed.append(f"{name}: {type(error).__name__}: {error}")
if failed:
    print("check_wheel: these modules fail to import from the wheel installed without extras:", *failed,
          sep="\n  ", file=sys.stderr)
    sys.exit(1)
print(f"imported {len(names)} modules")
PY

step "meshax --version"
version=$("$work/venv/bin/meshax" --version)
echo "$version"
wheel_version=${wheels[0]##*/meshax-}
wheel_version=${wheel_version%%-*}
if [ "$version" != "meshax $wheel_version" ]; then
    echo "check_wheel: meshax --version printed '$version', expected 'meshax $wheel_version'" >&2
    exit 1
fi

step "meshax info"
"$work/venv/bin/meshax" info

step "the toy demo on 4 processes, from the installed wheel"
"$work/venv/bin/meshax" launch -n 4 --cpu-devices 2 --timeout 120 \
    "$repo/examples/toy.py" {process_id} {num_processes} | tee "$work/demo.out"
for i in 0 1 2 3; do
    if ! grep -qxF "[$i] process=$i $EXPECTED" "$work/demo.out"; then
        echo "check_wheel: process $i of the demo did not print 'process=$i $EXPECTED'" >&2
        exit 1
    fi
done
step "ok"
