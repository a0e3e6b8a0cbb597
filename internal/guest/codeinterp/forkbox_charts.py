"""forkbox_charts: the data behind a matplotlib figure, as E2B's "chart".

The output has the shape of E2B's e2b-charts package (MIT; on PyPI, which
forkbox's machines cannot reach), written here from that public format:

  every chart      type, title, elements
  2-D charts       x_label, y_label, x_unit, y_unit
  line / scatter   x_ticks, x_tick_labels, x_scale (and y_*);
                   elements {label, points: [[x, y], ...]}
  bar              elements {label, group, value}
  pie              elements {label, angle, radius}
  box_and_whisker  elements {label, min, first_quartile, median,
                   third_quartile, max, outliers}
  superchart       a figure with several axes: the figure's suptitle and
                   one chart per axes under elements

Types are line, scatter, bar, pie, box_and_whisker, superchart and unknown;
scales linear, datetime, categorical, or matplotlib's own scale name (log,
symlog, logit, function, functionlog, asinh).
"""

import datetime
import re

import matplotlib.dates as mdates
import numpy
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge

_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def chart_figure_to_dict(figure):
    """The chart of figure, or {} for a figure without data."""
    axes = figure.get_axes()
    if not axes or not any(ax.has_data() for ax in axes):
        return {}
    try:  # tick labels get their text when the figure is drawn
        figure.draw_without_rendering()
    except Exception:
        pass
    if len(axes) > 1:
        suptitle = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) else ""
        return {"type": "superchart", "title": suptitle or None, "elements": [_chart(ax) for ax in axes]}
    return _chart(axes[0])


def _chart(ax):
    kind = _kind(ax)
    build = {"line": _line, "scatter": _scatter, "bar": _bar, "pie": _pie, "box_and_whisker": _box}.get(kind)
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    if build is None:
        return chart
    if kind != "pie":
        _labels(chart, ax)
    build(chart, ax)
    return chart


def _is_grid_line(line):
    # Lines spanning the axes (axhline, axvline, grids) are not data.
    return line.get_transform() != line.axes.transData and len(line.get_xdata()) == 2


def _kind(ax):
    artists = list(ax.lines) + list(ax.collections) + list(ax.patches)
    if artists and all(isinstance(a, Line2D) for a in artists):
        return "line"
    if any(isinstance(a, PathPatch) for a in artists) and all(isinstance(a, (PathPatch, Line2D)) for a in artists):
        return "box_and_whisker"
    artists = [a for a in artists if not (isinstance(a, Line2D) and _is_grid_line(a))]
    if not artists:
        return "unknown"
    for kind, cls in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if all(isinstance(a, cls) for a in artists):
            return kind
    return "unknown"


def _unit(label):
    m = _UNIT.search(label or "")
    return (m.group(1) or m.group(2)) if m else None


def _labels(chart, ax):
    x, y = ax.get_xlabel() or None, ax.get_ylabel() or None
    chart.update(x_label=x, y_label=y, x_unit=_unit(x), y_unit=_unit(y))


def _swap_axes(chart):
    for a, b in (("x_label", "y_label"), ("x_unit", "y_unit")):
        chart[a], chart[b] = chart[b], chart[a]


def _num(v):
    """A JSON value for a coordinate: ISO dates, plain floats."""
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, numpy.datetime64):
        return str(v.astype("datetime64[s]"))
    if isinstance(v, (numpy.floating, numpy.integer, float, int)) and not isinstance(v, bool):
        f = float(v)
        return float(f"{f:.12g}") if numpy.isfinite(f) else None
    return v if isinstance(v, str) else str(v)


def _is_date_axis(axis):
    conv = axis.get_converter() if hasattr(axis, "get_converter") else getattr(axis, "converter", None)
    return isinstance(conv, (mdates.DateConverter, mdates.ConciseDateConverter)) or type(conv).__name__ == "_SwitchableDateConverter"


def _scale(axis, scale, ticks, labels):
    if _is_date_axis(axis):
        return "datetime"
    if scale != "linear":
        return scale
    # Categories are plotted at 0, 1, 2, ... and labelled with their names.
    if ticks and all(t == i and lbl != str(i) for i, (t, lbl) in enumerate(zip(ticks, labels))):
        return "categorical"
    return "linear"


def _ticks(chart, ax):
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        raw = list(axis.get_ticklocs())
        labels = [t.get_text() for t in axis.get_ticklabels()]
        if _is_date_axis(axis):
            ticks = [mdates.num2date(t).isoformat() for t in raw]
        else:
            ticks = [_num(t) for t in raw]
        chart[name + "_ticks"] = ticks
        chart[name + "_tick_labels"] = labels
        chart[name + "_scale"] = _scale(axis, scale, ticks, labels)


def _point_label(label, i, prefix):
    if not label or label.startswith("_"):
        return f"{prefix} {i}"
    return label


