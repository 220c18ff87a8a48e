"""visualize_sharding against jax.debug.visualize_sharding, compared as plain text.

Shardings are real JAX NamedShardings over 8 forced host CPU devices, passed to
meshax's function by duck typing.
"""
import io
import os
import re
import sys
from contextlib import redirect_stdout

if "jax" not in sys.modules:
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from meshax._src.sharding.visualize import _draw, visualize_array_sharding, visualize_sharding  # noqa: E402

if len(jax.devices()) < 8:
    pytest.skip("needs 8 JAX CPU devices (jax was imported before XLA_FLAGS was set)",
                allow_module_level=True)

DEVS = np.array(jax.devices()[:8])
MESH = Mesh(DEVS.reshape(4, 2), ("i", "j"))
MESH_1D = Mesh(DEVS, ("i",))
SUBSET = Mesh(DEVS[[5, 1, 6, 2]].reshape(2, 2), ("i", "j"))
WIDE = Mesh(DEVS.reshape(2, 4), ("i", "j"))

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def text(fn, *args, **kwargs) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        fn(*args, **kwargs)
    return ANSI.sub("", out.getvalue())


def ours(shape, sharding, **kw):
    return text(visualize_sharding, shape, sharding, **kw)


def theirs(shape, sharding, **kw):
    return text(jax.debug.visualize_sharding, shape, sharding, **kw)


class Dev:
    """A stand-in device (any id)."""

    platform = "cpu"

    def __init__(self, id):
        self.id = id
        self.process_index = id // 131072

    def __repr__(self):
        return f"Dev({self.id})"


class MapSharding:
    """A sharding given by its device -> index map (JAX's function also wants device_set)."""

    def __init__(self, index_map):
        self.index_map = index_map
        self.device_set = set(index_map)

    def devices_indices_map(self, shape):
        return self.index_map


def test_seed_1d_eight_devices():
    got = ours((8,), NamedSharding(MESH_1D, P("i")), use_color=False)
    assert got.splitlines()[1] == "│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │"
    assert got == theirs((8,), NamedSharding(MESH_1D, P("i")), use_color=False)


SPECS_2D = [P("i", "j"), P("i", None), P(None, "j"), P(), P(("i", "j"),), P("j", "i"),
            P(None, ("j", "i")), P("j")]
SHAPES_2D = [(8, 8), (32, 32), (192, 128), (4096, 2048), (16, 8)]


@pytest.mark.parametrize("mesh", [MESH, SUBSET, WIDE], ids=["4x2", "subset", "2x4"])
@pytest.mark.parametrize("spec", SPECS_2D, ids=str)
def test_rank2_matches_jax(mesh, spec):
    s = NamedSharding(mesh, spec)
    for shape in SHAPES_2D:
        assert ours(shape, s, use_color=False) == theirs(shape, s, use_color=False), shape
    for kw in ({"scale": 2.0}, {"scale": 0.5}, {"min_width": 4}, {"max_width": 70}):
        assert ours((32, 16), s, use_color=False, **kw) == theirs((32, 16), s, use_color=False, **kw)


@pytest.mark.parametrize("mesh", [MESH, SUBSET, WIDE, MESH_1D], ids=["4x2", "subset", "2x4", "8"])
def test_rank1_matches_jax(mesh):
    specs = [P(), P("i"), P(mesh.axis_names)]
    if len(mesh.axis_names) == 2:
        specs += [P("j"), P(("j", "i"))]
    for spec in specs:
        s = NamedSharding(mesh, spec)
        for shape in [(8,), (32,), (1024,), (1,) if spec == P() else (8,)]:
            assert ours(shape, s, use_color=False) == theirs(shape, s, use_color=False), (spec, shape)


def test_known_pictures():
    rows = ours((8, 8), NamedSharding(MESH, P("i", None)), use_color=False).splitlines()
    assert [r.strip("│ ") for r in rows[1::2]] == ["CPU 0,1", "CPU 2,3", "CPU 4,5", "CPU 6,7"]
    cols = ours((8, 8), NamedSharding(MESH, P(None, "j")), use_color=False)
    assert "CPU 0,2,4,6" in cols and "CPU 1,3,5,7" in cols
    full = ours((8, 8), NamedSharding(MESH, P()), use_color=False)
    assert full.count("CPU") == 1 and "CPU 0,1,2,3,4,5,6,7" in full
    sub = ours((8, 8), NamedSharding(SUBSET, P("i", "j")), use_color=False).splitlines()
    assert [re.findall(r"CPU \d+", r) for r in sub if "CPU" in r] == [["CPU 5", "CPU 1"], ["CPU 6", "CPU 2"]]


def test_array_sharding_matches_jax():
    x = jax.device_put(np.zeros((16, 8), np.float32), NamedSharding(MESH, P("i", "j")))
    assert text(visualize_array_sharding, x, use_color=False) == text(
        jax.debug.visualize_array_sharding, x, use_color=False)


