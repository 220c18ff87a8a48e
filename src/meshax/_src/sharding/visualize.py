"""Drawing how an array is laid out over devices, like ``jax.debug.visualize_sharding``.

The picture is a ``rich`` table: one cell per block of the array, labelled with
the platform and the ids of the devices holding that block (``CPU 0,1``). Cell
heights follow the block's extent along dimension 0 and cell widths its extent
along the last dimension. For the shapes JAX accepts (rank 1 and 2) and tables
that fit in ``max_width`` columns, the plain-text output is the same as JAX's.
"""
from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Any, Callable, Sequence, Union

Color = Union[tuple, str]
ColorMap = Callable[[float], Color]

# Terminal cells are roughly 2.5 times as tall as they are wide.
_HEIGHT_TO_WIDTH = 2.5

# The 20 colours of the "tab20b" qualitative palette (Vega's category20b), the
# default palette, so that colour needs no matplotlib.
_TAB20B = (
    "#393b79", "#5254a3", "#6b6ecf", "#9c9ede",
    "#637939", "#8ca252", "#b5cf6b", "#cedb9c",
    "#8c6d31", "#bd9e39", "#e7ba52", "#e7cb94",
    "#843c39", "#ad494a", "#d6616b", "#e7969c",
    "#7b4173", "#a55194", "#ce6dbd", "#de9ed6",
)


def _default_color_map(x: float) -> str:
    """A listed colour map over the tab20b palette: [0, 1] -> hex colour."""
    n = len(_TAB20B)
    return _TAB20B[min(max(int(x * n), 0), n - 1)]


def _hex_color(color: Color) -> str:
    """`#RRGGBB` for a hex string or an (r, g, b[, a]) tuple of floats in [0, 1]."""
    if isinstance(color, str):
        return color
    r, g, b = (int(round(min(max(float(c), 0.0), 1.0) * 255)) for c in tuple(color)[:3])
    return f"#{r:02X}{g:02X}{b:02X}"


def _text_color_for(background: str) -> str:
    """Black text on light backgrounds, white on dark ones."""
    try:
        from rich.color import Color as RichColor

        r, g, b = RichColor.parse(background).get_truecolor()
    except Exception:  # an unusual colour name: keep rich's default
        return "#ffffff"
    luma = 0.299 * r + 0.587 * g + 0.114 * b
    return "#000000" if luma > 186 else "#ffffff"


def _color_values(n: int) -> list[float]:
    """n points of [0, 1], ordered so that neighbouring cells get distant colours.

    Walks the evenly spaced points with a stride of about half their number
    (coprime with it, so every point is used once).
    """
    if n <= 1:
        return [0.0] * n
    stride = n // 2 + (1 if n % 2 == 0 else 0)
    while math.gcd(stride, n) != 1:
        stride += 1
    return [((k * stride) % n) / (n - 1) for k in range(n)]


def _bounds(slc: Any, size: int) -> tuple[int, int]:
    """[start, stop) of one index entry of `devices_indices_map` in a dimension of `size`."""
    if isinstance(slc, slice):
        start, stop, _ = slc.indices(size)
        return start, max(stop, start)
    index = int(slc)  # an integer index
    if index < 0:
        index += size
    return index, index + 1


