// Talking to the server: the JSON API and the session WebSocket. No DOM here.
// Field names are the API's (snake_case), read as they come.

export class ApiError extends Error {
  constructor(status, field, message) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

async function request(path, options = {}) {
  let response;
  try {
    response = await fetch(path, {headers: {"content-type": "application/json"}, ...options});
  } catch (err) {
    throw new ApiError(0, null, "the server cannot be reached");
  }
  let body = null;
  try { body = await response.json(); } catch (err) { body = null; }
  if (!response.ok) {
    const detail = body && body.detail;
    const first = Array.isArray(detail) ? detail[0] : null;
    const field = first && first.loc ? first.loc[first.loc.length - 1] : null;
    const message = first ? first.msg : (typeof detail === "string" ? detail : response.statusText);
    throw new ApiError(response.status, field, message);
  }
  return body;
}

// ---------------------------------------------------------------- configuration <-> URL

/** A run's configuration, one shape for the URL, POST /sessions and GET /traces:
 *  {scenario, params: {stages: 2, ...}, bugs: [...], schedule, seed, moves: [...],
 *   picks: [{step, agent}], step}. */
export function configFromQuery(scenario, search) {
  const query = new URLSearchParams(search);
  const params = {};
  for (const name of Object.keys(scenario.parameters)) {
    const raw = query.get(name);
    if (raw !== null && /^\d{1,9}$/.test(raw)) params[name] = Number(raw);
  }
  const list = (name) => (query.get(name) || "").split(",").map((s) => s.trim()).filter(Boolean);
  const picks = list("picks").map((text) => {
    const at = text.indexOf(":");
    return {step: Number(text.slice(0, at)), agent: text.slice(at + 1)};
  }).filter((p) => Number.isInteger(p.step) && p.step > 0 && p.agent);
  const step = Number(query.get("step") || 0);
  return {
    scenario: scenario.id,
    params,
    bugs: list("bugs").filter((b) => scenario.bugs.includes(b)),
    schedule: ["round_robin", "random", "manual"].includes(query.get("schedule"))
      ? query.get("schedule") : "round_robin",
    seed: /^\d{1,18}$/.test(query.get("seed") || "") ? Number(query.get("seed")) : 0,
    moves: list("moves"),
    picks,
    step: Number.isInteger(step) && step >= 0 ? step : 0,
  };
}

/** The query string of a configuration (what a permalink carries). */
export function configToQuery(config, {step = true, extra = {}} = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(config.params || {})) {
    if (value !== null && value !== undefined && value !== "") query.set(name, value);
  }
  if (config.bugs && config.bugs.length) query.set("bugs", config.bugs.join(","));
  if (config.schedule && config.schedule !== "round_robin") query.set("schedule", config.schedule);
  if (config.schedule === "random") query.set("seed", config.seed || 0);
  if (config.schedule === "manual" && config.moves && config.moves.length) {
    query.set("moves", config.moves.join(","));
  }
  if (config.schedule !== "manual" && config.picks && config.picks.length) {
    query.set("picks", config.picks.map((p) => `${p.step}:${p.agent}`).join(","));
  }
  if (step && config.step) query.set("step", config.step);
  for (const [name, value] of Object.entries(extra)) query.set(name, value);
  return query.toString().replaceAll("%2C", ",").replaceAll("%3A", ":");
}

function sessionBody(config) {
  const body = {scenario: config.scenario, params: config.params, bugs: config.bugs,
                schedule: config.schedule, step: config.step || 0};
  if (config.schedule === "random") body.seed = config.seed || 0;
  if (config.schedule === "manual" && config.moves && config.moves.length) body.moves = config.moves;
  else if (config.picks && config.picks.length) body.picks = config.picks;
  return body;
}

function traceQuery(config, extra = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(config.params || {})) query.set(name, value);
  if (config.bugs && config.bugs.length) query.set("bugs", config.bugs.join(","));
  query.set("schedule", config.schedule === "manual" ? "manual" : config.schedule || "round_robin");
  if (config.schedule === "random") query.set("seed", config.seed || 0);
  if (config.schedule === "manual") query.set("moves", (config.moves || []).join(","));
  for (const [name, value] of Object.entries(extra)) query.set(name, value);
  return query.toString();
}

// ---------------------------------------------------------------------------- the API

export const api = {
  createSession: (config) =>
    request("/api/v1/sessions", {method: "POST", body: JSON.stringify(sessionBody(config))}),
  sessionTrace: (id, {from = 1, to = null, snapshots = false, patches = false} = {}) =>
    request(`/api/v1/sessions/${id}/trace?from=${from}${to === null ? "" : `&to=${to}`}` +
            `&snapshots=${snapshots}${patches ? "&patches=true" : ""}`),
  trace: (config, extra = {}) =>
    request(`/api/v1/traces/${encodeURIComponent(config.scenario)}?${traceQuery(config, extra)}`),
  replays: () => request("/api/v1/replays"),
  replay: (id) => request(`/api/v1/replays/${encodeURIComponent(id)}`),
  probes: () => request("/api/v1/replays/probes"),
  bandwidth: () => request("/api/v1/replays/bandwidth"),
  /** The run of a pipeline text: `POST /traces` with `{source, params, bugs, schedule}`. */
  traceOfSource: (body) => request("/api/v1/traces", {method: "POST", body: JSON.stringify(body)}),
  check: (body) => request("/api/v1/check", {method: "POST", body: JSON.stringify(body)}),
};

/** The mover that made a step, spelled the way POST /sessions/{id}/step takes it. */
export function moverOf(record) {
  return record.agent === "tma" ? `tma:${record.operands.op}` : record.agent;
}

// ---------------------------------------------------------------- the session socket

/** The WebSocket of one session: sends commands, hands every message to `onMessage`,
 *  reconnects after a drop (with the latest session id it was given). */
export class SessionSocket {
  constructor(id, {onMessage, onOpen = () => {}, onDown = () => {}}) {
    this.id = id;
    this.onMessage = onMessage;
    this.onOpen = onOpen;
    this.onDown = onDown;
    this.queue = [];
    this.closed = false;
    this.opens = 0;
    this.backoff = 250;
    this.connect();
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = this.ws = new WebSocket(`${scheme}://${location.host}/api/v1/sessions/${this.id}/ws`);
    ws.addEventListener("open", () => {
      this.backoff = 250;
      this.onOpen(this.opens++ > 0);
      for (const command of this.queue.splice(0)) ws.send(JSON.stringify(command));
    });
    ws.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      if (message.id) this.id = message.id;
      this.onMessage(message);
    });
    ws.addEventListener("close", (event) => {
      if (this.closed) return;
      this.onDown(event.code);
      if (event.code >= 4400 && event.code < 4500) return; // the session is gone: no retry
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 4000);
    });
  }

  get open() { return this.ws && this.ws.readyState === WebSocket.OPEN; }

  send(command) {
    if (this.open) this.ws.send(JSON.stringify(command));
    else this.queue.push(command);
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
  }
}
