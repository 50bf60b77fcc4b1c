#!/usr/bin/env python3
"""Draws the training logs `loom-run --log FILE` writes (docs/metrics.md).

    scripts/plot.py LOG... --out FILE.png [--label NAME]... [--title T]
                    [--skip-steps K]

One figure of four panels against the step: the loss (training solid,
validation dashed with markers, in the run's colour), the learning rate,
tokens/s and the gradient norm. Several logs are drawn on the same axes,
named by --label in order, else by their file names. A log a resumed run
appended to is one run: where a step repeats, the later record wins, and a
dotted line marks where each resumption starts. --skip-steps K leaves out
each log's first K steps (compilation and first touches make them slow).
Errors are reported as `plot.py: error: FILE:LINE: ...`, exit status 1.
"""

import argparse
import json
import math
import os
import sys


class UserError(Exception):
    """A problem with a log or the flags: reported without a traceback."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise UserError(message)


def parse_args(argv):
    p = Parser(prog="plot.py", description="Draws loom-run --log training logs.")
    p.add_argument("logs", nargs="+", metavar="LOG", help="logs loom-run --log wrote")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="the image to write (its suffix picks the format: .png, .svg, .pdf)")
    p.add_argument("--label", action="append", default=[], metavar="NAME",
                   help="a log's name in the legend, in the order of the logs")
    p.add_argument("--title", help="the figure's title (default: the models' names)")
    p.add_argument("--skip-steps", default="0", metavar="K",
                   help="leave out each log's first K steps (default 0)")
    a = p.parse_args(argv)
    text = a.skip_steps
    try:
        a.skip_steps = int(text)
    except ValueError:
        a.skip_steps = -1
    if a.skip_steps < 0:
        raise UserError(f"bad value for --skip-steps: '{text}' (expected an integer, 0 or more)")
    if len(a.label) > len(a.logs):
        raise UserError(f"--label given {len(a.label)} times for "
                        f"{len(a.logs)} log{'s' * (len(a.logs) != 1)}")
    return a


# --- Logs -----------------------------------------------------------------


class Run:
    """One log: its step records by step (the last record of a step wins),
    and the steps where a resumed run started appending."""

    def __init__(self, path, label):
        self.path, self.label = path, label
        self.steps = {}
        self.resumed_at = []
        self.models = []


def read_lines(path):
    """The log's lines, numbered, and whether the last one lacks its
    newline: a run still writing (or killed while writing) may leave it
    incomplete."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file")
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}")
    lines = data.split(b"\n")
    unfinished = lines[-1].strip() != b""
    return list(enumerate(lines, 1)), unfinished


def parse_record(path, number, raw):
    where = f"{path}:{number}"
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise UserError(f"{where}: not JSON ({e})")
    if not isinstance(record, dict):
        raise UserError(f"{where}: not a JSON object")
    if record.get("type") == "step":
        step = record.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise UserError(f'{where}: a step record without an integer "step"')
    return record


def load_run(path, label):
    run = Run(path, label)
    lines, unfinished = read_lines(path)
    configs = 0
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            record = parse_record(path, number, raw)
        except UserError:
            # A last line still being written is not a record yet.
            if unfinished and number == len(lines):
                break
            raise
        kind = record.get("type")
        if kind == "config":
            configs += 1
            if configs > 1 and isinstance(record.get("first_step"), int):
                run.resumed_at.append(record["first_step"])
            if isinstance(record.get("model"), str) and record["model"] not in run.models:
                run.models.append(record["model"])
        elif kind == "step":
            run.steps[record["step"]] = record
    if not run.steps:
        raise UserError(f"{path}: no step records")
    return run


def skip_first(run, skip):
    """Leaves out the run's first `skip` steps by number."""
    if skip == 0:
        return
    first = min(run.steps)
    run.steps = {s: r for s, r in run.steps.items() if s >= first + skip}
    if not run.steps:
        raise UserError(f"{run.path}: no steps left after skipping {skip}")


def value(record, key):
    """A number of a record, NaN where it is missing or null (a non-finite
    value), so that a line has a gap there."""
    v = record.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


# --- Drawing --------------------------------------------------------------


def need_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError as e:
        raise UserError(f"the matplotlib package is not installed ({e}); install it with: "
                        f"{sys.executable} -m pip install matplotlib")
    return pyplot


PANELS = (
    ("loss", "loss"),
    ("lr", "learning rate"),
    ("tokens_per_s", "tokens/s"),
    ("grad_norm", "gradient norm"),
)


def draw_run(axes, run, colour):
    steps = sorted(run.steps)
    records = [run.steps[s] for s in steps]
    for ax, (key, _) in zip(axes, PANELS):
        ys = [value(r, key) for r in records]
        if not all(math.isnan(y) for y in ys):
            ax.plot(steps, ys, color=colour, linewidth=1.2, label=run.label)
        for at in run.resumed_at:
            ax.axvline(at, color=colour, linestyle=":", linewidth=0.8, alpha=0.6)
    loss = axes[0]
    val = [(s, value(r, "val_loss")) for s, r in zip(steps, records)
           if not math.isnan(value(r, "val_loss"))]
    if val:
        loss.plot(*zip(*val), color=colour, linestyle="--", marker="o", markersize=4,
                  linewidth=1.0, label=f"{run.label} (val)")
    skipped = [(s, value(r, "loss")) for s, r in zip(steps, records) if r.get("skipped") is True]
    if skipped:
        loss.plot(*zip(*skipped), color=colour, linestyle="none", marker="x", markersize=5,
                  label=f"{run.label} (skipped)")


def finish_axes(axes):
    for ax, (_, name) in zip(axes, PANELS):
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if not ax.lines:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    if axes[0].lines:
        axes[0].legend(fontsize="small")


def default_title(runs):
    models = []
    for run in runs:
        models += [m for m in run.models if m not in models]
    return ", ".join(models)


def plot(runs, out, title):
    pyplot = need_matplotlib()
    figure, grid = pyplot.subplots(2, 2, figsize=(12, 8))
    axes = list(grid.flat)
    colours = pyplot.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, run in enumerate(runs):
        draw_run(axes, run, colours[i % len(colours)])
    finish_axes(axes)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    try:
        figure.savefig(out, dpi=100)
    except (OSError, ValueError) as e:
        raise UserError(f"{out} (--out): cannot write: {getattr(e, 'strerror', None) or e}")
    finally:
        pyplot.close(figure)


def run(argv):
    a = parse_args(argv)
    labels = a.label + [os.path.basename(p) for p in a.logs[len(a.label):]]
    runs = [load_run(path, label) for path, label in zip(a.logs, labels)]
    for r in runs:
        skip_first(r, a.skip_steps)
    out_dir = os.path.dirname(a.out) or "."
    if not os.path.isdir(out_dir):
        raise UserError(f"{a.out} (--out): cannot write: no directory {out_dir}")
    plot(runs, a.out, a.title if a.title is not None else default_title(runs))
    steps = sum(len(r.steps) for r in runs)
    print(f"plot.py: wrote {a.out} ({len(runs)} run{'s' * (len(runs) != 1)}, "
          f"{steps} step{'s' * (steps != 1)})")


def main():
    try:
        run(sys.argv[1:])
    except UserError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
