// Shared helpers of the book's widgets. Python prepends this file to each widget's ES module
// (the browser imports one string per widget), so everything here is plain functions.

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function fmt(x, digits = 3) {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

function sum(values) {
  return values.reduce((a, b) => a + b, 0);
}

function softmax(row) {
  const top = Math.max(...row);
  const exps = row.map((x) => Math.exp(x - top));
  const total = sum(exps);
  return exps.map((e) => e / total);
}

// Mask, then softmax (as encdec.attention.masked_softmax): forbidden sources leave the
// denominator; a row with every source forbidden spreads evenly, as a finite fill value does.
function maskedSoftmaxRow(scores, forbidden) {
  const allowed = scores.map((_, j) => j).filter((j) => !forbidden[j]);
  if (allowed.length === 0) return scores.map(() => 1 / scores.length);
  const sub = softmax(allowed.map((j) => scores[j]));
  const out = scores.map(() => 0);
  allowed.forEach((j, k) => { out[j] = sub[k]; });
  return out;
}

function shapeText(shape) {
  return "[" + shape.join(", ") + "]";
}

// Weight in [0, 1] -> cell background (light to dark blue) and a readable text colour.
function heat(weight) {
  const w = Math.max(0, Math.min(1, weight));
  return `background: rgba(29, 78, 216, ${(0.04 + 0.86 * w).toFixed(3)}); color: ${w > 0.5 ? "#fff" : "#111"}`;
}

// Set traits from the browser; in a live kernel Python sees them, on the static page they stay local.
function push(model, changes) {
  for (const [key, value] of Object.entries(changes)) model.set(key, value);
  model.save_changes();
}

function watch(model, names, callback) {
  for (const name of names) model.on(`change:${name}`, callback);
  return () => { for (const name of names) model.off(`change:${name}`, callback); };
}

function widgetRoot(el, name) {
  const root = h("div", { class: `encdec-widget encdec-${name}`, "data-widget": name });
  el.append(root);
  return root;
}
