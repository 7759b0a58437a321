// Lesson callouts: Markdown text pinned to steps, shown as a caption that changes with the cursor
// (`[data-callout]`). Markdown is rendered here, in the browser, by the vendored markdown-it
// (static/vendor/README.md) with raw HTML off and every link or image checked by `safeUrl`:
// instructor text can format, link and show data: images, never run script.

import {h, setAttr, hold, release} from "./dom.js";

let renderer = null;

/** Only http(s), mailto, relative and fragment links; data: only for raster images. */
export function safeUrl(url, {image = false} = {}) {
  const text = String(url || "").trim();
  // Browsers ignore tabs, newlines and control characters inside a scheme ("java\tscript:").
  const squashed = text.replace(/[\u0000-\u0020\u007f-\u009f]/g, "").toLowerCase();
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(squashed);
  if (!scheme) return true;  // relative, fragment or protocol-relative
  if (["http", "https", "mailto"].includes(scheme[1])) return true;
  if (image && /^data:image\/(png|gif|jpeg|webp);/.test(squashed)) return true;
  return false;
}

async function markdown() {
  if (renderer) return renderer;
  const {default: MarkdownIt} = await import("../vendor/markdown-it/markdown-it.min.mjs");
  const md = new MarkdownIt({html: false, linkify: false, typographer: false, breaks: false});
  md.validateLink = (url) => safeUrl(url, {image: true});
  // Images must pass the stricter check: no data: other than raster images.
  const image = md.renderer.rules.image;
  md.renderer.rules.image = (tokens, i, options, env, self) => {
    const src = tokens[i].attrGet("src");
    if (!safeUrl(src, {image: true})) return self.renderInline(tokens[i].children || [], options, env);
    return image(tokens, i, options, env, self);
  };
  const linkOpen = md.renderer.rules.link_open || ((tokens, i, options, env, self) => self.renderToken(tokens, i, options));
  md.renderer.rules.link_open = (tokens, i, options, env, self) => {
    const href = tokens[i].attrGet("href") || "";
    if (!safeUrl(href)) tokens[i].attrSet("href", "#");
    if (/^https?:/i.test(href)) {
      tokens[i].attrSet("target", "_blank");
      tokens[i].attrSet("rel", "noopener noreferrer");
    }
    return linkOpen(tokens, i, options, env, self);
  };
  renderer = md;
  return md;
}

/** Markdown to a DocumentFragment (raw HTML is shown as text, unsafe links are dropped). */
export async function renderMarkdown(text) {
  const md = await markdown();
  const template = document.createElement("template");
  template.innerHTML = md.render(String(text || ""));
  // Belt and braces: nothing that can run survives, whatever the renderer did.
  for (const node of template.content.querySelectorAll("script, iframe, object, embed, style, link, meta, form")) node.remove();
  for (const node of template.content.querySelectorAll("*")) {
    for (const attr of [...node.attributes]) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on") || name === "style" || name === "srcdoc") node.removeAttribute(attr.name);
      if ((name === "href" || name === "src" || name === "xlink:href") && !safeUrl(attr.value, {image: name === "src"})) {
        node.removeAttribute(attr.name);
      }
    }
  }
  return template.content;
}

/** Callouts that apply to this run: those pinned to its bug set (none = the correct run), on the
 *  default parameters and a round-robin schedule with no steps chosen by hand (pinned steps only
 *  mean something on the run they were written for). */
export function calloutsFor(lesson, config, {anyRun = false} = {}) {
  const all = (lesson && lesson.callouts) || [];
  if (anyRun) return all.slice().sort((a, b) => a.step - b.step);
  const bugs = [...(config.bugs || [])].sort().join(",");
  const plain = !Object.keys(config.params || {}).length && (config.schedule || "round_robin") === "round_robin" &&
    !(config.picks || []).length && !(config.moves || []).length;
  if (!plain) return [];
  return all.filter((c) => [...(c.bugs || [])].sort().join(",") === bugs).sort((a, b) => a.step - b.step);
}