def _blocks(shape: Sequence[int], index_map: dict) -> tuple[list[list[tuple[int, int]]], dict]:
    """Splits each dimension into the intervals no shard boundary cuts.

    Returns (intervals per dimension, {cell (interval index per dim): set of device ids}).
    For the even shardings JAX makes, the intervals of a dimension are its shards.
    """
    rank = len(shape)
    spans = {}
    edges: list[set[int]] = [{0, n} for n in shape]
    for dev, idx in index_map.items():
        idx = tuple(idx) if idx is not None else ()
        idx = idx + (slice(None),) * (rank - len(idx))
        bnds = tuple(_bounds(s, n) for s, n in zip(idx, shape))
        spans[dev] = bnds
        for d, (a, b) in enumerate(bnds):
            edges[d].update((a, b))
    cuts = [sorted(e) for e in edges]
    intervals = [
        [(lo, hi) for lo, hi in zip(c, c[1:]) if hi > lo] or [(0, 0)] for c in cuts
    ]
    cells: dict[tuple[int, ...], set[int]] = {}
    for dev, bnds in spans.items():
        ranges = []
        for d, (a, b) in enumerate(bnds):
            if shape[d] == 0:
                ranges.append(range(1))
                continue
            # intervals of dim d inside [a, b): those starting at or after a, ending at or before b
            first = bisect_left(cuts[d], a)
            last = bisect_right(cuts[d], b) - 1
            ranges.append(range(first, max(last, first)))
        for cell in _product(ranges):
            cells.setdefault(cell, set()).add(dev.id)
    return intervals, cells


def _product(ranges: list) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for r in ranges:
        out = [c + (i,) for c in out for i in r]
    return out


def _wrap_ids(kind: str, ids: list[int], limit: int) -> list[str]:
    """The cell label as lines; the id list is broken after commas only if longer than `limit`."""
    if not ids:
        return [f"{kind} -"]
    label = f"{kind} " + ",".join(str(i) for i in ids)
    if len(label) <= limit:
        return [label]
    lines: list[str] = []
    line, fresh = f"{kind} ", True
    for k, i in enumerate(ids):
        token = str(i) + ("," if k < len(ids) - 1 else "")
        if len(line) + len(token) > limit and not fresh:
            lines.append(line)
            line = ""
        line, fresh = line + token, False
    lines.append(line)
    return lines


def _fit_columns(wanted: list[int], needed: list[int], room: int) -> list[int]:
    """Column widths summing to at most `room`, shrinking the wanted widths but never below needed."""
    if sum(wanted) <= room:
        return wanted
    if sum(needed) >= room:
        return list(needed)
    fixed = [False] * len(wanted)
    widths = [float(w) for w in wanted]
    while True:
        free_room = room - sum(n for n, f in zip(needed, fixed) if f)
        free_wanted = sum(w for w, f in zip(wanted, fixed) if not f)
        scale = free_room / free_wanted if free_wanted else 0.0
        changed = False
        for c, w in enumerate(wanted):
            if fixed[c]:
                widths[c] = needed[c]
            else:
                widths[c] = w * scale
                if widths[c] < needed[c]:
                    fixed[c] = True
                    changed = True
        if not changed:
            break
    out = [max(int(w), n) for w, n in zip(widths, needed)]
    spare = room - sum(out)
    for c in range(len(out)):
        if spare <= 0:
            break
        if out[c] < wanted[c]:
            out[c] += 1
            spare -= 1
    return out


