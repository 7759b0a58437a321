// The pipeline source editor: a plain <textarea> (what the student types into; `page.fill` sets
// it) over a coloured copy of the same text, with a gutter of line numbers. The gutter and the
// copy mark the validate error at its line and column, and the source lines of the current step
// (each agent's line, and the line that just ran). No editor library: docs/language.md's tokens
// are few (comments, strings, numbers, keywords, PTX opcodes).

import {h} from "./dom.js";

const KEYWORDS = new Set(["param", "in", "cluster", "tensor", "smem", "barrier", "tmem", "agent",
  "helper", "bug", "bytes", "chunk", "release", "requires", "replace", "with", "delete", "for",
  "while", "if", "else", "int", "PipelineState"]);
const TOKEN = /(\/\/[^\n]*)|(\/\*[\s\S]*?(?:\*\/|$))|("(?:[^"\\\n]|\\.)*"?)|(\b\d+\b)|((?:mbarrier|cp|fence|tcgen05|ld|st)(?:\.[\w:]+)+)|([A-Za-z_]\w*)(?=\s*\()|([A-Za-z_]\w*)/g;
const ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"};

export function escapeHtml(text) { return text.replace(/[&<>"]/g, (c) => ESCAPES[c]); }

/** The source as HTML lines (one string per line), its tokens in classed spans. */
export function highlight(source) {
  let html = "";
  let last = 0;
  const span = (cls, text) => text.split("\n").map((part) => (part ? `<span class="${cls}">${escapeHtml(part)}</span>` : "")).join("\n");
  for (const m of source.matchAll(TOKEN)) {
    html += escapeHtml(source.slice(last, m.index));
    const [text, comment, block, string, number, opcode, call, word] = m;
    if (comment || block) html += span("t-com", text);
    else if (string) html += span("t-str", text);
    else if (number) html += span("t-num", text);
    else if (opcode) html += span("t-op", text);
    else if (call) html += span("t-fn", text);
    else if (word && KEYWORDS.has(word)) html += span("t-kw", text);
    else html += escapeHtml(text);
    last = m.index + text.length;
  }
  html += escapeHtml(source.slice(last));
  return html.split("\n");
}

export class SourceEditor {
  /** `message`: where the error is written (an element with `[data-error]`). */
  constructor(root, {onInput = () => {}, onRun = () => {}, label = "Pipeline source", message = null} = {}) {
    this.root = root;
    this.onInput = onInput;
    this.area = root.querySelector("textarea[data-editor]") || h("textarea", {"data-editor": ""});
    this.area.setAttribute("spellcheck", "false");
    this.area.setAttribute("wrap", "off");
    this.area.setAttribute("autocapitalize", "off");
    this.area.setAttribute("autocomplete", "off");
    if (!this.area.getAttribute("aria-label")) this.area.setAttribute("aria-label", label);
    this.code = h("pre", {class: "editor-code", "aria-hidden": "true"});
    this.gutter = h("div", {class: "editor-gutter", "aria-hidden": "true"});
    this.message = message || root.querySelector("[data-error]") || h("p", {class: "editor-error", "data-error": "", role: "status", "aria-live": "polite"});
    this.message.id ||= "editor-error";
    this.area.setAttribute("aria-describedby", this.message.id);
    root.querySelector(".editor-body").prepend(this.gutter, this.code);
    this.error = null;
    this.marks = {current: new Map(), ran: null};
    // Chromium fires one input event per pasted line: draw once per frame, not per event.
    this.area.addEventListener("input", () => { this.draw(); this.onInput(this.value); });
    this.queued = false;
    this.area.addEventListener("scroll", () => this.syncScroll());
    this.area.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); onRun(); return; }
      // Tab indents (4 spaces); Escape then Tab leaves the editor (keyboard users are not trapped).
      if (event.key === "Tab" && !event.shiftKey && !this.escaped && !event.ctrlKey && !event.altKey) {
        event.preventDefault();
        document.execCommand("insertText", false, "    ");
      }
      this.escaped = event.key === "Escape";
    });
    this.draw();
  }

  get value() { return this.area.value; }
  set value(text) { this.area.value = text; this.draw(); }

  syncScroll() {
    this.code.style.transform = `translate(${-this.area.scrollLeft}px, ${-this.area.scrollTop}px)`;
    this.gutter.style.transform = `translateY(${-this.area.scrollTop}px)`;
  }

  /** `error`: {line, column, msg, hint} (1-based line and column) or null. */
  setError(error) {
    this.error = error;
    this.area.setAttribute("aria-invalid", error ? "true" : "false");
    if (!error) {
      this.message.replaceChildren();
      this.message.hidden = true;
    } else {
      this.message.hidden = false;
      const where = error.line ? `Line ${error.line}${error.column ? `, column ${error.column}` : ""}: ` : "";
      // From its parts: replaceChildren() would print a missing part as the text "null".
      const parts = [h("b", {}, where), error.msg || "this pipeline does not compile",
        error.hint ? h("span", {class: "hint"}, ` Hint: ${error.hint}`) : null,
        error.line ? h("button", {type: "button", class: "link", onclick: () => this.goTo(error.line, error.column)}, "Go to the error") : null];
      this.message.replaceChildren(...parts.filter((part) => part !== null && part !== undefined));
    }
    this.draw();
  }

  /** The source lines of the step shown: `current` maps line -> agents standing there. */
  setMarks(current, ran) {
    this.marks = {current: current || new Map(), ran: ran ?? null};
    this.draw();
  }

  goTo(line, column = 1) {
    const lines = this.value.split("\n");
    let at = 0;
    for (let i = 0; i < Math.min(line - 1, lines.length); i++) at += lines[i].length + 1;
    at += Math.max(0, column - 1);
    this.area.focus();
    this.area.setSelectionRange(at, at);
  }

  /** Redraw before the next paint (many calls in one frame draw once). */
  draw() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => { this.queued = false; this.drawNow(); });
  }

  drawNow() {
    // Stepping redraws the marks only: keep the coloured lines of the same text.
    if (this.coloured?.text !== this.value) this.coloured = {text: this.value, lines: highlight(this.value)};
    const lines = this.coloured.lines;
    const error = this.error && this.error.line ? Math.min(this.error.line, lines.length) : null;
    const {current, ran} = this.marks;
    this.code.innerHTML = lines.map((html, i) => {
      const n = i + 1;
      let cls = "ln";
      if (current.has(n)) cls += " cur";
      if (ran === n) cls += " ran";
      if (n === error) cls += " err";
      let text = html || " ";
      if (n === error && this.error.column) text += '<span class="caret-mark"></span>';
      return `<span class="${cls}">${text}</span>`;
    }).join("");
    const caret = this.code.querySelector(".caret-mark");
    if (caret) caret.style.left = `${Math.max(0, this.error.column - 1)}ch`;
    this.gutter.replaceChildren(...lines.map((_, i) => {
      const n = i + 1;
      const agents = current.get(n);
      const node = h("span", {class: `gl${n === error ? " err" : ""}${agents ? " cur" : ""}${ran === n ? " ran" : ""}`,
                              title: agents ? `current line of ${agents.join(", ")}` : null}, String(n));
      if (n === error) node.dataset.errorLine = "";
      if (agents) node.dataset.currentLine = agents.join(",");
      return node;
    }));
    this.syncScroll();
  }
}