/** The tours a lesson offers: one per distinct bug set, with its first step. */
export function toursOf(lesson) {
  const tours = new Map();
  for (const c of (lesson && lesson.callouts) || []) {
    const key = [...(c.bugs || [])].sort().join(",");
    if (!tours.has(key)) tours.set(key, {bugs: key ? key.split(",") : [], first: c.step, count: 0});
    const tour = tours.get(key);
    tour.first = Math.min(tour.first, c.step);
    tour.count += 1;
  }
  return [...tours.values()];
}

/** The caption: the latest callout at or before the cursor, with "next callout" navigation. */
export class CalloutCaption {
  constructor(root, {onSeek = () => {}, onSet = () => {}} = {}) {
    this.root = root;
    this.onSeek = onSeek;
    this.onSet = onSet;
    this.callouts = [];
    this.shown = undefined;
    this.token = 0;
    this.body = h("div", {class: "callout-body"});
    this.where = h("span", {class: "callout-where"});
    this.prev = h("button", {type: "button", class: "link", onclick: () => this.go(-1)}, "◂ previous note");
    this.next = h("button", {type: "button", class: "link", onclick: () => this.go(1)}, "next note ▸");
    root.replaceChildren(h("div", {class: "callout-head"}, this.where, this.prev, this.next), this.body);
    root.hidden = true;
  }

  set(callouts) {
    this.callouts = callouts || [];
    this.onSet(this.callouts);
    this.shown = undefined;
    this.root.hidden = !this.callouts.length;
    release(this.root);
    this.reserve();
    if (this.step !== undefined) this.update(this.step);
  }

  /** Room for the tallest note of the tour from the start, so the panels below stay put. */
  async reserve() {
    const token = this.reserving = (this.reserving || 0) + 1;
    if (!this.callouts.length || !this.root.parentNode) return;
    const probe = this.root.cloneNode(true);
    probe.removeAttribute("data-callout");
    probe.setAttribute("aria-hidden", "true");
    Object.assign(probe.style, {position: "absolute", visibility: "hidden", left: "0", top: "0", minHeight: "",
                                width: `${this.root.getBoundingClientRect().width || this.root.parentNode.clientWidth}px`});
    probe.hidden = false;
    this.root.parentNode.append(probe);
    const body = probe.querySelector(".callout-body");
    let tallest = 0;
    try {
      for (const c of this.callouts.slice(0, 60)) {
        body.replaceChildren(await renderMarkdown(c.text).catch(() => document.createTextNode(c.text)));
        tallest = Math.max(tallest, probe.getBoundingClientRect().height);
      }
    } finally {
      probe.remove();
    }
    if (token !== this.reserving || tallest <= (this.root.held || 0)) return;
    this.root.held = tallest;
    this.root.heldWidth = this.root.getBoundingClientRect().width;
    this.root.style.minHeight = `${Math.ceil(tallest)}px`;
  }

  go(direction) {
    const list = this.callouts;
    const target = direction > 0 ? list.find((c) => c.step > this.step)
      : [...list].reverse().find((c) => c.step < (this.current ? this.current.step : this.step));
    if (target) this.onSeek(target.step);
  }

  update(step) {
    this.step = step;
    if (!this.callouts.length) return;
    let current = null;
    for (const c of this.callouts) if (c.step <= step) current = c;
    this.current = current;
    const index = current ? this.callouts.indexOf(current) : -1;
    this.prev.disabled = index <= 0;
    this.next.disabled = !this.callouts.some((c) => c.step > step);
    const upcoming = this.callouts.find((c) => c.step > step);
    setAttr(this.root, "data-callout-step", current ? current.step : "");
    this.root.classList.toggle("is-now", Boolean(current && current.step === step));
    if (current === this.shown) return;
    this.shown = current;
    if (!current) {
      this.where.textContent = `Guided tour: ${this.callouts.length} notes`;
      this.body.replaceChildren(h("p", {class: "muted"},
        upcoming ? `The first note is at step ${upcoming.step}. Step forward (→) or jump with "next note".` : ""));
      hold(this.root);
      return;
    }
    this.where.textContent = `Note ${index + 1} of ${this.callouts.length} · step ${current.step}`;
    const token = ++this.token;
    renderMarkdown(current.text).then((fragment) => {
      if (token === this.token) { this.body.replaceChildren(fragment); hold(this.root); }
    }, () => {
      if (token === this.token) { this.body.replaceChildren(h("p", {}, current.text)); hold(this.root); }
    });
  }
}
