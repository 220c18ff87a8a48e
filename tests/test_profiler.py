"""meshax.profiler (jax.profiler): its API against JAX's, the Chrome trace files it writes (single process: a jitted
training step, a shard_map, annotations on 8 devices) and `meshax launch --profile` merging a job's processes."""
from __future__ import annotations

import gzip
import inspect
import json
import socket
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P
from meshax._src.core.core import eager_trace
from meshax._src.interpreters import eager
from meshax._src.profiler import recorder, writer

import jax  # noqa: E402  (the oracle)
import jax.numpy as jjnp  # noqa: E402

from multiprocess import PYTHON, child_env, collect, lines_by_process, start

API = ["start_trace", "stop_trace", "trace", "annotate_function", "device_memory_profile",
       "save_device_memory_profile", "start_server", "stop_server", "StepTraceAnnotation"]


def _trace_file(log_dir: Path) -> Path:
    files = sorted(log_dir.glob("plugins/profile/*/*.trace.json.gz"))
    assert len(files) == 1, files
    return files[0]


def _load(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _timed(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def _thread_names(doc: dict, pid: int | None = None) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name" and (pid is None or e["pid"] == pid)}


def _loss(w, x, np_):
    return np_.mean(np_.tanh(x @ w) ** 2)


@pytest.mark.parametrize("name", API)
def test_signatures_are_jax_s(name: str) -> None:
    ours, theirs = inspect.signature(getattr(meshax.profiler, name)), inspect.signature(getattr(jax.profiler, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def test_profile_options_and_errors_are_jax_s(tmp_path: Path) -> None:
    ours, theirs = meshax.profiler.ProfileOptions(), jax.profiler.ProfileOptions()
    fields = [a for a in dir(theirs) if not a.startswith("_")]
    assert {a: getattr(ours, a) for a in fields} == {a: getattr(theirs, a) for a in fields}
    for module in (meshax.profiler, jax.profiler):
        with pytest.raises(RuntimeError, match="No profile started"):
            module.stop_trace()
        with pytest.raises(ValueError, match="No active profiler server"):
            module.stop_server()
    meshax.profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="already been started"):
            meshax.profiler.start_trace(tmp_path)
    finally:
        meshax.profiler.stop_trace()
    with pytest.raises(NotImplementedError, match="no XLA profiler server"):
        meshax.profiler.start_server(9999)


def test_recording_costs_nothing_when_off(tmp_path: Path) -> None:
    """Off: the plain eager trace, the recorder's flag down; on: the recording variant, also with debug_nans."""
    assert not recorder.on and type(eager_trace()) is eager.EagerTrace
    with meshax.profiler.trace(tmp_path):
        assert recorder.on and type(eager_trace()) is eager._RecordedEagerTrace
        meshax.config.update("jax_debug_nans", True)
        try:
            assert type(eager_trace()) is eager._RecordedCheckingEagerTrace
            with pytest.raises(FloatingPointError):
                jnp.log(jnp.zeros(3) - 1.0)
        finally:
            meshax.config.update("jax_debug_nans", False)
        assert type(eager_trace()) is eager._RecordedEagerTrace
    assert not recorder.on and type(eager_trace()) is eager.EagerTrace


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """One trace of: a jitted training step on a batch over 8 devices, a shard_map with psum (eager and jitted), an
    eager sum across devices, and annotations; with the values computed under it."""
    log_dir = tmp_path_factory.mktemp("trace")
    mesh = meshax.make_mesh((8,), ("i",))
    data = np.arange(64, dtype=np.float32).reshape(16, 4) / 64
    x = meshax.device_put(data, NamedSharding(mesh, P("i")))
    w = jnp.ones((4, 3))
    step = meshax.jit(lambda w, x: w - 0.1 * meshax.grad(_loss)(w, x, jnp))
    summed = meshax.shard_map(lambda b: lax.psum(jnp.sin(b), "i"), mesh=mesh, in_specs=P("i"), out_specs=P())

    @meshax.profiler.annotate_function
    def annotated(v):
        return v * 2

    values = {}
    with meshax.profiler.trace(log_dir):
        with meshax.profiler.StepTraceAnnotation("train", step_num=7):
            values["step"] = np.asarray(step(w, x))
        with meshax.profiler.TraceAnnotation("collectives", kind="psum"):
            values["psum"] = np.asarray(summed(x))
            values["psum_jit"] = np.asarray(meshax.jit(summed)(x))
            values["sum"] = np.asarray(jnp.sum(x))
        values["annotated"] = np.asarray(annotated(jnp.arange(3.0)))
        values["one_device"] = np.asarray(meshax.jit(lambda v: jnp.sin(v) + 1)(jnp.arange(4.0)))
    return _load(_trace_file(log_dir)), values


def test_values_under_a_trace_are_jax_s(traced_run: tuple[dict, dict]) -> None:
    _, values = traced_run
    data = np.arange(64, dtype=np.float32).reshape(16, 4) / 64
    w = jjnp.ones((4, 3))
    expected = jax.jit(lambda w, x: w - 0.1 * jax.grad(_loss)(w, x, jjnp))(w, data)
    np.testing.assert_allclose(values["step"], expected, rtol=1e-6)
    jmesh = jax.make_mesh((8,), ("i",))
    sharded = jax.device_put(data, jax.NamedSharding(jmesh, jax.P("i")))
    psum = jax.shard_map(lambda b: jax.lax.psum(jjnp.sin(b), "i"), mesh=jmesh, in_specs=jax.P("i"),
                         out_specs=jax.P())(sharded)
    np.testing.assert_allclose(values["psum"], psum, rtol=1e-6)
    np.testing.assert_allclose(values["psum_jit"], psum, rtol=1e-6)
    np.testing.assert_allclose(values["sum"], jjnp.sum(data), rtol=1e-6)
    np.testing.assert_allclose(values["one_device"], jax.jit(lambda v: jjnp.sin(v) + 1)(jjnp.arange(4.0)), rtol=1e-6)
    twice = jax.profiler.annotate_function(lambda v: v * 2)
    np.testing.assert_array_equal(values["annotated"], twice(jjnp.arange(3.0)))


def test_the_file_is_a_chrome_trace_with_a_track_per_device(traced_run: tuple[dict, dict]) -> None:
    doc, _ = traced_run
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"} and doc["displayTimeUnit"] == "ns"
    other = doc["otherData"]
    assert other["process_index"] == 0 and other["devices"] == list(range(8))
    names = _thread_names(doc)
    for device in range(8):
        assert names[device] == f"cpu:{device} (process 0)"
    assert names[writer.HOST_TID] == "process 0 (host)" and names[writer.COLLECTIVES_TID] == "process 0 MPI"
    process = [e for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert [e["args"]["name"].startswith("process 0 on ") for e in process] == [True]
    timed = _timed(doc)
    assert {e["pid"] for e in doc["traceEvents"]} == {0}
    for event in timed:
        assert event["dur"] > 0 and {"name", "cat", "ts", "tid"} <= set(event)
        assert other["trace_begin_us"] <= event["ts"] and event["ts"] + event["dur"] <= other["trace_end_us"] + 1e-3
    on_devices = Counter(e["tid"] for e in timed if e["cat"] == "device")
    assert sorted(on_devices) == list(range(8)), on_devices


def _within(inner: dict, outer: dict) -> bool:
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 1e-3


def test_primitives_collectives_and_annotations_are_events(traced_run: tuple[dict, dict]) -> None:
    doc, _ = traced_run
    timed = _timed(doc)
    by_name = {}
    for event in timed:
        by_name.setdefault(event["name"], []).append(event)
    step = by_name["train"][0]
    assert step["cat"] == "step" and step["args"] == {"step_num": 7} and step["tid"] == writer.HOST_TID
    jitted = [e for e in by_name["jit(<lambda>)"] if _within(e, step)]
    assert jitted and jitted[0]["cat"] == "jit"
    inside_step = {e["name"] for e in timed if _within(e, step) and e is not step}
    assert {"dot_general", "tanh"} <= inside_step, inside_step  # the step's primitives
    assert any(e["cat"] == "device" and e["name"] == "fused" for e in timed if _within(e, step))
    block = by_name["collectives"][0]
    assert block["args"] == {"kind": "psum"} and block["cat"] == "annotation"
    assert any(_within(e, block) for e in by_name["shard_map"])  # the jitted shard_map, as one operation
    reduction = [e for e in by_name["all-reduce sum over i"] if _within(e, block)]
    assert reduction and reduction[0]["cat"] == "collective" and reduction[0]["tid"] == writer.COLLECTIVES_TID
    assert reduction[0]["args"]["devices"] == list(range(8)) and reduction[0]["args"]["bytes"] > 0
    assert by_name["traced_run.<locals>.annotated"][0]["cat"] == "annotation"  # its qualified name, as in JAX
    assert any(e["cat"] == "compile" and e["name"] == "prepare program" for e in timed)  # a one-device jit's program
    assert any(e["cat"] == "program" and e["name"] == "sin" for e in timed)


def test_a_shard_map_s_psum_is_a_collective_and_its_body_runs_on_each_device(traced_run: tuple[dict, dict]) -> None:
    doc, _ = traced_run
    timed = _timed(doc)
    block = next(e for e in timed if e["name"] == "collectives")
    eager_map = [e for e in timed if e["name"] == "shard_map(<lambda>)" and _within(e, block)]
    assert eager_map and eager_map[0]["tid"] == writer.HOST_TID
    psums = [e for e in timed if e["cat"] == "collective" and _within(e, eager_map[0])]
    assert [e["name"] for e in psums] == ["all-reduce sum over i"] and psums[0]["args"]["devices"] == list(range(8))
    body = [e for e in timed if e["name"] == "sin" and _within(e, eager_map[0])]
    ran_on = {e["tid"] for e in body if e["cat"] == "device"} | {d for e in body if e["cat"] == "joined"
                                                                 for d in e["args"]["devices"]}
    assert ran_on == set(range(8)), body
    assert any(e["cat"] == "compile" and e["name"] == "trace jit(<lambda>)" for e in timed)


def test_perfetto_trace_is_written_too(tmp_path: Path) -> None:
    with meshax.profiler.trace(tmp_path, create_perfetto_trace=True):
        jnp.arange(3.0).block_until_ready()
    (folder,) = (tmp_path / "plugins" / "profile").iterdir()
    assert {p.name for p in folder.iterdir()} == {f"{socket.gethostname()}.trace.json.gz", "perfetto_trace.json.gz"}
    assert _load(folder / "perfetto_trace.json.gz")["displayTimeUnit"] == "ns"


def _pprof_fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level fields of a protocol buffer (varints and length-delimited ones)."""
    fields, position = [], 0

    def varint() -> int:
        nonlocal position
        value = shift = 0
        while True:
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while position < len(data):
        key = varint()
        if key & 7 == 0:
            fields.append((key >> 3, varint()))
        else:
            assert key & 7 == 2, key
            length = varint()
            fields.append((key >> 3, data[position:position + length]))
            position += length
    return fields


def test_device_memory_profile_is_gzipped_pprof_as_jax_s(tmp_path: Path) -> None:
    mesh = meshax.make_mesh((8,), ("i",))
    kept = meshax.device_put(np.zeros((8, 1000), np.float32), NamedSharding(mesh, P("i")))  # noqa: F841 - alive
    ours, theirs = meshax.profiler.device_memory_profile(), jax.profiler.device_memory_profile()
    assert type(ours) is type(theirs) is bytes and ours[:2] == theirs[:2] == b"\x1f\x8b"  # gzip'd, as JAX's
    for profile in (ours, theirs):  # both parse as protocol buffers with a string table and sample types
        fields = _pprof_fields(gzip.decompress(profile))
        assert {1, 6} <= {number for number, _ in fields}
    fields = _pprof_fields(gzip.decompress(ours))
    strings = [value.decode() for number, value in fields if number == 6]
    assert strings[0] == "" and {"space", "bytes", "Array float32[8, 1000]", str(meshax.devices()[3])} <= set(strings)
    samples = [_varints(dict(_pprof_fields(sample))[2]) for number, sample in fields if number == 2]
    assert all(count == 1 for count, _ in samples) and sum(space for _, space in samples) >= 8 * 1000 * 4
    path = tmp_path / "memory.prof"
    meshax.profiler.save_device_memory_profile(path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"


def _varints(packed: bytes) -> list[int]:
    """The numbers of a packed varint field (a sample's values: its count and its bytes)."""
    numbers, value, shift = [], 0, 0
    for byte in packed:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            numbers.append(value)
            value = shift = 0
    return numbers


def test_launch_profile_merges_every_process(tmp_path: Path) -> None:
    profile, window = tmp_path / "prof", tmp_path / "window"
    proc = start([PYTHON, "-m", "meshax", "launch", "-n", "2", "--cpu-devices", "4", "--profile", str(profile),
                  "tests/programs/profile_job.py", str(window)], child_env())
    result = collect([proc], timeout=60)[0]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"trace of 2 process(es) in {profile / 'trace.json.gz'}" in result.stderr
    weights = {p: lines[-1] for p, lines in lines_by_process(result.stdout).items()}
    data = np.arange(32 * 4, dtype=np.float32).reshape(32, 4) / 100
    w = jjnp.ones((4, 2))
    for _ in range(2):
        w = w - 0.1 * jax.grad(lambda w: jjnp.mean(jjnp.tanh(data @ w) ** 2))(w)
    for line in weights.values():
        np.testing.assert_allclose(json.loads(line.split(" ", 1)[1]), w, rtol=1e-6)
    doc = _load(profile / "trace.json.gz")
    assert doc["displayTimeUnit"] == "ns" and [o["process_index"] for o in doc["otherData"]["processes"]] == [0, 1]
    timed = _timed(doc)
    assert {e["pid"] for e in timed} == {0, 1}
    devices = {(pid, tid) for pid in (0, 1) for tid, name in _thread_names(doc, pid).items() if name.startswith("cpu:")}
    assert len(devices) == 8 and {tid for _, tid in devices} == {p * 131072 + i for p in (0, 1) for i in range(4)}
    for pid in (0, 1):
        mine = [e for e in timed if e["pid"] == pid]
        collectives = [e for e in mine if e["cat"] == "collective" and e["name"].startswith("MPI Allreduce")]
        waits = [e for e in mine if e["cat"] == "wait"]
        assert collectives and waits and all(e["args"]["bytes"] > 0 for e in collectives)
        assert all(any(_within(w, c) for c in collectives) for w in waits)
        assert [e["args"]["step_num"] for e in mine if e["name"] == "train"] == [0, 1]
        assert {e["tid"] for e in mine if e["cat"] == "device"} == {pid * 131072 + i for i in range(4)}
    assert [e["ts"] for e in timed] == sorted(e["ts"] for e in timed)
    windows = {path.name: _load(path) for path in window.glob("plugins/profile/*/*.trace.json.gz")}
    host = socket.gethostname()
    assert sorted(windows) == [f"{host}.process_0.trace.json.gz", f"{host}.process_1.trace.json.gz"]
    for pid in (0, 1):  # each process's own trace of the second step, taken inside the job's recording
        mine = _timed(windows[f"{host}.process_{pid}.trace.json.gz"])
        assert [e["args"]["step_num"] for e in mine if e["name"] == "train"] == [1]
        assert any(e["cat"] == "collective" for e in mine) and {e["pid"] for e in mine} == {pid}


def test_launch_help_documents_profile() -> None:
    proc = start([PYTHON, "-m", "meshax", "launch", "--help"], child_env())
    result = collect([proc], timeout=30)[0]
    assert result.returncode == 0 and "--profile DIR" in result.stdout and "trace.json.gz" in result.stdout


def test_unchanged_jax_code_traces_under_as_jax(tmp_path: Path) -> None:
    """`import jax.profiler` answered by meshax (python -m meshax.as_jax): JAX's usage writes the same layout."""
    script = tmp_path / "prog.py"
    script.write_text("import sys\nimport jax, jax.numpy as jnp\nimport jax.profiler\n"
                      "with jax.profiler.trace(sys.argv[1]):\n"
                      "    with jax.profiler.TraceAnnotation('block'):\n"
                      "        print(float(jax.jit(lambda x: jnp.sum(x * 2))(jnp.arange(4.0))))\n")
    proc = start([PYTHON, "-m", "meshax.as_jax", str(script), str(tmp_path / "log")], child_env(cpu_devices=2))
    result = collect([proc], timeout=60)[0]
    assert result.returncode == 0 and result.stdout.strip() == "12.0", result.stderr[-2000:]
    doc = _load(_trace_file(tmp_path / "log"))
    assert {"block", "jit(<lambda>)"} <= {e["name"] for e in _timed(doc)}
    assert sorted(tid for tid, name in _thread_names(doc).items() if name.startswith("cpu:")) == [0, 1]
