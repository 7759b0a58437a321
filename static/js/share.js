// Share links with no server store: an authored pipeline's whole state (source, params, toggles,
// schedule, step, callouts, title) as JSON, deflated ('deflate-raw', CompressionStream) and
// base64url-encoded into the URL fragment: `/author#v1.<data>`, `/p#v1.<data>`,
// `/embed/p#v1.<data>`. The fragment never reaches the server. No DOM here.

export const PREFIX = "v1.";
export const MAX_SOURCE_BYTES = 64 * 1024;
const MAX_JSON_BYTES = 2 * 1024 * 1024;
const SCHEDULES = ["round_robin", "random", "manual"];

export class FragmentError extends Error {}

function toBase64Url(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new FragmentError("it has characters base64url does not use");
  const padded = text.replaceAll("-", "+").replaceAll("_", "/") + "===".slice((text.length + 3) % 4);
  let raw;
  try { raw = atob(padded); } catch (err) { throw new FragmentError("it is not base64url"); }
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

async function pipe(bytes, stream, limit = Infinity) {
  const reader = new Blob([bytes]).stream().pipeThrough(stream).getReader();
  const parts = [];
  let size = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) { reader.cancel(); throw new FragmentError("it inflates past 2 MB"); }
    parts.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) { out.set(part, at); at += part.length; }
  return out;
}

/** The state with only the fields a link carries, in a stable order. */
export function normalState(state) {
  const out = {source: String(state.source || "")};
  if (state.title) out.title = String(state.title);
  if (state.params && Object.keys(state.params).length) out.params = {...state.params};
  if (state.bugs && state.bugs.length) out.bugs = [...state.bugs];
  if (state.schedule && state.schedule !== "round_robin") out.schedule = state.schedule;
  if (state.schedule === "random") out.seed = Number(state.seed) || 0;
  if (state.schedule === "manual" && state.moves && state.moves.length) out.moves = [...state.moves];
  if (state.step) out.step = state.step;
  if (state.callouts && state.callouts.length) {
    out.callouts = state.callouts.map((c) => ({step: c.step, text: String(c.text)}));
  }
  if (state.predict) out.predict = true;
  return out;
}

/** The fragment (without `#`) that carries `state`. */
export async function encodeState(state) {
  const json = new TextEncoder().encode(JSON.stringify(normalState(state)));
  return PREFIX + toBase64Url(await pipe(json, new CompressionStream("deflate-raw")));
}

/** The state a fragment carries; `FragmentError` says in words why one does not decode. */
export async function decodeState(fragment) {
  const text = String(fragment || "").replace(/^#/, "");
  if (!text) throw new FragmentError("this link carries no pipeline (its part after # is empty)");
  if (!text.startsWith(PREFIX)) {
    throw new FragmentError(`this link's part after # does not start with "${PREFIX}", so it is not a pipeline link (or it was cut)`);
  }
  let bytes;
  try {
    bytes = await pipe(fromBase64Url(text.slice(PREFIX.length)), new DecompressionStream("deflate-raw"), MAX_JSON_BYTES);
  } catch (err) {
    throw new FragmentError(`the pipeline in this link does not decode: ${err instanceof FragmentError ? err.message : "the compressed data is damaged or cut short"}`);
  }
  let state;
  try { state = JSON.parse(new TextDecoder("utf-8", {fatal: true}).decode(bytes)); } catch (err) {
    throw new FragmentError("the pipeline in this link decodes to something that is not JSON");
  }
  return checkState(state);
}

/** A decoded state, checked field by field (a link is input from anyone). */
export function checkState(state) {
  const bad = (what) => { throw new FragmentError(`the pipeline in this link is malformed: ${what}`); };
  if (!state || typeof state !== "object" || Array.isArray(state)) bad("not an object");
  if (typeof state.source !== "string") bad("no pipeline source");
  if (new TextEncoder().encode(state.source).length > MAX_SOURCE_BYTES) bad("the source is over 64 KiB");
  const params = state.params || {};
  if (typeof params !== "object" || Array.isArray(params) ||
      !Object.entries(params).every(([k, v]) => /^[A-Za-z_]\w{0,79}$/.test(k) && Number.isInteger(v))) {
    bad("params must map names to whole numbers");
  }
  const bugs = state.bugs || [];
  if (!Array.isArray(bugs) || !bugs.every((b) => typeof b === "string" && b.length <= 80)) bad("bugs must be names");
  const schedule = state.schedule || "round_robin";
  if (!SCHEDULES.includes(schedule)) bad(`schedule ${JSON.stringify(String(schedule).slice(0, 40))} is not round_robin, random or manual`);
  const seed = state.seed ?? 0;
  if (!Number.isInteger(seed) || seed < 0) bad("seed must be a whole number");
  const moves = state.moves || [];
  if (!Array.isArray(moves) || !moves.every((m) => typeof m === "string")) bad("moves must be names");
  const step = state.step ?? 0;
  if (!Number.isInteger(step) || step < 0) bad("step must be a whole number");
  const callouts = state.callouts || [];
  if (!Array.isArray(callouts) || callouts.length > 500 ||
      !callouts.every((c) => c && Number.isInteger(c.step) && c.step >= 0 && typeof c.text === "string" && c.text.length <= 8000)) {
    bad("callouts must be {step, text} (at most 500, 8,000 characters each)");
  }
  if (state.title !== undefined && (typeof state.title !== "string" || state.title.length > 120)) bad("the title must be text (120 characters at most)");
  return {source: state.source, title: state.title || "", params: {...params}, bugs: [...bugs], schedule,
          seed, moves: [...moves], step, callouts: callouts.map((c) => ({step: c.step, text: c.text})),
          predict: Boolean(state.predict)};
}
