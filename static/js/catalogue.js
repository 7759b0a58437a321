// The catalogue page: list the recorded GPU traces when the server has any.

import {h} from "./dom.js";
import {api} from "./trace.js";

async function main() {
  const section = document.getElementById("replays");
  const list = document.getElementById("replay-list");
  if (!section || section.hidden) return;
  try {
    const body = await api.replays();
    const replays = body.replays || [];
    if (!replays.length) { section.hidden = true; return; }
    list.replaceChildren(...replays.map((r) => h("li", {class: "card"},
      h("h3", {}, h("a", {href: `/replays/${encodeURIComponent(r.id)}`}, r.title || r.id)),
      r.summary ? h("p", {class: "summary"}, r.summary) : null,
      h("p", {class: "meta"}, h("code", {}, r.scenario || ""), r.status ? h("span", {class: "tag"}, r.status) : null,
        r.device ? h("span", {class: "tag tag-gpu"}, r.device) : null))));
  } catch (err) {
    section.hidden = true;
  }
}

main();
