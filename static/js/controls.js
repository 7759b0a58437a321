// The transport bar and the keyboard: step, back, play/pause, speed, the scrubber, Home/End.
// Works with either player (SessionPlayer or LocalPlayer): both take the same calls.

import {setAttr, setText} from "./dom.js";

const TYPING = new Set(["INPUT", "SELECT", "TEXTAREA"]);

/** `overrides.step` replaces the player's step (prediction mode asks before stepping). */
export function bindControls(bar, player, overrides = {}) {
  const q = (selector) => bar.querySelector(selector);
  const scrubber = q('[data-control="scrubber"]');
  const speed = q('[data-control="speed"]');
  const counter = q(".counter");
  const play = q('[data-action="play"]');
  const pill = q(".status-pill");
  const actions = {
    reset: () => player.home(), back: () => player.back(), step: overrides.step || (() => player.step()),
    play: () => player.toggle(), end: () => player.end(),
  };
  // A new run binds the same bar again: detach() takes every listener of this player away, so
  // the old run's player never answers a click, the scrubber or a key.
  const onClick = (event) => {
    const button = event.target.closest("button[data-action]");
    if (button && actions[button.dataset.action]) actions[button.dataset.action]();
  };
  const onScrub = () => player.seek(Number(scrubber.value));
  const onSpeed = () => player.setSpeed(Number(speed.value));
  bar.addEventListener("click", onClick);
  scrubber.addEventListener("input", onScrub);
  speed.addEventListener("change", onSpeed);

  const keys = bindKeys(actions, scrubber);

  return {
    update(frame) {
      const total = frame.total_steps;
      setAttr(scrubber, "max", total);
      if (Number(scrubber.value) !== frame.step && document.activeElement !== scrubber) scrubber.value = frame.step;
      else if (Number(scrubber.value) !== frame.step && !frame.playing) scrubber.value = frame.step;
      setAttr(scrubber, "aria-valuetext", `step ${frame.step} of ${total}`);
      setAttr(counter, "data-step", frame.step);
      setText(counter.querySelector(".now"), frame.step);
      setText(counter.querySelector(".total"), total);
      setAttr(play, "aria-pressed", frame.playing);
      setAttr(play, "aria-label", frame.playing ? "Pause" : "Play");
      setText(play.querySelector(".play-label"), frame.playing ? "Pause" : "Play");
      bar.classList.toggle("playing", Boolean(frame.playing));
      if (frame.speed && speed.value !== String(frame.speed)) {
        if (![...speed.options].some((o) => o.value === String(frame.speed))) {
          speed.append(new Option(`${frame.speed} steps/s`, String(frame.speed)));
        }
        speed.value = String(frame.speed);
      }
      q('[data-action="back"]').disabled = frame.step === 0;
      q('[data-action="reset"]').disabled = frame.step === 0;
      const atEnd = frame.step >= total;
      q('[data-action="end"]').disabled = atEnd;
      q('[data-action="step"]').disabled = atEnd && frame.status !== "running";
      // A run that finished with diagnostics is not a green "done".
      const flawed = atEnd && frame.status === "done" && frame.diagnostics > 0;
      const state = !atEnd ? "running" : flawed ? "done_with_diagnostics" : frame.status;
      setAttr(pill, "data-status", state);
      setText(pill.querySelector(".text"), !atEnd ? (frame.playing ? "playing" : "running")
        : flawed ? `done, ${frame.diagnostics} diagnostic${frame.diagnostics === 1 ? "" : "s"}` : `${frame.status.replace("_", " ")}`);
    },
    detach() {
      keys.detach();
      bar.removeEventListener("click", onClick);
      scrubber.removeEventListener("input", onScrub);
      speed.removeEventListener("change", onSpeed);
    },
  };
}

/** The keyboard without a transport bar (an embed showing no controls panel): Right = step,
 *  Left = back, Space = play/pause, Home, End. */
export function bindKeys(actions, scrubber = null) {
  const onKey = (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (TYPING.has(target.tagName) && !(target === scrubber && event.key === " ")) return;
    if ((event.key === " " || event.key === "Enter") && (target.tagName === "BUTTON" || target.tagName === "A")) return;
    const keys = {ArrowRight: actions.step, ArrowLeft: actions.back, " ": actions.play,
                  Home: actions.reset, End: actions.end};
    const action = keys[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  };
  document.addEventListener("keydown", onKey);
  return {detach() { document.removeEventListener("keydown", onKey); }};
}

/** A short message in the toolbar's live region (copied, refused, ...). */
export function toast(node, text, kind = "info") {
  if (!node) return;
  node.textContent = text;
  node.dataset.kind = kind;
  clearTimeout(node.timer);
  node.timer = setTimeout(() => { node.textContent = ""; }, kind === "error" ? 6000 : 2500);
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (err) {
    const area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
    return ok;
  }
}
