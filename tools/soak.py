"""Soak test: a multi-process meshax job running random work for a while, checking every result against NumPy
and watching its memory.

    python tools/soak.py --minutes M [--processes 4] [--devices 2] [--seed S] [--no-check] [--specials]
                         [--rss-growth 1.5]

launches itself under `python -m meshax launch`. Every process draws the same random sequence (seeded), so all
run the same program: reshards between random shardings (meshes over all devices, 2-d meshes, device subsets,
single devices; uneven shapes), meshax.numpy ops (elementwise, reductions, matmul, reshape/transpose, indexing)
shard_map collectives (psum, pmax, all_gather, ppermute, psum_scatter; some on blocks of up to 2 MiB per device
from a fixed menu of sizes, so that the buffer pool sees many size classes) and jit calls (shapes from a fixed
menu: jit keeps one trace per shape, as JAX does, so endless new shapes would grow that cache). Each process checks
the shards it holds against NumPy, and some results are also checked whole via multihost_utils.process_allgather.
Every process records its resident set size (RSS) after 1 minute (or at the end of a shorter run) and at the end.
Process 0 decides when the time is up and finally prints each process's RSS and one summary line:

    soak: process 2 RSS 215 MiB at 1 min -> 230 MiB at the end (1.07x; buffer pool 86 -> 82 MiB)
    soak: iterations=... (reshard=... numpy=... collective=... jit=...) bytes_moved~=... failures=0 ...

The job exits non-zero on any failure, or when a process's RSS at the end exceeds --rss-growth (default 1.5)
times its 1-minute value (and meshax's own failure handling stops it if a process dies, raises or
hangs: a collective watchdog of 120 s is set). The desync checks are on, as by default; --no-check runs with
MESHAX_CHECK=0. --specials puts NaN, inf and -0.0 into float data.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
import traceback

import numpy as np

MAX_REPORTED = 20  # failure details printed per process
FIRST_RSS_SAMPLE = 60.0  # seconds
BIG_ROWS = [4096, 6144, 10000, 16384, 24576, 40000, 65536]  # rows per device of the large collectives (8 columns)
JIT_SIDES = [8, 24, 64, 200]  # the menu of matrix sides for jit calls


def rss_bytes() -> int:
    """This process's resident set size."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ---- the launcher side ---------------------------------------------------------------------------------------------


def launch(args: argparse.Namespace) -> int:
    command = [
        sys.executable, "-m", "meshax", "launch", "-n", str(args.processes), "--cpu-devices", str(args.devices),
        "--timeout", str(args.minutes * 60 + 300), os.path.abspath(__file__), "--worker",
        "--minutes", str(args.minutes), "--seed", str(args.seed), "--rss-growth", str(args.rss_growth),
    ] + (["--specials"] if args.specials else [])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.no_check:
        env["MESHAX_CHECK"] = "0"
    print(f"soak: {args.processes} processes x {args.devices} devices, {args.minutes:g} min, seed {args.seed}"
          f"{', MESHAX_CHECK=0' if args.no_check else ''}{', NaN/inf data' if args.specials else ''}", flush=True)
    code = subprocess.call(command, env=env)
    if code != 0:
        print(f"soak: FAILED (the job exited with code {code})", flush=True)
    return code