def _grid(shape2: Sequence[int], rank1: bool, intervals, cells, kind: str, *,
          use_color: bool, scale: float, min_width: int, max_width: int,
          color_map: ColorMap | None, highlight: bool):
    """One table for a 1-D or 2-D block layout. Returns (table, width the table needs)."""
    import rich.align
    import rich.box
    import rich.padding
    import rich.style
    import rich.table
    import rich.text

    rows_iv, cols_iv = intervals
    n_rows, n_cols = len(rows_iv), len(cols_iv)
    extent0 = max(shape2[0], 1)
    extent1 = max(shape2[1], 1)
    base_height = int(10 * scale)
    aspect = (1 if rank1 else shape2[1]) / extent0
    base_width = int(base_height * aspect)
    col_frac_denominator = extent0 if rank1 else extent1

    labels = {}
    for i in range(n_rows):
        for j in range(n_cols):
            ids = sorted(cells.get((i, j), ()))
            labels[i, j] = _wrap_ids(kind, ids, max(max_width - 2, 1))
    label_width = {key: max(len(line) for line in lines) for key, lines in labels.items()}

    # Horizontal padding of each cell, sized as JAX sizes it: the cell is
    # `width` wide, less 2 for borders (or, in colour, plus a margin of 1 a side).
    margin = 1 if use_color else 0
    pads = {}
    for j, (lo, hi) in enumerate(cols_iv):
        frac = (hi - lo) / col_frac_denominator
        width = min(max(int(frac * base_width * _HEIGHT_TO_WIDTH), min_width), max_width)
        for i in range(n_rows):
            left, extra = divmod(width - label_width[i, j] - 2, 2)
            pads[i, j] = (max(left + margin, 0), max(left + extra + margin, 0))
    col_width = [max(label_width[i, j] + sum(pads[i, j]) for i in range(n_rows))
                 for j in range(n_cols)]
    borders = 0 if use_color else n_cols + 1
    if sum(col_width) + borders > max_width:
        # Too wide: take the room from the padding, not from the labels.
        need = [max(label_width[i, j] for i in range(n_rows)) for j in range(n_cols)]
        col_width = _fit_columns(col_width, need, max_width - borders)
        for (i, j), w in label_width.items():
            left, extra = divmod(col_width[j] - w, 2)
            pads[i, j] = (left, left + extra)
    table_width = sum(col_width) + borders

    heights = []
    for lo, hi in rows_iv:
        heights.append(1 if rank1 else int((hi - lo) / extent0 * base_height))

    colors = iter(_color_values(n_rows * n_cols))
    cmap = color_map or _default_color_map
    table = rich.table.Table(
        show_header=False, show_lines=not use_color, padding=0, highlight=highlight,
        pad_edge=False, box=None if use_color else rich.box.SQUARE)
    for i in range(n_rows):
        row = []
        for j in range(n_cols):
            lines = labels[i, j]
            left, right = pads[i, j]
            top, extra = divmod(heights[i] - len(lines) - 1, 2)
            bottom = top + extra
            style = None
            if use_color:
                bg = _hex_color(cmap(next(colors)))
                style = rich.style.Style(bgcolor=bg, color=_text_color_for(bg))
            top, bottom = max(top + margin, 0), max(bottom + margin, 0)
            if len(lines) == 1:
                body = rich.align.Align(lines[0], "center", vertical="middle")
            else:
                body = rich.text.Text("\n".join(lines), justify="center")
            row.append(rich.padding.Padding(body, (top, right, bottom, left),
                                            style=style or ""))
        table.add_row(*row)
    return table, table_width


def _leading_title(shape: Sequence[int], block: Sequence[tuple[int, int]]) -> str:
    parts = []
    for n, (lo, hi) in zip(shape, block):
        if lo == 0 and hi == n:
            parts.append(":")
        elif hi - lo == 1:
            parts.append(str(lo))
        else:
            parts.append(f"{lo}:{hi}")
    return "[" + ", ".join(parts + [":", ":"]) + "]"


def _draw(console, shape: Sequence[int], sharding, *, use_color: bool = True,
          scale: float = 1.0, min_width: int = 9, max_width: int = 80,
          color_map: ColorMap | None = None) -> None:
    """Prints the picture of `sharding` over `shape` on a given rich console."""
    shape = tuple(int(n) for n in shape)
    index_map = sharding.devices_indices_map(shape)
    if not index_map:
        raise ValueError("the sharding has no devices")
    kind = str(next(iter(index_map)).platform).upper()
    use_color = bool(use_color) and console.color_system is not None
    style = dict(use_color=use_color, scale=scale, min_width=min_width,
                 max_width=max_width, color_map=color_map, highlight=not use_color)

    pictures: list[tuple[str | None, Any, int]] = []
    if len(shape) <= 1:
        shape1 = shape or (1,)
        if not shape:
            index_map = {dev: (slice(None),) for dev in index_map}
        (iv,), cells1 = _blocks(shape1, index_map)
        cells = {(0, j): ids for (j,), ids in cells1.items()}
        table, width = _grid((shape1[0], 1), True, ([(0, 1)], iv), cells, kind, **style)
        pictures.append((None, table, width))
    else:
        intervals, cells = _blocks(shape, index_map)
        lead = len(shape) - 2
        for block in _product([range(len(iv)) for iv in intervals[:lead]]):
            sub = {cell[lead:]: ids for cell, ids in cells.items() if cell[:lead] == block}
            table, width = _grid(shape[lead:], False, intervals[lead:], sub, kind, **style)
            title = None
            if lead:
                title = _leading_title(shape[:lead], [intervals[d][k] for d, k in enumerate(block)])
            pictures.append((title, table, width))

    # Grow the console (never shrink it) when the labels alone are wider than
    # max_width, so that no device id is wrapped away or cut off.
    need = max(width for _, _, width in pictures)
    if console.width < need:
        console.width = need
    for k, (title, table, _) in enumerate(pictures):
        if title is not None:
            if k:
                console.print()
            console.print(title, highlight=False, markup=False)
        console.print(table, end="\n\n")


