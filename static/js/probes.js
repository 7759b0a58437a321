// The tx-count probes measured on the GPU (GET /api/v1/replays/probes) as tables: how often each
// announced-vs-delivered program completed, completed early or hung over a whole launch, beside
// the outcomes the model can reach. Every field but `format` and `version` may be missing.

import {h} from "./dom.js";

/** The GPU's outcome -> the names the model's `reachable` list may use for it. */
const OUTCOMES = [
  {key: "completed", title: "completed", model: ["completed", "done", "safe"]},
  {key: "early", title: "completed early", model: ["partial_read", "early"]},
  {key: "hung", title: "hung", model: ["deadlock", "hung"]},
];

const percent = (x) => (typeof x !== "number" ? "–" : x > 0 && x < 0.001 ? "<0.1%" : `${(100 * x).toFixed(1)}%`);
const count = (x) => (typeof x === "number" ? x.toLocaleString("en-US") : "–");

function rate(row, key) {
  if (row.rates && typeof row.rates[key] === "number") return row.rates[key];
  if (typeof row[key] === "number" && row.phases) return row[key] / row.phases;
  return null;
}

/** Does the model reach every outcome the GPU showed? null when the row cannot say. */
export function agreement(row) {
  const reachable = row.model && Array.isArray(row.model.reachable) ? row.model.reachable : null;
  if (!reachable) return null;
  const seen = OUTCOMES.filter((o) => (rate(row, o.key) || 0) > 0);
  const missing = seen.filter((o) => !o.model.some((name) => reachable.includes(name)));
  return {ok: missing.length === 0, missing: missing.map((o) => o.title)};
}

function scaleTable(scale, title = "At scale", table = "scale") {
  const rows = Array.isArray(scale.rows) ? scale.rows : [];
  if (!rows.length) return null;
  const head = h("tr", {}, h("th", {scope: "col"}, "probe"), h("th", {scope: "col"}, "program"),
    h("th", {scope: "col"}, "phases"),
    ...OUTCOMES.map((o) => h("th", {scope: "col"}, o.title)),
    h("th", {scope: "col"}, "trapped"), h("th", {scope: "col"}, "the model can reach"), h("th", {scope: "col"}, ""));
  const body = rows.map((row) => {
    const verdict = agreement(row);
    const reachable = row.model && Array.isArray(row.model.reachable) ? row.model.reachable.join(", ") : "–";
    return h("tr", {dataset: {probe: row.probe || ""}},
      h("th", {scope: "row"}, h("code", {}, row.probe || "?")),
      h("td", {}, row.program || ""),
      h("td", {class: "num"}, count(row.phases)),
      ...OUTCOMES.map((o) => h("td", {class: "num", dataset: {outcome: o.key}}, percent(rate(row, o.key)))),
      h("td", {class: "num"}, count(row.trapped)),
      h("td", {}, reachable, row.model && row.model.complete === false ? " (search cut short)" : ""),
      h("td", {class: verdict ? (verdict.ok ? "agrees" : "disagrees") : "",
               dataset: {agrees: verdict ? String(verdict.ok) : "unknown"}},
        verdict ? (verdict.ok ? "✓ reachable" : `✗ not reachable: ${verdict.missing.join(", ")}`) : ""));
  });
  const what = [scale.ctas ? `${count(scale.ctas)} CTAs` : null,
                scale.phases_per_cta ? `${count(scale.phases_per_cta)} phases each` : null].filter(Boolean).join(" × ");
  return h("div", {class: "probes-scale"},
    h("h3", {}, title, what ? h("span", {class: "muted"}, ` (${what})`) : null),
    table === "scale" ? h("p", {class: "muted"}, "Completed early: the phase completed before all its bytes landed. " +
      "Hung: it never completed within the bound.") : null,
    h("div", {class: "table-wrap"}, h("table", {class: "probes-table", dataset: {table}},
      h("thead", {}, head), h("tbody", {}, body))));
}