def _line(chart, ax):
    _ticks(chart, ax)
    lines = [ln for ln in ax.lines if not _is_grid_line(ln)]
    for i, ln in enumerate(lines):
        xs, ys = ln.get_xdata(), ln.get_ydata()
        chart["elements"].append({
            "label": _point_label(ln.get_label(), i, "Line"),
            "points": [[_num(x), _num(y)] for x, y in zip(xs, ys)],
        })


def _scatter(chart, ax):
    _ticks(chart, ax)
    for i, col in enumerate(ax.collections):
        chart["elements"].append({
            "label": _point_label(col.get_label(), i, "Scatter"),
            "points": [[_num(x), _num(y)] for x, y in col.get_offsets()],
        })


def _tick_label(axis, pos):
    """The tick label nearest to pos on axis."""
    locs = list(axis.get_ticklocs())
    labels = [t.get_text() for t in axis.get_ticklabels()]
    if not locs or len(locs) != len(labels):
        return str(_num(pos))
    i = min(range(len(locs)), key=lambda j: abs(locs[j] - pos))
    return labels[i]


def _bar(chart, ax):
    containers = [c for c in ax.containers if hasattr(c, "patches")] or [ax.patches]
    horizontal = False
    for gi, container in enumerate(containers):
        rects = list(getattr(container, "patches", container))
        if not rects:
            continue
        orient = getattr(container, "orientation", None)
        if orient is None:  # equal heights and varying widths: barh
            orient = "horizontal" if len({r.get_height() for r in rects}) == 1 and len(rects) > 1 else "vertical"
        horizontal = orient == "horizontal"
        group = container.get_label() if hasattr(container, "get_label") else None
        group = _point_label(group, gi, "Group")
        for r in rects:
            if horizontal:
                label, value = _tick_label(ax.yaxis, r.get_y() + r.get_height() / 2), r.get_width()
            else:
                label, value = _tick_label(ax.xaxis, r.get_x() + r.get_width() / 2), r.get_height()
            chart["elements"].append({"label": label, "group": group, "value": _num(value)})
    if horizontal:
        # The categories are on the y axis: name them as the x axis, as E2B.
        _swap_axes(chart)


def _pie(chart, ax):
    for w in ax.patches:
        chart["elements"].append({
            "label": w.get_label(),
            "angle": _num(abs(w.theta2 - w.theta1)),
            "radius": _num(w.r),
        })


def _box(chart, ax):
    boxes = []
    for patch in ax.patches:
        v = patch.get_path().vertices
        v = patch.get_patch_transform().transform(v) if hasattr(patch, "get_patch_transform") else v
        boxes.append({"x0": float(v[:, 0].min()), "x1": float(v[:, 0].max()),
                      "y0": float(v[:, 1].min()), "y1": float(v[:, 1].max())})
    if not boxes:
        return
    # Vertical boxes share their width; horizontal ones their height.
    vertical = len({round(b["x1"] - b["x0"], 9) for b in boxes}) == 1
    if not vertical:
        _swap_axes(chart)
    for b in boxes:
        if not vertical:
            b["x0"], b["x1"], b["y0"], b["y1"] = b["y0"], b["y1"], b["x0"], b["x1"]
        b.update(median=None, lo=b["y0"], hi=b["y1"], outliers=[])
    for ln in ax.lines:
        xs, ys = [float(x) for x in ln.get_xdata()], [float(y) for y in ln.get_ydata()]
        if not vertical:
            xs, ys = ys, xs
        _assign_line(boxes, xs, ys, ln)
    axis = ax.xaxis if vertical else ax.yaxis
    for b in boxes:
        chart["elements"].append({
            "label": _tick_label(axis, (b["x0"] + b["x1"]) / 2),
            "min": _num(b["lo"]), "first_quartile": _num(b["y0"]),
            "median": _num(b["median"] if b["median"] is not None else (b["y0"] + b["y1"]) / 2),
            "third_quartile": _num(b["y1"]), "max": _num(b["hi"]),
            "outliers": [_num(v) for v in sorted(b["outliers"])],
        })


def _assign_line(boxes, xs, ys, line):
    """Files a boxplot line (median, whisker or fliers) under its box."""
    if not xs:
        return
    eps = 1e-9
    cx = sum(xs) / len(xs)
    box = next((b for b in boxes if b["x0"] - eps <= cx <= b["x1"] + eps), None)
    if box is None:
        return
    if line.get_linestyle() in ("None", "none", "", " "):  # fliers
        box["outliers"].extend(ys)
        return
    if len(ys) != 2:
        return
    if abs(ys[0] - ys[1]) < eps:
        y = ys[0]
        if box["y0"] - eps <= y <= box["y1"] + eps and abs(xs[1] - xs[0]) >= (box["x1"] - box["x0"]) * 0.9:
            box["median"] = y
        return
    if abs(xs[0] - xs[1]) < eps:  # a whisker, from a quartile outwards
        lo, hi = min(ys), max(ys)
        if abs(hi - box["y0"]) < eps:
            box["lo"] = lo
        elif abs(lo - box["y1"]) < eps:
            box["hi"] = hi
