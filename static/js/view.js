// One run's panels on a page (the inspector has one, compare and replay two): agent lanes,
// barrier cards, stage buffers, the timeline and the diagnostics, each drawn by render/*.js
// from the frame at the cursor and the layout computed once.

import * as agents from "./render/agents.js";
import * as barriers from "./render/barriers.js";
import * as diagnostics from "./render/diagnostics.js";
import * as now from "./render/now.js";
import * as stages from "./render/stages.js";
import * as timeline from "./render/timeline.js";
import {hold, release} from "./dom.js";

export class RunView {
  constructor(root, {onSeek = () => {}, onMove = () => {}} = {}) {
    this.root = root;
    this.ctx = {manual: false, onSeek, onMove, divergence: null};
    this.layout = null;
    this.timeline = null;
    this.diagnostics = [];
    this.frame = null;
    this.part = (name) => root.querySelector(`[data-panel="${name}"]`);
    if (typeof ResizeObserver !== "undefined" && this.part("timeline")) {
      let width = 0;
      new ResizeObserver(([entry]) => {
        const w = Math.round(entry.contentRect.width);
        if (Math.abs(w - width) > 4 && this.frame) { width = w; this.drawTimeline(); }
      }).observe(this.part("timeline"));
    }
  }

  /** A new run: the frame held belongs to the old one (its stages, chunks and agents may not
   *  exist in this layout), so nothing is drawn until a frame of this run arrives. */
  setLayout(layout) {
    this.layout = layout;
    this.frame = null;
    for (const node of this.held()) release(node);
  }

  /** What keeps its tallest height through a run: the step line, the wait formula, the cards,
   *  the lanes, the stages and the grid they sit in. */
  held() {
    return ["now", "agents", "stages"].map((name) => this.part(name))
      .concat([this.root.querySelector("[data-formula]"), this.root.querySelector(".barrier-cards"),
               this.root.querySelector(".grid")]).filter(Boolean);
  }
  setTimeline(model) { this.timeline = model; if (this.frame) this.drawTimeline(); }
  setDiagnostics(list) { this.diagnostics = list || []; if (this.frame) this.update(this.frame); }
  setManual(on) {
    this.ctx.manual = on;
    const hint = this.root.querySelector("[data-manual-hint]");
    if (hint) hint.hidden = !on;
    this.root.classList.toggle("manual", on);
    if (this.frame) this.update(this.frame);
  }
  setDivergence(step) { this.ctx.divergence = step; if (this.frame) this.drawTimeline(); }
  /** Steps that carry a lesson callout: flagged on the timeline. */
  setCallouts(steps) {
    const next = (steps || []).join(",");
    if (next === (this.ctx.callouts || []).join(",")) return;
    this.ctx.callouts = steps || [];
    const legend = this.root.querySelector("[data-legend-note]");
    if (legend) legend.hidden = !this.ctx.callouts.length;
    const box = this.part("timeline") && this.part("timeline").querySelector(".timeline");
    if (box) box.built = null;
    if (this.frame) this.drawTimeline();
  }

  drawTimeline() {
    const part = this.part("timeline");
    if (part && this.timeline) timeline.render(part.querySelector(".timeline"), this.frame, this.timeline, this.ctx);
  }

  update(frame) {
    this.frame = frame;
    if (!this.layout) return;
    const part = this.part;
    if (part("now")) now.render(part("now"), frame);
    if (part("agents")) agents.render(part("agents").querySelector(".lanes"), frame, this.layout, this.ctx);
    if (part("barriers")) barriers.render(part("barriers"), frame, this.layout);
    if (part("stages")) stages.render(part("stages").querySelector(".stage-list"), frame, this.layout);
    if (part("diagnostics")) diagnostics.render(part("diagnostics"), frame, this.diagnostics, this.ctx);
    for (const node of this.held()) hold(node);
    this.drawTimeline();
  }
}
