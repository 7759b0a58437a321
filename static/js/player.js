// Players hold a cursor over a run: step, back, seek, play, pause, speed. SessionPlayer asks the
// session's WebSocket for what the server computes (step, pick, seek, reset) and plays windows of
// the session's trace fetched ahead (one request per seconds of play, not a frame per step):
// each window is one full snapshot and a patch per step (docs/trace-format.md, "Windows"), on a
// grid of 256 steps that every student of a run shares. LocalPlayer walks a trace document in
// memory. Both emit "frame" with the same fields.

import {api, SessionSocket} from "./trace.js";

class Emitter {
  constructor() { this.handlers = {}; }
  on(type, handler) { (this.handlers[type] ||= []).push(handler); return this; }
  emit(type, value) { for (const handler of this.handlers[type] || []) handler(value); }
  /** A closed player draws nothing more: its page moved on to another run. */
  forget() { this.handlers = {}; }
}

export const SPEEDS = [1, 2, 4, 8, 15, 30];

/** A played frame's snapshot: the one before with `patch` applied (fields in `set` replaced
 *  whole, list items in `items` replaced by index), as the server's `app.sim.snapshot.patch` writes it. */
function patched(snapshot, patch) {
  const out = {...snapshot, ...patch.set};
  for (const [name, items] of Object.entries(patch.items)) {
    const list = out[name] = out[name].slice();
    for (const [index, item] of Object.entries(items)) list[Number(index)] = item;
  }
  return out;
}

/** A frame is on time when drawn within this many ms of its due time at the chosen speed. */
export const ON_TIME_MS = 100;

/** Windows start on this grid (the run's checkpoints: the server replays nothing before one). */
export const WINDOW_GRID = 256;

/** Steps per window at `speed`: about 8 s of play, in whole grid cells, 256 to 1,024 steps. */
export function windowSize(speed) {
  return WINDOW_GRID * Math.max(1, Math.min(4, Math.ceil((speed * 8) / WINDOW_GRID)));
}

/** A window's steps, each with its snapshot: `base` patched step by step (a `patches=true`
 *  window), or the snapshots it carries. */
export function windowRecords(doc) {
  if (!doc.base) return doc.steps;
  let snapshot = doc.base;
  return doc.steps.map((step) => {
    snapshot = patched(snapshot, step.patch);
    const {patch, ...record} = step;
    return {...record, snapshot};
  });
}

const RETRY_MS = 1000;
const RETRIES = 20;

export class SessionPlayer extends Emitter {
  constructor(view, {speed = 4, fetchWindow = (id, from, to) =>
    api.sessionTrace(id, {from, to, snapshots: true, patches: true})} = {}) {
    super();
    this.id = view.id;
    this.frame = {step: view.step, total_steps: view.total_steps, status: view.status,
                  snapshot: view.snapshot, record: view.record, ready: view.ready,
                  playing: false, speed};
    this.seeking = false;
    this.pendingSeek = null;
    this.fetchWindow = fetchWindow;
    this.cache = new Map();      // step -> its record (with its snapshot), for local play
    this.initial = null;         // the snapshot before step 1
    this.fetching = null;        // the window being fetched: {from, to, promise}
    this.generation = 0;         // which run the cache holds (a pick makes another)
    this.timer = null;
    this.clock = null;           // {anchor: ms, step}: step `step` was due at `anchor`
    this.stats = {frames: 0, onTime: 0, late: 0, worstMs: 0, windows: 0};
    this.socket = new SessionSocket(view.id, {
      onMessage: (message) => this.receive(message),
      onOpen: (again) => {
        this.send({type: "speed", steps_per_s: this.frame.speed});
        if (again && !this.frame.playing) this.send({type: "seek", step: this.frame.step});
      },
      onDown: (code) => this.emit("down", code),
    });
  }