# ---- the worker side -------------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, seed: int, specials: bool) -> None:
        import meshax
        from meshax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

        self.meshax = meshax
        self.P = PartitionSpec
        self.NamedSharding = NamedSharding
        self.rng = np.random.default_rng(seed)     # the same on every process
        self.specials = specials
        self.me = meshax.process_index()
        self.failures = 0
        self.counts = {"reshard": 0, "numpy": 0, "collective": 0, "jit": 0}
        self.bytes_moved = 0
        self.checks = 0
        devices = meshax.devices()
        n = len(devices)
        self.devices = devices
        self.full_meshes = [meshax.make_mesh((n,), ("x",))]
        for rows in sorted({d for d in range(2, n) if n % d == 0}):
            self.full_meshes.append(meshax.make_mesh((rows, n // rows), ("a", "b")))
        self.meshes = list(self.full_meshes)
        if n >= 2:
            self.meshes.append(meshax.make_mesh((n // 2,), ("x",), devices=devices[: n // 2]))
            self.meshes.append(meshax.make_mesh((n - n // 2,), ("x",), devices=devices[n // 2:]))
        if n >= 3:
            picks = [devices[1], devices[-1], devices[n // 2]]
            self.meshes.append(meshax.make_mesh((3,), ("x",), devices=picks))
        self.single = [SingleDeviceSharding(d) for d in devices]
        import meshax.numpy as jnp

        self.jitted = {"matmul": meshax.jit(lambda a, b: jnp.tanh(a) @ b + 1.0),
                       "reduce": meshax.jit(lambda a: jnp.sum(a * 2.0, axis=0) - jnp.max(a, axis=1).sum())}

    # ---- random choices (identical on all processes) ----

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def shape(self, rank: int | None = None, low: int = 1, high: int = 13) -> tuple[int, ...]:
        rank = int(self.rng.integers(1, 4)) if rank is None else rank
        if self.rng.random() < 0.1:  # now and then a bigger array, to move some data
            high = {1: 100_000, 2: 400, 3: 60}[rank]
        return tuple(int(s) for s in self.rng.integers(low, high + 1, size=rank))

    def data(self, shape, dtype=np.float32) -> np.ndarray:
        dtype = np.dtype(dtype)
        if dtype == np.bool_:
            return self.rng.random(shape) < 0.5
        if np.issubdtype(dtype, np.integer):
            return self.rng.integers(-50, 50, size=shape).astype(dtype)
        value = self.rng.standard_normal(shape).astype(dtype)
        if self.specials and value.size and self.rng.random() < 0.5:
            flat = value.reshape(-1)
            for _ in range(int(self.rng.integers(1, 4))):
                flat[int(self.rng.integers(flat.size))] = self.choice([np.nan, np.inf, -np.inf, -0.0])
        return value

    def spec_for(self, mesh, rank: int):
        names = mesh.axis_names
        options = [self.P()]
        if rank >= 1:
            options.append(self.P(names[0]))
        if rank >= 2:
            options.append(self.P(None, names[-1]))
        if len(names) == 2:
            if rank >= 2:
                options += [self.P(names[0], names[1]), self.P(names[1], names[0])]
            if rank >= 1:
                options += [self.P((names[0], names[1])), self.P(names[1])]
        if rank >= 3:
            options.append(self.P(None, None, names[0]))
        return self.choice(options)

    def sharding(self, rank: int, meshes=None):
        if meshes is None and self.rng.random() < 0.1:
            return self.choice(self.single)
        mesh = self.choice(meshes or self.meshes)
        return self.NamedSharding(mesh, self.spec_for(mesh, rank))

    # ---- checking ----

    def fail(self, what: str, detail: str) -> None:
        self.failures += 1
        if self.failures <= MAX_REPORTED:
            print(f"FAILURE in {what}: {detail}", flush=True)

    def check(self, what: str, array, expected, exact: bool = True, whole: bool | None = None) -> None:
        """Compare this process's shards of `array` (and sometimes its whole value) with NumPy's `expected`."""
        from meshax.experimental import multihost_utils

        self.checks += 1
        expected = np.asarray(expected)
        if tuple(array.shape) != expected.shape:
            self.fail(what, f"shape {array.shape}, NumPy {expected.shape}")
            return
        if exact and array.dtype != expected.dtype:
            self.fail(what, f"dtype {array.dtype}, NumPy {expected.dtype}")
        for shard in array.addressable_shards:
            self.compare(f"{what} (shard on {shard.device}, index {shard.index})", np.asarray(shard.data),
                         expected[shard.index], exact)
        whole = self.rng.random() < 0.2 if whole is None else whole
        if whole:  # a collective: decided by the shared random sequence, so every process takes part
            everyone = self.meshax.process_count()
            if everyone > 1 and len(array.sharding.process_indices) == everyone:
                value = multihost_utils.process_allgather(array, tiled=True)
            else:  # on some processes only (fully addressable on some, not on others): replicate it everywhere
                value = np.asarray(self.meshax.device_put(array, self.NamedSharding(self.full_meshes[0], self.P())))
            self.compare(f"{what} (whole value)", np.asarray(value).reshape(expected.shape), expected, exact)

    def compare(self, what: str, got: np.ndarray, expected: np.ndarray, exact: bool) -> None:
        try:
            if exact:
                np.testing.assert_array_equal(got, expected)
            else:
                scale = float(np.nanmax(np.abs(expected[np.isfinite(expected)]), initial=1.0))
                np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * scale, equal_nan=True)
        except AssertionError as error:
            self.fail(what, " ".join(str(error).split())[:400])

    # ---- the work ----

    def reshard(self) -> None:
        meshax = self.meshax
        shape = self.shape()
        dtype = self.choice([np.float32, np.int32, np.bool_, np.float16, np.int8, np.complex64])
        value = self.data(shape, dtype)
        source, target = self.sharding(len(shape)), self.sharding(len(shape))
        x = meshax.device_put(value, source)
        y = meshax.device_put(x, target)
        self.bytes_moved += value.nbytes
        if self.rng.random() < 0.3:  # a third hop, possibly back
            y = meshax.device_put(y, self.sharding(len(shape)))
            self.bytes_moved += value.nbytes
        self.check(f"reshard {shape} {np.dtype(dtype)} {source} -> {target}", y, value)
        self.counts["reshard"] += 1

    def numpy_op(self) -> None:
        meshax = self.meshax
        import meshax.numpy as jnp

        kind = self.choice(["unary", "binary", "reduce", "matmul", "reshape", "transpose", "index", "gather",
                            "concatenate"])
        meshes = self.full_meshes
        if kind == "matmul":
            m, k, n = (int(s) for s in self.rng.integers(1, 17 if self.rng.random() < 0.9 else 200, size=3))
            a, b = self.data((m, k)), self.data((k, n))
            mesh = self.choice(meshes)
            sa = self.NamedSharding(mesh, self.spec_for(mesh, 2))
            sb = self.NamedSharding(mesh, self.spec_for(mesh, 2))
            result = meshax.device_put(a, sa) @ meshax.device_put(b, sb)
            self.bytes_moved += a.nbytes + b.nbytes
            self.check(f"matmul {a.shape}@{b.shape} {sa.spec} {sb.spec}", result, a @ b, exact=False)
            self.counts["numpy"] += 1
            return
        shape = self.shape()
        dtype = self.choice([np.float32, np.float32, np.int32])
        value = self.data(shape, dtype)
        sharding = self.sharding(len(shape), meshes)
        x = meshax.device_put(value, sharding)
        self.bytes_moved += value.nbytes
        what = f"{kind} on {shape} {np.dtype(dtype)} {sharding}"
        exact = True
        with np.errstate(all="ignore"):
            if kind == "unary":
                name = self.choice(["tanh", "exp", "abs", "negative", "sin", "square"])
                if np.issubdtype(dtype, np.integer) and name in ("tanh", "exp", "sin"):
                    name = "abs"
                result, expected = getattr(jnp, name)(x), getattr(np, name)(value)
                exact = np.issubdtype(dtype, np.integer) or name in ("abs", "negative")
                what += f" {name}"
            elif kind == "binary":
                other = self.data(shape, dtype)
                y = meshax.device_put(other, sharding if self.rng.random() < 0.5 else self.sharding(len(shape), meshes))
                name = self.choice(["add", "subtract", "multiply", "maximum", "minimum", "where"])
                if name == "where":
                    result, expected = jnp.where(x > y, x, y), np.where(value > other, value, other)
                else:
                    result, expected = getattr(jnp, name)(x, y), getattr(np, name)(value, other)
                if self.rng.random() < 0.3:   # broadcasting with a host row
                    row = self.data(shape[-1:], dtype)
                    result, expected = result + row, expected + row
                what += f" {name} with {y.sharding}"
            elif kind == "reduce":
                name = self.choice(["sum", "max", "min", "mean"])
                axis = self.choice([None] + list(range(len(shape))))
                result = getattr(jnp, name)(x, axis=axis)
                expected = getattr(np, name)(value, axis=axis)
                exact = name in ("max", "min") or np.issubdtype(dtype, np.integer) and name == "sum"
                if name == "mean" or (name == "sum" and np.issubdtype(dtype, np.integer)):
                    expected = expected.astype(result.dtype)
                what += f" {name} axis={axis}"
            elif kind == "reshape":
                size = math.prod(shape)
                divisors = [d for d in range(1, size + 1) if size % d == 0]
                first = self.choice(divisors)
                target = (first, -1) if self.rng.random() < 0.5 else (first, size // first)
                result, expected = jnp.reshape(x, target), value.reshape(target)
                what += f" -> {target}"
            elif kind == "transpose":
                axes = tuple(int(a) for a in self.rng.permutation(len(shape)))
                result, expected = jnp.transpose(x, axes), np.transpose(value, axes)
                what += f" {axes}"
            elif kind == "index":
                key = []
                for size in shape:
                    pick = self.rng.random()
                    if pick < 0.3:
                        key.append(int(self.rng.integers(-size, size)))
                    else:
                        start, stop = (int(v) for v in self.rng.integers(-size - 2, size + 2, size=2))
                        key.append(slice(start, stop, self.choice([None, 1, 2, -1, 3])))
                key = tuple(key)
                result, expected = x[key], value[key]
                what += f" [{key}]"
            elif kind == "gather":
                axis = int(self.rng.integers(len(shape)))
                indices = self.rng.integers(0, shape[axis], size=int(self.rng.integers(1, 6)))
                result, expected = jnp.take(x, indices, axis=axis), np.take(value, indices, axis=axis)
                what += f" take {indices.tolist()} axis={axis}"
            else:  # concatenate
                axis = int(self.rng.integers(len(shape)))
                other_shape = list(shape)
                other_shape[axis] = int(self.rng.integers(1, 6))
                other = self.data(tuple(other_shape), dtype)
                y = meshax.device_put(other, sharding.with_spec(self.P()) if hasattr(sharding, "with_spec")
                                      else sharding)
                result = jnp.concatenate([x, y], axis=axis)
                expected = np.concatenate([value, other], axis=axis)
                what += f" axis={axis} with {other.shape}"
        self.check(what, result, expected, exact=exact)
        self.counts["numpy"] += 1

    def collective(self) -> None:
        meshax = self.meshax
        from meshax import lax

        mesh = self.choice(self.full_meshes)
        names = mesh.axis_names
        axes = self.choice([(name,) for name in names] + ([tuple(names)] if len(names) > 1 else []))
        size = math.prod(mesh.shape[a] for a in axes)
        axis_name = axes[0] if len(axes) == 1 else axes
        spec_axes = axes[0] if len(axes) == 1 else axes
        kind = self.choice(["psum", "all_gather", "ppermute", "psum_scatter", "pmax"])
        dtype = self.choice([np.float32, np.int32])
        block, cols = int(self.rng.integers(1, 5)), int(self.rng.integers(1, 6))
        if self.rng.random() < 0.15:  # large blocks, for the buffer pool
            block, cols = self.choice(BIG_ROWS), 8
        value = self.data((size * block, cols), dtype)
        blocks = value.reshape(size, block, cols)
        what = f"{kind} over {axes} of mesh {dict(mesh.shape)} on {value.shape} {np.dtype(dtype)}"
        exact = np.issubdtype(dtype, np.integer)
        P = self.P
        with np.errstate(all="ignore"):
            if kind == "psum":
                f = lambda b: lax.psum(b, axis_name)  # noqa: E731
                in_spec, out_spec, expected = P(spec_axes), P(), blocks.sum(axis=0)
                self.bytes_moved += 2 * blocks[0].nbytes * size
            elif kind == "pmax":
                f = lambda b: lax.pmax(b, axis_name)  # noqa: E731
                in_spec, out_spec, expected = P(spec_axes), P(), blocks.max(axis=0)
                exact = True
                self.bytes_moved += 2 * blocks[0].nbytes * size
            elif kind == "all_gather":
                f = lambda b: lax.all_gather(b, axis_name, tiled=True)  # noqa: E731
                in_spec, out_spec, expected = P(spec_axes), P(), value
                exact = True
                self.bytes_moved += value.nbytes * size
            elif kind == "ppermute":
                shift = int(self.rng.integers(1, size + 1))
                perm = [(i, (i + shift) % size) for i in range(size)]
                f = lambda b: lax.ppermute(b, axis_name, perm)  # noqa: E731
                in_spec, out_spec = P(spec_axes), P(spec_axes)
                expected = np.roll(blocks, shift, axis=0).reshape(value.shape)
                exact = True
                what += f" shift {shift}"
                self.bytes_moved += value.nbytes
            else:
                f = lambda b: lax.psum_scatter(b, axis_name, scatter_dimension=0, tiled=True)  # noqa: E731
                in_spec, out_spec = P(), P(spec_axes)
                expected = value * size if exact else (value * np.float32(size))
                self.bytes_moved += value.nbytes * size
            x = meshax.device_put(value, self.NamedSharding(mesh, in_spec))
            result = meshax.shard_map(f, mesh=mesh, in_specs=in_spec, out_specs=out_spec,
                                      check_vma=kind != "all_gather")(x)  # all_gather results vary (JAX 0.10)
        self.check(what, result, np.asarray(expected, result.dtype), exact=exact)
        self.counts["collective"] += 1

    def jit_call(self) -> None:
        m, k, n = (self.choice(JIT_SIDES) for _ in range(3))
        a, b = self.data((m, k)), self.data((k, n))
        mesh = self.choice(self.full_meshes)
        sa = self.NamedSharding(mesh, self.spec_for(mesh, 2))
        x = self.meshax.device_put(a, sa)
        if self.rng.random() < 0.5:
            self.check(f"jit matmul {a.shape}@{b.shape} {sa.spec}", self.jitted["matmul"](x, b),
                       np.tanh(a) @ b + np.float32(1.0), exact=False)
        else:
            self.check(f"jit reduce {a.shape} {sa.spec}", self.jitted["reduce"](x),
                       np.sum(a * np.float32(2.0), axis=0) - np.max(a, axis=1).sum(), exact=False)
        self.counts["jit"] += 1

    def step(self) -> None:
        work = self.choice([self.reshard, self.reshard, self.numpy_op, self.numpy_op, self.numpy_op, self.collective,
                            self.collective, self.jit_call])
        work()


def worker(args: argparse.Namespace) -> int:
    import meshax
    from meshax._src.runtime import buffers
    from meshax.experimental import multihost_utils

    meshax.distributed.initialize(collective_timeout_seconds=120)
    soak = Soak(args.seed, args.specials)
    began = time.monotonic()
    deadline = began + args.minutes * 60
    next_report = began + 30
    iterations = 0
    first_sample = None
    while True:
        # Process 0's clock decides, so that every process runs the same number of iterations.
        go = bool(multihost_utils.broadcast_one_to_all(np.array(time.monotonic() < deadline)))
        if not go:
            break
        try:
            soak.step()
        except Exception:  # an op raised on this process: report it; the job stops (meshax names us)
            print(f"FAILURE: iteration {iterations} raised:\n{traceback.format_exc()}", flush=True)
            raise
        iterations += 1
        if first_sample is None and time.monotonic() - began >= min(FIRST_RSS_SAMPLE, args.minutes * 60):
            first_sample = [rss_bytes(), buffers.pooled_bytes()]
        if soak.me == 0 and time.monotonic() >= next_report:
            next_report += 30
            print(f"soak: {time.monotonic() - began:.0f} s, {iterations} iterations, "
                  f"{soak.failures} failures on process 0", flush=True)
    failures = int(np.sum(multihost_utils.process_allgather(np.array(soak.failures))))
    checks = int(np.sum(multihost_utils.process_allgather(np.array(soak.checks))))
    first_sample = first_sample or [rss_bytes(), buffers.pooled_bytes()]
    memory = np.asarray(multihost_utils.process_allgather(np.array(first_sample + [rss_bytes(),
                                                                                  buffers.pooled_bytes()], np.int64)))
    grown = [int(p) for p, (rss_first, _, rss_end, _) in enumerate(memory) if rss_end > args.rss_growth * rss_first]
    if soak.me == 0:
        mib = 1 << 20
        for p, (rss_first, pool_first, rss_end, pool_end) in enumerate(memory):
            print(f"soak: process {p} RSS {rss_first / mib:.0f} MiB at 1 min -> {rss_end / mib:.0f} MiB at the end "
                  f"({rss_end / rss_first:.2f}x; buffer pool {pool_first / mib:.0f} -> {pool_end / mib:.0f} MiB)"
                  + (f": FAILURE, more than {args.rss_growth:g}x" if p in grown else ""), flush=True)
        elapsed = time.monotonic() - began
        counts = " ".join(f"{k}={v}" for k, v in soak.counts.items())
        print(f"soak: iterations={iterations} ({counts}) bytes_moved~={soak.bytes_moved / 2**20:.1f} MiB "
              f"shard_checks={checks} failures={failures} elapsed={elapsed:.0f}s seed={args.seed} "
              f"processes={meshax.process_count()} devices={meshax.device_count()}", flush=True)
    return 1 if failures or grown else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True, help="how long to run")
    parser.add_argument("--processes", type=int, default=4, help="number of processes (default 4)")
    parser.add_argument("--devices", type=int, default=2, help="CPU devices per process (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--no-check", action="store_true", help="run with MESHAX_CHECK=0 (desync checks off)")
    parser.add_argument("--specials", action="store_true", help="put NaN, inf and -0.0 into float data")
    parser.add_argument("--rss-growth", type=float, default=1.5,
                        help="fail if a process's RSS at the end exceeds this times its 1-minute value (default 1.5)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.processes < 1 or args.devices < 1:
        parser.error("--minutes, --processes and --devices must be positive")
    return worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    sys.exit(main())
