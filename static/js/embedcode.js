// "Copy embed code" (loaded on first use): the <iframe> snippet for the state shown, with the
// height the chosen panels need, measured by loading them out of sight in a 700 px frame: the
// embed posts its height there as it does on a lesson page.

import {h} from "./dom.js";

export const EMBED_WIDTH = 700;

/** The height the embed of `src` takes at 700 px wide (null if it never says). */
export function measureEmbed(src) {
  return new Promise((resolve) => {
    const frame = h("iframe", {src, title: "measuring the embed", "aria-hidden": "true", tabindex: "-1",
      style: `position:absolute;left:-10000px;top:0;width:${EMBED_WIDTH}px;height:561px;border:0`});
    let settle = null;
    let height = null;
    const done = () => { removeEventListener("message", onMessage); frame.remove(); resolve(height); };
    const onMessage = (event) => {
      if (event.source !== frame.contentWindow || !event.data || event.data.type !== "mbarrier-inspector:height") return;
      height = event.data.height;
      clearTimeout(settle);
      settle = setTimeout(done, 800);  // the last height once the panels are drawn
    };
    addEventListener("message", onMessage);
    setTimeout(() => { if (height === null) done(); }, 20000);
    document.body.append(frame);
  });
}

export function embedCode(src, title, height = 480) {
  // The embed posts its height; the snippet resizes the iframe that sent it.
  return `<iframe src="${src.replaceAll("&", "&amp;")}" title="${title}" width="100%" height="${height}" ` +
    'style="border:0" loading="lazy" data-mbarrier-inspector></iframe>\n' +
    `<script>addEventListener("message",function(e){if(e.origin!=="${location.origin}"||!e.data||e.data.type!=="mbarrier-inspector:height")return;` +
    'document.querySelectorAll("iframe[data-mbarrier-inspector]").forEach(function(f){if(f.contentWindow===e.source)f.style.height=e.data.height+"px";});});</script>';
}

/** Wire the dialog: `src()` is the embed URL of the state and panels chosen now. */
export function bindEmbedDialog({dialog, src, title, copy, done}) {
  const area = dialog.querySelector("#embed-code");
  const note = dialog.querySelector("[data-embed-height]");
  let asked = 0;
  const refresh = async () => {
    const url = src();
    area.value = embedCode(url, title);
    await copy(area.value);
    const mine = ++asked;
    note.textContent = "Measuring the height these panels need…";
    delete note.dataset.embedHeight;
    const height = await measureEmbed(url);
    if (mine !== asked) return;
    if (!height) { note.textContent = "The embed did not report its height: the code sets 480 px and resizes itself."; return; }
    note.dataset.embedHeight = String(height);
    note.textContent = `These panels need ${height.toLocaleString("en-US")} px at ${EMBED_WIDTH} px wide: the code sets that ` +
      "height (and resizes itself as the content changes). In a frame under 560 px tall the agents sit beside the " +
      "barriers and the timeline folds under its heading.";
    area.value = embedCode(url, title, height);
    await copy(area.value);
  };
  dialog.addEventListener("change", refresh);
  dialog.querySelector("#embed-copy-again").addEventListener("click", refresh);
  return {
    async open() {
      dialog.showModal();
      const copied = refresh();
      done();
      await copied;
    },
  };
}