function singleTable(probes) {
  if (!Array.isArray(probes) || !probes.length) return null;
  return h("div", {class: "probes-single"},
    h("h3", {}, "One thread, one barrier"),
    h("div", {class: "table-wrap"}, h("table", {class: "probes-table", dataset: {table: "single"}},
      h("thead", {}, h("tr", {}, ...["probe", "program", "phase 0", "parity at end", "cycles"].map(
        (t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, probes.map((p) => h("tr", {dataset: {probe: p.probe || ""}},
        h("th", {scope: "row"}, h("code", {}, p.probe || "?")),
        h("td", {}, p.program || ""),
        h("td", {}, p.phase0_completed === true ? "completed" : p.phase0_completed === false ? "never" : "–"),
        h("td", {class: "num"}, p.parity_at_end ?? "–"),
        h("td", {class: "num"}, count(p.cycles))))))));
}

function sentences(doc) {
  const out = [];
  const g = doc.granularity;
  if (g && (g.piece_bytes || g.evidence)) {
    out.push(h("p", {dataset: {part: "granularity"}}, h("b", {}, "Granularity: "),
      g.piece_bytes ? `bytes reach the tx-count in pieces of ${count(g.piece_bytes)} bytes. ` : "", g.evidence || ""));
  }
  const r = doc.reuse_before_wait;
  if (r) {
    const counts = r.counts && typeof r.counts === "object"
      ? Object.entries(r.counts).map(([k, v]) => `${k} ${count(v)}`).join(", ") : "";
    out.push(h("p", {dataset: {part: "reuse_before_wait"}}, h("b", {}, "Reuse before a wait: "),
      [r.program, r.phases ? `${count(r.phases)} phases${counts ? ` (${counts})` : ""}.` : "", r.outcome,
       r.model ? `Model: ${r.model}` : ""].filter(Boolean).join(" ")));
  }
  return out;
}

/** The endings silicon showed that the model's search reaches (rows of a version-3 section). */
export function siliconAgrees(row) {
  const reachable = row.model && Array.isArray(row.model.reachable) ? row.model.reachable : null;
  if (!reachable || !Array.isArray(row.silicon)) return null;
  const missing = row.silicon.filter((ending) => !reachable.includes(ending));
  return {ok: missing.length === 0, missing};
}

const SECTIONS = [
  {key: "no_complete", title: "mbarrier.arrive.noComplete: what silicon does with it"},
  {key: "remote_after_exit", title: "A remote access to a CTA that has exited"},
];

function siliconTable(section, {key, title}) {
  const rows = Array.isArray(section.rows) ? section.rows : [];
  if (!rows.length) return null;
  const endings = (row) => (row.endings && typeof row.endings === "object"
    ? Object.entries(row.endings).map(([k, v]) => `${count(v)} ${k}`).join(", ") : "");
  const body = rows.map((row) => {
    const verdict = siliconAgrees(row);
    return h("tr", {dataset: {probe: row.probe || ""}},
      h("th", {scope: "row"}, h("code", {}, row.probe || "?")),
      h("td", {}, row.program || "", row.delay_us !== undefined ? h("span", {class: "muted"}, ` (after ${count(row.delay_us)} µs)`) : null),
      h("td", {}, [row.outcome || "", endings(row) ? ` Launches: ${endings(row)}.` : ""].join("")),
      h("td", {}, Array.isArray(row.silicon) ? row.silicon.join(", ") : "–"),
      h("td", {}, row.model && Array.isArray(row.model.reachable) ? row.model.reachable.join(", ") : "–"),
      h("td", {class: verdict ? (verdict.ok ? "agrees" : "disagrees") : "", dataset: {agrees: verdict ? String(verdict.ok) : "unknown"}},
        verdict ? (verdict.ok ? "✓ reachable" : `✗ not reachable: ${verdict.missing.join(", ")}`) : ""));
  });
  return h("div", {class: "probes-silicon", dataset: {section: key}},
    h("h3", {}, title),
    section.program ? h("p", {class: "muted"}, section.program) : null,
    h("div", {class: "table-wrap"}, h("table", {class: "probes-table", dataset: {table: key}},
      h("thead", {}, h("tr", {}, ...["probe", "program", "what the GPU did", "silicon", "the model can reach", ""].map(
        (t) => h("th", {scope: "col"}, t)))),
      h("tbody", {}, body))));
}

/** Fill `body` with the probes document's tables and sentences. */
export function renderProbes(body, doc) {
  const device = doc.device && doc.device.device ? `Measured on an ${doc.device.device}` : "Measured on a GPU";
  const parts = [
    h("p", {class: "muted"}, `${device}${doc.captured_at ? ` at ${doc.captured_at}` : ""}.`),
    doc.scale ? scaleTable(doc.scale) : null,
    doc.granularity && doc.granularity.rows
      ? scaleTable({...doc.scale, rows: doc.granularity.rows}, "Piece size: N bytes announced for one 4 KiB copy", "pieces")
      : null,
    singleTable(doc.probes),
    ...sentences(doc),
    ...SECTIONS.map((section) => (doc[section.key] ? siliconTable(doc[section.key], section) : null)),
  ].filter(Boolean);
  if (parts.length === 1) parts.push(h("p", {}, "The probes file holds no measurements."));
  body.replaceChildren(...parts);
}
