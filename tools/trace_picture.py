#!/usr/bin/env python3
"""Draws a neuron_parallel_compile --trace file (or a merged one) as a picture.

    python3 tools/trace_picture.py TRACE.json OUT.svg
    python3 tools/trace_picture.py TRACE.json OUT.png   # through rsvg-convert

Each process of the trace (one launcher, or one host of a merged trace) is a
band: the launcher's phases on top, one lane per worker slot with each compile
attempt as a box coloured by how it ended and labelled with its entry, the
waits for graphs held elsewhere below them, and the compiles running as a
step line. Only the Python standard library; rsvg-convert (Debian's
librsvg2-bin) turns the SVG into a PNG.
"""

import json
import subprocess
import sys
from html import escape

WIDTH = 1200
LEFT = 150          # room for the lane names
RIGHT = 20
LANE = 22           # height of a lane
GAP = 4
COUNTER = 50        # height of the running-compiles chart
FONT = "DejaVu Sans, sans-serif"
COLOURS = {
    "compiled": "#4c9f50",
    "failed": "#d9534f",
    "killed": "#f0883e",
    "interrupted": "#a0a0a0",
    "no space": "#8e44ad",
}
PHASE_COLOUR = "#5b8def"
WAIT_COLOUR = "#c8a951"


def fail(message):
    sys.exit("trace_picture: " + message)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {path}: {e}")
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        fail(f"{path} is not a trace (a JSON object with a traceEvents array)")
    return events


def processes(events):
    """Per pid: its name, lanes, spans, waits and counter points."""
    procs = {}
    open_waits = {}
    for e in events:
        p = procs.setdefault(e.get("pid", 0), {"name": f"process {e.get('pid', 0)}", "lanes": {},
                                               "spans": [], "waits": [], "running": []})
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "process_name":
            p["name"] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_name":
            p["lanes"][e.get("tid", 0)] = e["args"]["name"]
        elif ph == "X":
            p["spans"].append(e)
        elif ph == "b":
            open_waits[(e.get("pid"), e.get("id"))] = e
        elif ph == "e":
            begin = open_waits.pop((e.get("pid"), e.get("id")), None)
            if begin:
                p["waits"].append((begin["ts"], e["ts"], begin.get("name", "")))
        elif ph == "C" and e.get("name") == "compiles running":
            p["running"].append((e["ts"], e["args"].get("running", 0), e["args"].get("limit", 0)))
    return procs


