// Small helpers of the learning features: a JSON GET, what was wrong in a permalink, the
// timeline as a standalone SVG file, and the embed's height for the host page.

export async function getJson(path, options = {}) {
  const response = await fetch(path, {headers: {"content-type": "application/json"}, ...options});
  let body = null;
  try { body = await response.json(); } catch (err) { body = null; }
  if (!response.ok) {
    const detail = body && body.detail;
    const first = Array.isArray(detail) ? detail[0] : null;
    const error = new Error(first ? first.msg : typeof detail === "string" ? detail : response.statusText);
    error.status = response.status;
    error.field = first && first.loc ? first.loc[first.loc.length - 1] : null;
    error.body = body;
    throw error;
  }
  return body;
}

/** What a permalink asked for that cannot be honoured, one sentence each (the rest is kept). */
export function permalinkProblems(scenario, search) {
  const query = new URLSearchParams(search);
  const problems = [];
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    const raw = query.get(name);
    if (raw === null) continue;
    if (!/^\d{1,9}$/.test(raw)) problems.push(`${name}=${raw.slice(0, 40)} is not a whole number; using the default ${spec.default}`);
  }
  const bugs = (query.get("bugs") || "").split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = bugs.filter((b) => !scenario.bugs.includes(b));
  if (unknown.length) {
    problems.push(`bugs=${unknown.join(",").slice(0, 80)}: ${scenario.id} has no such toggle` +
      `${unknown.length > 1 ? "s" : ""} (it takes ${scenario.bugs.join(", ") || "none"}); ignored`);
  }
  const schedule = query.get("schedule");
  if (schedule && !["round_robin", "random", "manual"].includes(schedule)) {
    problems.push(`schedule=${schedule.slice(0, 40)} is not round_robin, random or manual; using round robin`);
  }
  const step = query.get("step");
  if (step !== null && !/^\d{1,9}$/.test(step)) problems.push(`step=${step.slice(0, 40)} is not a step number; starting at step 0`);
  const seed = query.get("seed");
  if (seed !== null && !/^\d{1,18}$/.test(seed)) problems.push(`seed=${seed.slice(0, 40)} is not a whole number; using seed 0`);
  return problems;
}

const STYLED = ["fill", "stroke", "stroke-width", "stroke-dasharray", "opacity", "font-size",
                "font-family", "font-weight", "text-anchor", "dominant-baseline"];

/** Save an on-page SVG as a file that looks the same on its own: computed styles inlined. */
export function downloadTimelineSvg(node, filename) {
  const copy = node.cloneNode(true);
  const from = [node, ...node.querySelectorAll("*")];
  const to = [copy, ...copy.querySelectorAll("*")];
  from.forEach((el, i) => {
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || style.display === "none") { to[i].setAttribute("visibility", "hidden"); return; }
    for (const name of STYLED) {
      const value = style.getPropertyValue(name);
      if (value) to[i].setAttribute(name, value);
    }
  });
  copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  const background = getComputedStyle(document.body).backgroundColor;
  copy.insertBefore(Object.assign(document.createElementNS("http://www.w3.org/2000/svg", "rect"), {}), copy.firstChild);
  const rect = copy.firstChild;
  rect.setAttribute("width", "100%");
  rect.setAttribute("height", "100%");
  rect.setAttribute("fill", background);
  const text = `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}`;
  const url = URL.createObjectURL(new Blob([text], {type: "image/svg+xml"}));
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
  return text;
}

/** An embed tells its host page how tall it is (the embed code's snippet listens). */
export function watchHeight() {
  if (window.parent === window || typeof ResizeObserver === "undefined") return;
  let last = 0;
  const post = () => {
    const height = Math.ceil(document.documentElement.scrollHeight);
    if (Math.abs(height - last) < 2) return;
    last = height;
    window.parent.postMessage({type: "mbarrier-inspector:height", height}, "*");
  };
  new ResizeObserver(post).observe(document.body);
  post();
}
