// "Why pipelining": GB/s of a TMA ring on a real GPU against the number of stages, one line per
// tile size, beside cudaMemcpy measured in the same run (GET /api/v1/replays/bandwidth).

import {h} from "../dom.js";
import {svg} from "../svg.js";

const W = 640, H = 300, LEFT = 56, RIGHT = 16, TOP = 16, BOTTOM = 40;
const COLOURS = ["var(--t0)", "var(--t1)", "var(--t3)", "var(--t4)", "var(--t5)"];
const MARKS = ["circle", "rect", "diamond", "circle", "rect"];

function mark(shape, x, y, colour) {
  if (shape === "rect") return svg("rect", {x: x - 4, y: y - 4, width: 8, height: 8, fill: colour});
  if (shape === "diamond") {
    return svg("path", {d: `M${x},${y - 5} L${x + 5},${y} L${x},${y + 5} L${x - 5},${y} Z`, fill: colour});
  }
  return svg("circle", {cx: x, cy: y, r: 4, fill: colour});
}

/** Rows of the ring with no stores held back before the release (the textbook pipeline). */
export function series(data) {
  const bySize = new Map();
  for (const r of data.results || []) {
    if (!r.fits || !r.correct || r.release_lag) continue;
    if (!bySize.has(r.tile_bytes)) bySize.set(r.tile_bytes, []);
    bySize.get(r.tile_bytes).push(r);
  }
  return [...bySize.entries()].sort((a, b) => a[0] - b[0])
    .map(([tile, rows]) => ({tile, rows: rows.sort((a, b) => a.stages - b.stages)}));
}

export function render(root, data) {
  const lines = series(data);
  const memcpy = data.memcpy ? data.memcpy.gbps : 0;
  const maxStages = Math.max(8, ...lines.flatMap((l) => l.rows.map((r) => r.stages)));
  const top = Math.ceil(Math.max(memcpy, ...lines.flatMap((l) => l.rows.map((r) => r.gbps))) / 1000) * 1000;
  const x = (stages) => LEFT + ((stages - 1) / (maxStages - 1)) * (W - LEFT - RIGHT);
  const y = (gbps) => TOP + (1 - gbps / top) * (H - TOP - BOTTOM);
  const grid = [];
  for (let g = 0; g <= top; g += 1000) {
    grid.push(svg("line", {x1: LEFT, x2: W - RIGHT, y1: y(g), y2: y(g), class: "bw-grid"}),
      svg("text", {x: LEFT - 8, y: y(g) + 4, "text-anchor": "end", class: "bw-label"}, `${g / 1000}`));
  }
  for (let s = 1; s <= maxStages; s++) {
    grid.push(svg("text", {x: x(s), y: H - BOTTOM + 18, "text-anchor": "middle", class: "bw-label"}, `${s}`));
  }
  const drawn = lines.map((line, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const points = line.rows.map((r) => `${x(r.stages)},${y(r.gbps)}`).join(" ");
    return svg("g", {class: "bw-line", "data-tile-bytes": line.tile},
      svg("polyline", {points, fill: "none", stroke: colour, "stroke-width": 2.5}),
      ...line.rows.map((r) => {
        const dot = mark(MARKS[i % MARKS.length], x(r.stages), y(r.gbps), colour);
        dot.append(svg("title", {}, `${line.tile / 1024} KiB tiles, ${r.stages} stage${r.stages > 1 ? "s" : ""}: ${r.gbps} GB/s`));
        return dot;
      }));
  });
  const legend = svg("g", {class: "bw-legend"}, ...lines.map((line, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const ly = y(top * 0.32) + i * 20;
    const lx = x(maxStages) - 150;
    return svg("g", {},
      svg("line", {x1: lx, x2: lx + 24, y1: ly, y2: ly, stroke: colour, "stroke-width": 2.5}),
      mark(MARKS[i % MARKS.length], lx + 12, ly, colour),
      svg("text", {x: lx + 32, y: ly + 4, class: "bw-key"}, `${line.tile / 1024} KiB tiles`));
  }));
  const chart = svg("svg", {viewBox: `0 0 ${W} ${H}`, class: "bw-chart", role: "img",
    "aria-label": "TMA ring bandwidth against the number of stages, one line per tile size, with cudaMemcpy for reference"},
  ...grid,
  memcpy ? svg("line", {x1: LEFT, x2: W - RIGHT, y1: y(memcpy), y2: y(memcpy), class: "bw-memcpy"}) : null,
  memcpy ? svg("text", {x: LEFT + 6, y: y(memcpy) - 6, class: "bw-key"},
    `cudaMemcpy: ${Math.round(memcpy).toLocaleString("en")} GB/s`) : null,
  ...drawn,
  legend,
  svg("text", {x: (LEFT + W - RIGHT) / 2, y: H - 4, "text-anchor": "middle", class: "bw-axis"}, "stages in the ring"),
  svg("text", {x: 14, y: (TOP + H - BOTTOM) / 2, "text-anchor": "middle", class: "bw-axis",
    transform: `rotate(-90 14 ${(TOP + H - BOTTOM) / 2})`}, "TB/s (read + written)"));

  const best = data.best;
  const table = h("details", {class: "bw-table"}, h("summary", {}, "The figures as a table"),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "tile"), h("th", {scope: "col"}, "stages"), h("th", {scope: "col"}, "GB/s"))),
      h("tbody", {}, ...lines.flatMap((line) => line.rows.map((r) =>
        h("tr", {}, h("td", {}, `${line.tile / 1024} KiB`), h("td", {}, `${r.stages}`), h("td", {}, `${r.gbps}`)))))));
  const source = data.source || {};
  root.replaceChildren(
    chart,
    h("p", {class: "muted"},
      `Measured on ${source.device || "a GPU"}: one CTA per SM moving ${((data.bytes_read || 0) / 2 ** 30).toFixed(0)} GiB in and out. `,
      "With one stage the producer waits for every tile to be consumed before it loads the next; each extra stage keeps one more copy in flight. ",
      best && memcpy ? `Best: ${best.stages} stages of ${best.tile_bytes / 1024} KiB at ${best.gbps} GB/s, ${Math.round(100 * best.gbps / memcpy)}% of cudaMemcpy.` : ""),
    table);
}
