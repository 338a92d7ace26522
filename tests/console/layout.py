"""The console's layout contract: the bounding boxes of each page's main
regions at a fixed 1280x800 window, compared with the committed baselines
in ``tests/console/layout/PAGE.json``. Fonts differ between machines, so
pixels are not compared: a region must be there, stay inside the viewport's
width, overlap no other region, and keep its place and size within a
tolerance."""

import json
import pathlib

BASELINES = pathlib.Path(__file__).resolve().parent / "layout"
WINDOW = (1280, 800)
#: How far a region may move or resize: this many pixels, or this share of
#: its size if more (a table of many rows grows with the font's height).
TOLERANCE_PX = 24
TOLERANCE_SHARE = 0.15

# Each region's box in page coordinates, by a CSS selector; absent
# selectors are left out (then the comparison says the region is gone).
_MEASURE = """
const boxes = {};
for (const [name, selector] of Object.entries(arguments[0])) {
  const node = document.querySelector(selector);
  if (!node || node.hidden) continue;
  const r = node.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;
  boxes[name] = {x: Math.round(r.left + scrollX), y: Math.round(r.top + scrollY),
                 w: Math.round(r.width), h: Math.round(r.height)};
}
return {viewport: innerWidth, scroll_width: document.documentElement.scrollWidth, boxes};
"""


def measure(driver, regions):
    """The boxes of ``regions`` ({name: selector}) on the page as it is."""
    return driver.execute_script(_MEASURE, regions)


def _overlap(a, b):
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


def _drifted(was, now):
    for position, size in (("x", "w"), ("y", "h")):
        for key in (position, size):
            allowed = max(TOLERANCE_PX, TOLERANCE_SHARE * was[size])
            if abs(now[key] - was[key]) > allowed:
                return f"{key} {was[key]} -> {now[key]} (tolerance {allowed:.0f})"
    return None


def problems(page, measured, update):
    """What breaks the layout contract of ``page`` (empty if nothing);
    with ``update``, the baseline is rewritten from ``measured`` first."""
    boxes = measured["boxes"]
    found = []
    if measured["scroll_width"] > measured["viewport"]:
        found.append(f"the page is {measured['scroll_width']} px wide in a "
                     f"{measured['viewport']} px viewport")
    for name, box in boxes.items():
        if box["x"] < 0 or box["x"] + box["w"] > measured["viewport"] + 1:
            found.append(f"{name} overflows the viewport's width: {box}")
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if _overlap(boxes[a], boxes[b]):
                found.append(f"{a} overlaps {b}: {boxes[a]} {boxes[b]}")
    path = BASELINES / f"{page}.json"
    if update:
        path.write_text(json.dumps({"window": list(WINDOW), "boxes": boxes},
                                   indent=2, sort_keys=True) + "\n")
    if not path.exists():
        return found + [f"no baseline {path}: run tests/console/test.sh --update-baselines"]
    baseline = json.loads(path.read_text())["boxes"]
    for name, was in sorted(baseline.items()):
        if name not in boxes:
            found.append(f"{name} is gone")
            continue
        drift = _drifted(was, boxes[name])
        if drift:
            found.append(f"{name} moved or resized: {drift}")
    for name in sorted(set(boxes) - set(baseline)):
        found.append(f"{name} is new: update the baselines if it is meant")
    return found
