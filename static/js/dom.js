// A tiny HTML element helper, the twin of svg.js: h("li", {class: "x", dataset: {...}}, ...children).

export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Set an attribute only when it changed (renders run for every step). */
export function setAttr(node, name, value) {
  const text = String(value);
  if (node.getAttribute(name) !== text) node.setAttribute(name, text);
}

export function setText(node, value) {
  const text = String(value);
  if (node.textContent !== text) node.textContent = text;
}

/** Re-run a CSS animation on `node` by taking the class off and putting it back. */
export function replay(node, className) {
  node.classList.remove(className);
  void node.getBoundingClientRect();
  node.classList.add(className);
}

/** Keep `node` at the tallest height it has had at this width, so what sits below it never
 *  moves as text comes and goes from step to step (a second click on the timeline lands on
 *  the same step). `release` forgets it (a new run, a new width). */
export function hold(node) {
  if (!node || node.hidden) return;
  const box = node.getBoundingClientRect();
  if (!box.width) return;
  if (Math.abs((node.heldWidth || 0) - box.width) > 4) { release(node); node.heldWidth = box.width; }
  const height = node.getBoundingClientRect().height;
  if (height > (node.held || 0) + 0.5) {
    node.held = height;
    node.style.minHeight = `${Math.ceil(height)}px`;
  }
}

export function release(node) {
  if (!node) return;
  node.held = 0;
  node.style.minHeight = "";
}
