// The catalogue page: list the recorded GPU traces when the server has any.

import {h} from "./dom.js";
import {render as renderBandwidth} from "./render/bandwidth.js";
import {api} from "./trace.js";

async function main() {
  const section = document.getElementById("replays");
  const list = document.getElementById("replay-list");
  if (!section || section.hidden) return;
  try {
    const body = await api.replays();
    const replays = body.replays || [];
    if (!replays.length) { section.hidden = true; return; }
    list.replaceChildren(...replays.map((r) => {
      if (r.error) {
        return h("li", {class: "card replay-card", dataset: {replay: r.id}},
          h("h3", {}, r.id), h("p", {class: "error"}, r.error));
      }
      const params = Object.entries(r.params || {}).map(([k, v]) => `${k} ${v}`).join(", ");
      return h("li", {class: "card replay-card", dataset: {replay: r.id}},
        h("h3", {}, h("a", {href: `/replays/${encodeURIComponent(r.id)}`}, r.title || r.id)),
        h("p", {class: "summary"}, `${r.pipeline || "a pipeline of its own"}: ${params}`),
        r.lesson ? h("details", {class: "replay-lesson"}, h("summary", {}, "What happened"), h("p", {}, r.lesson)) : null,
        h("p", {class: "meta"}, h("code", {}, r.id),
          r.status ? h("span", {class: `tag status-${r.status}`}, r.status.replace("_", " ")) : null,
          r.device ? h("span", {class: "tag tag-gpu"}, r.device) : null,
          typeof r.matches === "boolean" ? h("span", {class: "tag", dataset: {matches: String(r.matches)},
            title: "the engine replayed in the GPU's order explains every logged token, wait and read"},
            r.matches ? "✓ matches the model" : "✗ diverges from the model") : null));
    }));
  } catch (err) {
    section.hidden = true;
  }
}

async function bandwidth() {
  const section = document.getElementById("why-pipelining");
  if (!section || section.hidden) return;
  try {
    renderBandwidth(document.getElementById("bandwidth-chart"), await api.bandwidth());
  } catch (err) {
    section.hidden = true;
  }
}

main();
bandwidth();
