# Sourced by the device scripts (run_16_cores.sh, run_models_16.sh), from the repository's root: $out (from $OUT,
# else ./device-out) holding log.txt, a copy of everything printed; the carried wheels (.whl, fetch_wheels.sh)
# installed into /tmp/site and put on PYTHONPATH with meshax's sources; the host and the versions printed.
out=$(realpath -m "${OUT:-device-out}")
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src
echo "host: $(nproc) cores, $(python3 --version)"
python3 -c "import numpy, numba, mpi4py, jax, meshax; print('numpy', numpy.__version__, 'numba', numba.__version__, 'mpi4py', mpi4py.__version__, 'jax', jax.__version__, 'meshax', meshax.__version__)"