def test_colour_layout_matches_jax(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLORTERM", "truecolor")
    monkeypatch.delenv("NO_COLOR", raising=False)

    def cmap(x):
        return (0.2 + 0.6 * x, 0.5, 0.8 - 0.6 * x, 1.0)

    for shape, spec in [((8, 8), P("i", "j")), ((8,), P("i")), ((32,), P(("i", "j"))),
                        ((8, 8), P()), ((192, 128), P(None, "j")), ((64, 8), P("i"))]:
        s = NamedSharding(MESH, spec)
        assert ours(shape, s, color_map=cmap) == theirs(shape, s, color_map=cmap), (shape, spec)

    # Colour is drawn without borders, one background per cell, with the default palette too.
    out = io.StringIO()
    with redirect_stdout(out):
        visualize_sharding((8, 8), NamedSharding(MESH, P("i", "j")))
    raw = out.getvalue()
    assert "│" not in raw
    seed = ours((8,), NamedSharding(MESH_1D, P("i"))).splitlines()[0]
    assert seed == "".join(f"  CPU {k}  " for k in range(8))
    backgrounds = set(re.findall(r"48;2;(\d+;\d+;\d+)m", raw))
    assert len(backgrounds) == 8


def test_colour_off_without_terminal():
    console_out = io.StringIO()
    from rich.console import Console

    console = Console(file=console_out, width=80, color_system=None)
    _draw(console, (8,), NamedSharding(MESH_1D, P("i")), use_color=True)
    assert "\x1b[" not in console_out.getvalue() and "│ CPU 7 │" in console_out.getvalue()


def test_rank0_one_cell():
    got = ours((), NamedSharding(MESH, P()), use_color=False)
    assert got.splitlines()[1] == "│  CPU 0,1,2,3,4,5,6,7  │"
    assert got == theirs((1,), NamedSharding(MESH, P()), use_color=False)


def _block_map(s, shape, lead_index):
    """The 2-D index map of the devices holding leading index `lead_index` of a rank-3 array."""
    out = {}
    for dev, idx in s.devices_indices_map(shape).items():
        start, stop, _ = idx[0].indices(shape[0])
        if start <= lead_index < stop:
            out[dev] = idx[1:]
    return out


@pytest.mark.parametrize("spec", [P("i", None, "j"), P(None, "i", "j"), P("j", "i"), P()], ids=str)
def test_rank3_pictures_match_jax_per_block(spec):
    shape = (8, 32, 16)
    s = NamedSharding(MESH, spec)
    got = ours(shape, s, use_color=False)
    titles = re.findall(r"^\[.*\]$", got, flags=re.M)
    pictures = [p.strip("\n") + "\n" for p in re.split(r"^\[.*\]\n", got, flags=re.M)[1:]]
    assert len(titles) == len(pictures) >= 1
    n_lead = {"i": 4, "j": 2, None: 1}[spec[0] if len(spec) else None]
    assert len(titles) == n_lead
    for title, picture in zip(titles, pictures):
        lead = title[1:-1].split(", ")[0]
        first = 0 if lead == ":" else int(lead.split(":")[0])
        block = MapSharding(_block_map(s, shape, first))
        assert picture == theirs(shape[1:], block, use_color=False).strip("\n") + "\n", title
    if n_lead == 4:
        assert titles == ["[0:2, :, :]", "[2:4, :, :]", "[4:6, :, :]", "[6:8, :, :]"]
    if n_lead == 1:
        assert titles == ["[:, :, :]"]


def test_rank4_titles():
    got = ours((2, 4, 8, 8), NamedSharding(MESH, P(None, "i", "j")), use_color=False)
    assert re.findall(r"^\[.*\]$", got, flags=re.M) == [f"[:, {k}, :, :]" for k in range(4)]
    assert got.count("CPU 0") == 1 and got.count("CPU 7") == 1


def test_multiprocess_ids():
    devs = [Dev(131072 * p + k) for p in range(1, 3) for k in range(4)]
    s = MapSharding({d: (slice(k, k + 1),) for k, d in enumerate(devs)})
    got = ours((8,), s, use_color=False)
    for d in devs:
        assert f"CPU {d.id}" in got  # never wrapped or cut, even though wider than 80
    assert len(got.splitlines()[1]) == 8 * 11 + 1
    # Where JAX's picture fits, it is the same.
    small = MapSharding({d: (slice(k, k + 1),) for k, d in enumerate(devs[:4])})
    assert ours((4,), small, use_color=False) == theirs((4,), small, use_color=False)
    mixed = MapSharding({Dev(i): (slice(None), slice(None)) for i in (131073, 5, 131072, 7)})
    assert "CPU 5,7,131072,131073" in ours((8, 8), mixed, use_color=False)
    assert ours((8, 8), mixed, use_color=False) == theirs((8, 8), mixed, use_color=False)


def test_long_label_wraps_at_commas_within_max_width():
    ids = [131072 * p + k for p in range(3) for k in range(8)]
    s = MapSharding({Dev(i): (slice(None), slice(None)) for i in ids})
    got = ours((8, 8), s, use_color=False)
    assert max(len(line) for line in got.splitlines()) <= 80
    body = "".join(line.strip("│ ") for line in got.splitlines()[1:-1])
    assert body == "CPU " + ",".join(map(str, ids))


def test_too_wide_keeps_labels():
    # JAX lets rich squeeze these cells until the labels vanish; we shrink the padding.
    got = ours((8, 1024), NamedSharding(MESH, P("j", "i")), use_color=False)
    assert all(len(line) <= 80 for line in got.splitlines())
    assert sorted(re.findall(r"CPU \d", got)) == [f"CPU {k}" for k in range(8)]


def test_uneven_blocks():
    s = MapSharding({Dev(0): (slice(0, 6),), Dev(1): (slice(6, 8),), Dev(2): (slice(0, 8),)})
    got = ours((8,), s, use_color=False, min_width=1, scale=10)
    cells = [c.strip() for c in got.splitlines()[1].split("│")[1:-1]]
    assert cells == ["CPU 0,2", "CPU 1,2"]
    widths = [len(c) for c in got.splitlines()[1].split("│")[1:-1]]
    assert widths[0] > widths[1]


def test_meshax_devices():
    from meshax import Device

    devs = [Device(131072 * p + k, p, k) for p in range(2) for k in range(2)]
    s = MapSharding({d: (slice(2 * (k // 2), 2 * (k // 2) + 2), slice(None)) for k, d in enumerate(devs)})
    got = ours((4, 4), s, use_color=False)
    assert "CPU 0,1" in got and "CPU 131072,131073" in got
