# Sourced by the device scripts (run_16_cores.sh, run_models_16.sh), from the repository's root: $out (from $OUT,
# else ./device-out) holding log.txt, a copy of everything printed; the carried wheels (.whl, fetch_wheels.sh)
# installed into /tmp/site and put on PYTHONPATH with meshax's sources; the host and the versions printed.
# mpich's libmpi is installed into its own prefix and named to mpi4py (MPI4PY_LIBMPI): `pip --target` drops a
# wheel's lib/ folder, and mpi4py 4.1 then loads whatever MPI the image holds (seen: every process rank 0 of 1).
out=$(realpath -m "${OUT:-device-out}")
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --ignore-installed --prefix /tmp/mpich .whl/mpich-*.whl || exit 1
export MPI4PY_LIBMPI=/tmp/mpich/lib/libmpi.so.12
export PYTHONPATH=/tmp/site:$PWD/src
echo "host: $(nproc) cores, $(python3 --version)"
python3 -c "import numpy, numba, mpi4py, jax, meshax; print('numpy', numpy.__version__, 'numba', numba.__version__, 'mpi4py', mpi4py.__version__, 'jax', jax.__version__, 'meshax', meshax.__version__); from mpi4py import MPI; print(MPI.Get_library_version().splitlines()[0])"
