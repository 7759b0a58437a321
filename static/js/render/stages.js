// Stage buffers as chunk grids: each cell is one chunk, coloured and numbered by the tile that
// wrote it last; cells written by threads (st.shared, the generic proxy) are striped, and a
// fenced one carries a check. A read at this step outlines the stage: green when every chunk holds
// the tile it wanted, red (with the wrong cells crossed out) when stale or half-filled data was read.

import {h, setAttr, setText} from "../dom.js";
import {tileClass} from "../layout.js";

function build(root, layout) {
  const stages = layout.stages.map((stage) => {
    const cells = Array.from({length: stage.chunks}, (_, c) =>
      h("span", {class: "chunk empty", dataset: {chunk: c}}, h("span", {class: "t"})));
    const node = h("div", {class: "stage", dataset: {stage: stage.name}},
      h("div", {class: "stage-head"}, h("b", {}, stage.name), h("span", {class: "holds"}),
        h("span", {class: "read-mark"})),
      h("div", {class: "chunks", role: "img"}, cells),
      h("p", {class: "stage-note"}));
    return {node, cells};
  });
  root.replaceChildren(...stages.map((s) => s.node));
  if (!stages.length) root.append(h("p", {class: "muted"}, "no staging buffers"));
  return {key: layout.key, stages};
}

export function render(root, frame, layout) {
  if (!root.built || root.built.key !== layout.key) root.built = build(root, layout);
  const {snapshot, record} = frame;
  const events = record ? record.events : [];
  const problems = record ? record.diagnostics : [];
  snapshot.stages.forEach((stage, s) => {
    const view = root.built.stages[s];
    if (!view) return;
    const read = events.find((e) => e.kind === "smem_read" && e.stage === stage.name);
    const landed = new Set(events.filter((e) => (e.kind === "chunk_landed" || e.kind === "chunk_stored")
      && e.stage === stage.name).map((e) => e.chunk));
    const labels = [];
    stage.chunks.forEach((chunk, c) => {
      const cell = view.cells[c];
      const wrong = read && chunk.tile !== read.tile;
      // A TMA store (async proxy) reading threads' writes that no fence.proxy.async published may
      // see the bytes that were there before: show that the data it stores is in doubt.
      const unfencedRead = landed.has(c) && chunk.proxy === "generic" && !chunk.fenced &&
        problems.some((d) => d.kind === "proxy_fence_missing");
      cell.className = `chunk ${tileClass(chunk.tile)}` +
        (chunk.proxy === "generic" ? " generic" : "") + (chunk.fenced ? " fenced" : "") +
        (wrong ? " wrong" : "") + (unfencedRead ? " stale-risk" : "") + (landed.has(c) ? " just-landed" : "");
      setText(cell.firstChild, chunk.tile === null ? "·" : `t${chunk.tile}${unfencedRead ? "?" : ""}`);
      const who = chunk.proxy === "generic" ? `st.shared${chunk.fenced ? ", fenced" : ", not fenced"}` : chunk.proxy === "async" ? "TMA" : "";
      const label = chunk.tile === null ? `chunk ${c}: empty` : `chunk ${c}: tile ${chunk.tile} (${who})${wrong ? ", not the tile read" : ""}` +
        (unfencedRead ? "; the TMA store may read the old bytes here (no fence.proxy.async)" : "");
      setAttr(cell, "title", label);
      labels.push(label);
    });
    setAttr(view.node.querySelector(".chunks"), "aria-label", `${stage.name}: ${labels.join("; ")}`);
    setText(view.node.querySelector(".holds"), stage.tile === null ? "empty" : `tile ${stage.tile} issued here`);
    const bad = problems.find((d) => d.stage === stage.name);
    const state = read ? (read.chunks_ok === read.chunks && !bad ? "read-ok" : "read-bad") : "";
    setAttr(view.node, "data-read", state);
    setText(view.node.querySelector(".read-mark"), !read ? "" : state === "read-ok"
      ? `✓ read tile ${read.tile}: all ${read.chunks} chunks`
      : `✗ read tile ${read.tile}: ${read.chunks_ok} of ${read.chunks} chunks hold it`);
    const inflight = snapshot.tma.filter((op) => op.stage === stage.name);
    const notes = inflight.map((op) => op.direction === "load"
      ? `◀ TMA load of tile ${op.tile} landing: ${op.chunk} of ${op.chunks} chunks so far`
      : `▶ TMA store of tile ${op.tile} reading: ${op.chunk} of ${op.chunks} chunks so far`);
    if (bad) notes.unshift(`⚠ ${bad.message}`);
    setText(view.node.querySelector(".stage-note"), notes.join(" · "));
    view.node.classList.toggle("has-note", notes.length > 0);
  });
}
