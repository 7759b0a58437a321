// Players hold a cursor over a run and nothing else: step, back, seek, play, pause, speed.
// SessionPlayer asks the server (over the session's WebSocket), which paces play and answers
// every command with the state at the new cursor; LocalPlayer walks a trace document already
// in memory (compare view, GPU replays). Both emit "frame" with the same fields.

import {SessionSocket} from "./trace.js";

class Emitter {
  constructor() { this.handlers = {}; }
  on(type, handler) { (this.handlers[type] ||= []).push(handler); return this; }
  emit(type, value) { for (const handler of this.handlers[type] || []) handler(value); }
  /** A closed player draws nothing more: its page moved on to another run. */
  forget() { this.handlers = {}; }
}

export const SPEEDS = [1, 2, 4, 8, 15, 30];

/** A played frame's snapshot: the one before with `patch` applied (fields in `set` replaced
 *  whole, list items in `items` replaced by index), as the server's snapshot_patch writes it. */
function patched(snapshot, patch) {
  const out = {...snapshot, ...patch.set};
  for (const [name, items] of Object.entries(patch.items)) {
    const list = out[name] = out[name].slice();
    for (const [index, item] of Object.entries(items)) list[Number(index)] = item;
  }
  return out;
}

export class SessionPlayer extends Emitter {
  constructor(view, {speed = 4} = {}) {
    super();
    this.id = view.id;
    this.frame = {step: view.step, total_steps: view.total_steps, status: view.status,
                  snapshot: view.snapshot, record: view.record, ready: view.ready,
                  playing: false, speed};
    this.seeking = false;
    this.pendingSeek = null;
    this.socket = new SessionSocket(view.id, {
      onMessage: (message) => this.receive(message),
      onOpen: (again) => {
        this.send({type: "speed", steps_per_s: this.frame.speed});
        if (again) this.send({type: "seek", step: this.frame.step});
        if (again && this.frame.playing) this.play(); // resume where the drop left off
      },
      onDown: (code) => this.emit("down", code),
    });
  }

  receive(message) {
    if (message.type === "state") {
      if (message.id) this.id = message.id;
      const snapshot = message.patch ? patched(this.frame.snapshot, message.patch) : message.snapshot;
      this.frame = {step: message.step, total_steps: message.total_steps, status: message.status,
                    snapshot, record: message.record, ready: message.ready,
                    playing: message.playing, speed: message.speed};
      if (message.changed) this.emit("run", message);
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

  step(agent = null) { this.send(agent ? {type: "step", agent} : {type: "step"}); }
  back() { this.send({type: "back"}); }
  /** Scrubbing sends many seeks: keep one in flight and only the latest waiting. */
  seek(step) {
    if (this.seeking) { this.pendingSeek = step; return; }
    this.seeking = true;
    this.send({type: "seek", step});
  }
  home() { this.seek(0); }
  end() { this.seek(this.frame.total_steps); }
  play() { this.send({type: "play", steps_per_s: this.frame.speed, patches: true}); }
  pause() { this.send({type: "pause"}); }
  toggle() { if (this.frame.playing) this.pause(); else this.play(); }
  setSpeed(speed) { this.send({type: "speed", steps_per_s: speed}); }
  /** Forget the steps chosen by hand: the schedule's own run, at step 0. */
  reset() { this.send({type: "reset"}); }
  close() { this.socket.close(); this.forget(); }
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