  receive(message) {
    if (message.type === "state" && this.frame.playing && !message.changed) {
      // Local play owns the cursor; an answer to an earlier command only renews the id.
      if (message.id) this.id = message.id;
      return;
    }
    if (message.type === "state") {
      if (message.id) this.id = message.id;
      const snapshot = message.patch ? patched(this.frame.snapshot, message.patch) : message.snapshot;
      this.frame = {step: message.step, total_steps: message.total_steps, status: message.status,
                    snapshot, record: message.record, ready: message.ready,
                    playing: message.playing, speed: message.speed};
      if (message.changed) {
        this.cache.clear();
        this.initial = null;
        this.generation += 1;
        this.emit("run", message);
      }
      this.emit("frame", this.frame);
      this.afterAnswer();
    } else if (message.type === "speed") {
      this.frame = {...this.frame, speed: message.speed};
      this.emit("frame", this.frame);
    } else if (message.type === "error") {
      this.afterAnswer();
      this.emit("error", message);
    }
  }

  afterAnswer() {
    if (this.pendingSeek === null) {
      this.seeking = false;
      return;
    }
    this.send({type: "seek", step: this.pendingSeek});
    this.pendingSeek = null;
  }

  send(command) { this.socket.send(command); }

  step(agent = null) { this.stopLocal(); this.send(agent ? {type: "step", agent} : {type: "step"}); }
  back() { this.stopLocal(); this.send({type: "back"}); }
  /** Scrubbing sends many seeks: keep one in flight and only the latest waiting. */
  seek(step) {
    this.stopLocal();
    if (this.seeking) { this.pendingSeek = step; return; }
    this.seeking = true;
    this.send({type: "seek", step});
  }
  home() { this.seek(0); }
  end() { this.seek(this.frame.total_steps); }
  toggle() { if (this.frame.playing) this.pause(); else this.play(); }
  setSpeed(speed) {
    if (this.frame.playing) {
      this.clock = {anchor: performance.now(), step: this.frame.step};
      this.frame = {...this.frame, speed};
      this.emit("frame", this.frame);
      clearTimeout(this.timer);
      this.tick();
    }
    this.send({type: "speed", steps_per_s: speed});
  }
  /** Forget the steps chosen by hand: the schedule's own run, at step 0. */
  reset() { this.stopLocal(); this.send({type: "reset"}); }
  close() { this.stopLocal(false); this.socket.close(); this.forget(); }

  // ------------------------------------------------------------ play: a cursor in the browser

  /** Play from the cursor (step 0 at the end); the server's cursor follows when play stops. */
  play() {
    if (this.frame.playing) return;
    let from = this.frame.step;
    if (from >= this.frame.total_steps) from = 0;
    this.frame = {...this.frame, ...this.frameAt(from), playing: true};
    // The clock starts at the first frame drawn (Play may wait for the first window).
    this.clock = this.cache.has(from + 1) ? {anchor: performance.now(), step: from} : null;
    this.emit("frame", this.frame);
    this.prefetch();
    this.tick();
  }

  pause() { this.stopLocal(); }

  /** Stop local play; `sync` puts the server's cursor (and the ready movers) where it stopped. */
  stopLocal(sync = true) {
    if (!this.frame.playing) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.frame = {...this.frame, playing: false};
    this.emit("frame", this.frame);
    if (sync) this.send({type: "seek", step: this.frame.step});
  }

  /** The frame of `step` from the cache (the cursor's own frame when not cached). */
  frameAt(step) {
    if (step === 0 && this.initial) return {step: 0, record: null, snapshot: this.initial, ready: []};
    const record = this.cache.get(step);
    return record ? {step, record, snapshot: record.snapshot, ready: []} : {};
  }

  windowSize() { return windowSize(this.frame.speed); }