def draw(events):
    procs = processes(events)
    times = [e["ts"] for e in events if "ts" in e] + [e["ts"] + e.get("dur", 0) for e in events if e.get("ph") == "X"]
    if not times:
        fail("the trace has no timed events")
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1)
    scale = (WIDTH - LEFT - RIGHT) / span

    def x(ts):
        return LEFT + (ts - t0) * scale

    out = []
    y = 30
    for pid in sorted(procs):
        p = procs[pid]
        out.append(f'<text x="8" y="{y - 8}" font-weight="bold" font-size="13">{escape(p["name"])}</text>')
        lanes = sorted(p["lanes"].items(), key=lambda kv: kv[0])
        lane_y = {}
        for tid, name in lanes:
            lane_y[tid] = y
            out.append(f'<text x="8" y="{y + 15}" font-size="11" fill="#333">{escape(name)}</text>')
            out.append(f'<line x1="{LEFT}" y1="{y + LANE}" x2="{WIDTH - RIGHT}" y2="{y + LANE}" stroke="#eee"/>')
            y += LANE + GAP
        for s in p["spans"]:
            ly = lane_y.get(s.get("tid", 0))
            if ly is None:
                continue
            left, width = x(s["ts"]), max(s.get("dur", 0) * scale, 1.0)
            args = s.get("args", {})
            colour = PHASE_COLOUR if s.get("cat") == "phase" else COLOURS.get(args.get("outcome"), "#7f8c8d")
            title = f'{s["name"]}: {s.get("dur", 0) / 1e6:.2f} s' + (
                f', {args["outcome"]}, attempt {args.get("attempt")}' if "outcome" in args else "")
            out.append(f'<rect x="{left:.1f}" y="{ly + 2}" width="{width:.1f}" height="{LANE - 4}" rx="2" '
                       f'fill="{colour}" stroke="#fff" stroke-width="0.5"><title>{escape(title)}</title></rect>')
            label = s["name"]
            if label.startswith("MODULE_"):
                label = label[len("MODULE_"):].split("+")[0][:8]
            if width > 7 * len(label) + 6:
                out.append(f'<text x="{left + 3:.1f}" y="{ly + 15}" font-size="10" fill="#fff">{escape(label)}</text>')
        # Waits: packed onto as few rows as do not overlap.
        rows = []
        for begin, end, name in sorted(p["waits"]):
            for row in rows:
                if row[-1][1] <= begin:
                    row.append((begin, end, name))
                    break
            else:
                rows.append([(begin, end, name)])
        for k, row in enumerate(rows):
            if k == 0:
                out.append(f'<text x="8" y="{y + 11}" font-size="11" fill="#333">waits for others</text>')
            for begin, end, name in row:
                out.append(f'<rect x="{x(begin):.1f}" y="{y + 3}" width="{max((end - begin) * scale, 1):.1f}" '
                           f'height="8" fill="{WAIT_COLOUR}"><title>{escape(name)}</title></rect>')
            y += 12
        if rows:
            y += GAP
        if p["running"]:
            top = max(max(r[2], r[1]) for r in p["running"]) or 1
            out.append(f'<text x="8" y="{y + 14}" font-size="11" fill="#333">compiles running</text>')
            out.append(f'<text x="8" y="{y + 28}" font-size="10" fill="#777">(0 to {top})</text>')
            points, last = [], None
            for ts, running, _ in p["running"]:
                yy = y + COUNTER - running / top * (COUNTER - 4)
                if last is not None:
                    points.append(f"{x(ts):.1f},{last:.1f}")
                points.append(f"{x(ts):.1f},{yy:.1f}")
                last = yy
            points.append(f"{x(t1):.1f},{last:.1f}")
            out.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="#333" stroke-width="1.2"/>')
            out.append(f'<line x1="{LEFT}" y1="{y + COUNTER}" x2="{WIDTH - RIGHT}" y2="{y + COUNTER}" stroke="#ccc"/>')
            y += COUNTER + GAP
        y += 28
    # The time axis, in seconds from the first event.
    step = next(s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 1e9)
                if span / 1e6 / s <= 12)
    axis = []
    tick = 0.0
    while tick * 1e6 <= span:
        tx = x(t0 + tick * 1e6)
        axis.append(f'<line x1="{tx:.1f}" y1="20" x2="{tx:.1f}" y2="{y - 20}" stroke="#f2f2f2"/>')
        axis.append(f'<text x="{tx:.1f}" y="{y - 6}" font-size="10" text-anchor="middle" fill="#555">'
                    f'{tick:g} s</text>')
        tick += step
    legend = " ".join(
        f'<rect x="{LEFT + 110 * k}" y="{y + 4}" width="10" height="10" fill="{c}"/>'
        f'<text x="{LEFT + 110 * k + 14}" y="{y + 13}" font-size="11">{escape(n)}</text>'
        for k, (n, c) in enumerate([("phase", PHASE_COLOUR), ("compiled", COLOURS["compiled"]),
                                    ("failed", COLOURS["failed"]), ("killed", COLOURS["killed"]),
                                    ("waiting", WAIT_COLOUR)]))
    height = y + 24
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="{FONT}">'
            f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(axis) + "".join(out) + legend + "</svg>\n")


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip() and "usage: trace_picture.py TRACE.json OUT.svg|OUT.png")
    svg = draw(load(argv[1]))
    out = argv[2]
    if out.endswith(".png"):
        try:
            subprocess.run(["rsvg-convert", "--format=png", "--output", out], input=svg.encode(), check=True)
        except FileNotFoundError:
            fail("rsvg-convert is missing: install librsvg2-bin (tools/setup.sh does), or write an .svg")
        except subprocess.CalledProcessError as e:
            fail(f"rsvg-convert failed with exit status {e.returncode}")
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(svg)


if __name__ == "__main__":
    main(sys.argv)
