// Shared helpers of the book's widgets. Python prepends this file to each widget's ES module
// (the browser imports one string per widget), so everything here is plain functions.

// Every word a widget shows comes from the string tables (encdec/widgets/strings/<lang>.json), which
// Python hands over in the synced trait `_strings`: t(model, "section.key", { n: 3 }) looks one up.

// The language shown: the `lang` trait, or for "auto" the page's own <html lang> (zh-CN: Chinese).
function widgetLang(model) {
  const lang = model.get("lang");
  if (lang && lang !== "auto") return lang;
  const page = (typeof document !== "undefined" && document.documentElement && document.documentElement.lang) || "";
  return page.toLowerCase().startsWith("zh") ? "zh" : "en";
}

// Replace each {name} of a template (as encdec.widgets._base.fill). A string, or, when a value is
// an element (a number in bold, a chip), the list of texts and elements for h() to append.
function fill(template, values = {}) {
  const parts = template.split(/\{(\w+)\}/).map((part, k) => (k % 2 === 0 ? part
    : Object.prototype.hasOwnProperty.call(values, part) ? values[part] : `{${part}}`));
  return parts.some((x) => x !== null && typeof x === "object") ? parts.filter((x) => x !== "") : parts.join("");
}

function t(model, key, values = {}) {
  const tables = model.get("_strings") || {};
  const table = tables[widgetLang(model)] || tables.en || Object.values(tables)[0] || {};
  const dot = key.indexOf(".");
  const template = (table[key.slice(0, dot)] || {})[key.slice(dot + 1)];
  if (template === undefined) {
    console.warn("encdec:", key);
    return key;
  }
  return fill(template, values);
}

// A count: the table's `<key>_one` for 1, `<key>_other` otherwise, with {n} filled in.
function tn(model, key, n, values = {}) {
  return t(model, key + (n === 1 ? "_one" : "_other"), { n, ...values });
}

// Where a figure's numbers come from: the `source` trait names one of the table's sources
// ("lesson", "trained", "untrained"); any other text is shown as it is.
function sourceText(model) {
  const source = model.get("source");
  const known = { lesson: "common.source_lesson", trained: "common.source_trained", untrained: "common.source_untrained" };
  return known[source] ? t(model, known[source]) : source;
}

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

// Redraw on a change of these traits, and of the language.
function watch(model, names, callback) {
  const all = [...names, "lang", "_strings"];
  for (const name of all) model.on(`change:${name}`, callback);
  return () => { for (const name of all) model.off(`change:${name}`, callback); };
}

function widgetRoot(el, name) {
  const root = h("div", { class: `encdec-widget encdec-${name}`, "data-widget": name });
  el.append(root);
  return root;
}