  /** Ask for the next window while 5 s of play (at least 64 steps) are still ahead: the window
   *  on the grid that holds the first step not held. A busy server (429, 503) is asked again. */
  prefetch(tries = 0) {
    if (this.fetching || !this.frame.playing) return;
    const ahead = Math.max(64, this.frame.speed * 5);
    let next = this.frame.step + 1;
    while (this.cache.has(next)) next += 1;
    if (next > this.frame.total_steps || next - this.frame.step > ahead) return;
    const size = this.windowSize();
    const from = next - ((next - 1) % size);
    const to = Math.min(this.frame.total_steps, from + size - 1);
    let again = false;
    const generation = this.generation;
    const promise = this.fetchWindow(this.id, from, to).then((doc) => {
      if (generation !== this.generation) return;  // the run changed meanwhile (a pick)
      this.stats.windows += 1;
      if (!this.initial && doc.initial) this.initial = doc.initial;
      for (const record of windowRecords(doc)) this.cache.set(record.step, record);
      for (const step of this.cache.keys()) if (step < this.frame.step - 64) this.cache.delete(step);
    }, (err) => {
      if ((err.status === 429 || err.status === 503) && tries < RETRIES && this.frame.playing) {
        again = true;  // busy: the frames wait (late, if it lasts), play goes on
        setTimeout(() => {
          this.fetching = null;
          this.prefetch(tries + 1);
          if (this.frame.playing && !this.timer) this.tick();
        }, RETRY_MS);
        return;
      }
      // No window (an expired id, a server gone): stop where the data ends and say so.
      this.stopLocal();
      this.emit("error", {field: err.field || "server", message: `Play stopped: ${err.message}`});
    }).finally(() => {
      if (again) return;
      this.fetching = null;
      if (this.frame.playing) { this.prefetch(); if (!this.timer) this.tick(); }
    });
    this.fetching = {from, to, promise};
  }

  tick() {
    if (!this.frame.playing) return;
    const next = this.frame.step + 1;
    if (!this.clock) {
      if (!this.cache.has(next)) { this.prefetch(); return; }  // the first window is on its way
      this.clock = {anchor: performance.now() - 1000 / this.frame.speed, step: this.frame.step};
    }
    const due = this.clock.anchor + ((next - this.clock.step) * 1000) / this.frame.speed;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.frame.playing) return;
      if (next > this.frame.total_steps) { this.stopLocal(); return; }
      const at = this.frameAt(next);
      if (!at.record) {  // not fetched yet: wait for the window (the frame will be late)
        this.prefetch();
        if (!this.fetching) this.stopLocal();
        return;
      }
      const now = performance.now();
      const late = now - due;
      this.stats.frames += 1;
      if (late <= ON_TIME_MS) this.stats.onTime += 1;
      else { this.stats.late += 1; this.clock = {anchor: now, step: next}; }
      this.stats.worstMs = Math.max(this.stats.worstMs, Math.round(late));
      this.frame = {...this.frame, ...at};
      this.emit("frame", this.frame);
      this.prefetch();
      this.tick();
    }, Math.max(0, due - performance.now()));
  }
}

export class LocalPlayer extends Emitter {
  constructor(total, {step = 0, speed = 4, status = "done"} = {}) {
    super();
    this.frame = {step: Math.min(step, total), total_steps: total, status, playing: false, speed};
    this.timer = null;
  }

  set(changes) {
    this.frame = {...this.frame, ...changes};
    this.emit("frame", this.frame);
  }

  seek(step) {
    const clamped = Math.max(0, Math.min(this.frame.total_steps, step));
    this.set({step: clamped});
  }

  step() {
    if (this.frame.step < this.frame.total_steps) this.seek(this.frame.step + 1);
    else this.pause();
  }

  back() { this.pause(); this.seek(this.frame.step - 1); }
  home() { this.pause(); this.seek(0); }
  end() { this.pause(); this.seek(this.frame.total_steps); }
  reset() { this.home(); }

  play() {
    if (this.frame.playing) return;
    if (this.frame.step >= this.frame.total_steps) this.frame.step = 0;
    this.set({playing: true});
    this.tick();
  }

  tick() {
    this.timer = setTimeout(() => {
      if (!this.frame.playing) return;
      if (this.frame.step >= this.frame.total_steps) { this.pause(); return; }
      this.seek(this.frame.step + 1);
      this.tick();
    }, 1000 / this.frame.speed);
  }

  pause() {
    clearTimeout(this.timer);
    if (this.frame.playing) this.set({playing: false});
  }

  toggle() { if (this.frame.playing) this.pause(); else this.play(); }
  setSpeed(speed) { this.set({speed}); }
  close() { this.pause(); this.forget(); }
}

/** The step record and snapshot at `step` of a trace document held in memory. */
export function docFrame(doc, step) {
  const from = doc.window ? doc.window.from : 1;
  const last = from + doc.steps.length - 1;
  const at = Math.max(0, Math.min(step, last));
  if (at === 0 || at < from) return {step: at, record: null, snapshot: doc.initial};
  const record = doc.steps[at - from];
  return {step: at, record, snapshot: record.snapshot};
}