def visualize_sharding(shape: Sequence[int], sharding, *, use_color: bool = True,
                       scale: float = 1.0, min_width: int = 9, max_width: int = 80,
                       color_map: ColorMap | None = None) -> None:
    """Prints how an array of `shape` is split over devices by `sharding`, using ``rich``.

    Like ``jax.debug.visualize_sharding``: each cell of the picture is one block
    of the array, labelled with the platform and the sorted ids of the devices
    holding it, e.g. ``CPU 0`` or ``CPU 0,1`` (ids are never abbreviated). Rank 1
    draws one row of cells; rank 2 draws a row per shard of dimension 0 and a
    column per shard of dimension 1, with heights and widths proportional to the
    shard sizes. A fully replicated array is one cell listing every device.

    Beyond JAX:

    * Rank 0 draws a single cell listing all devices (as a 1-element vector would).
    * Rank > 2 draws one 2-D picture of the last two dimensions per block of the
      leading dimensions, each under a title line giving that block as an index
      expression: ``[1, :, :]`` (leading index 1), ``[0:4, :, :]`` (the block
      covers indices 0 to 3 of a sharded leading dimension), ``[:, :, :]`` (the
      leading dimension is not sharded, so one picture stands for all of it).
      Leading blocks are the pieces no shard boundary cuts, so there are at most
      as many pictures as the leading dimensions have shards.
    * When the table would be wider than `max_width`, horizontal padding is
      shrunk first (JAX lets rich squeeze the labels away instead); when even the
      bare labels do not fit, the picture is drawn wider than `max_width`. A
      label longer than `max_width` is broken after commas. Long ids such as
      multi-process CPU ids (131072, ...) therefore always print whole.
    * Colour needs no matplotlib: the default palette is tab20b's colours.

    Args:
      shape: the global shape of the array.
      sharding: anything with ``devices_indices_map(shape)`` returning
        ``{device: tuple of slices}``; devices need ``.id`` and ``.platform``.
      use_color: colour each cell (when the terminal supports colour) instead of
        drawing borders.
      scale: scales the picture's height (10 lines at 1.0) and width.
      min_width, max_width: bounds of a cell's width; max_width is also the
        console width.
      color_map: a callable from [0, 1] to an (r, g, b[, a]) tuple of floats or
        a colour string.
    """
    try:
        import rich.console
    except ModuleNotFoundError as e:  # pragma: no cover - rich is a dependency
        raise ValueError("`visualize_sharding` requires `rich` to be installed.") from e
    console = rich.console.Console(width=max_width)
    _draw(console, shape, sharding, use_color=use_color, scale=scale,
          min_width=min_width, max_width=max_width, color_map=color_map)


def visualize_array_sharding(arr, **kwargs) -> None:
    """Prints how `arr` is split over devices: ``visualize_sharding(arr.shape, arr.sharding, **kwargs)``."""
    return visualize_sharding(arr.shape, arr.sharding, **kwargs)
