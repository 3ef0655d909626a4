// Shared helpers of the book's widgets, plain functions: a widget imports the ones it uses, and the
// bundle step (scripts/widgets_bundle.py) puts them into the widget's one module.

// Every word a widget shows comes from the string tables (encdec/widgets/strings/<lang>.json), which
// Python hands over in the synced trait `_strings`: t(model, "section.key", { n: 3 }) looks one up.

// The language shown: the `lang` trait, or for "auto" the page's own <html lang> (zh-CN: Chinese).
export function widgetLang(model) {
  const lang = model.get("lang");
  if (lang && lang !== "auto") return lang;
  const page = (typeof document !== "undefined" && document.documentElement && document.documentElement.lang) || "";
  return page.toLowerCase().startsWith("zh") ? "zh" : "en";
}

// Replace each {name} of a template (as encdec.widgets._base.fill). A string, or, when a value is
// an element (a number in bold, a chip), the list of texts and elements for h() to append.
export function fill(template, values = {}) {
  const parts = template.split(/\{(\w+)\}/).map((part, k) => (k % 2 === 0 ? part
    : Object.prototype.hasOwnProperty.call(values, part) ? values[part] : `{${part}}`));
  return parts.some((x) => x !== null && typeof x === "object") ? parts.filter((x) => x !== "") : parts.join("");
}

export function t(model, key, values = {}) {
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
export function tn(model, key, n, values = {}) {
  return t(model, key + (n === 1 ? "_one" : "_other"), { n, ...values });
}

// Where a figure's numbers come from: the `source` trait names one of the table's sources
// ("lesson", "trained", "untrained"); any other text is shown as it is.
export function sourceText(model) {
  const source = model.get("source");
  const known = { lesson: "common.source_lesson", trained: "common.source_trained", untrained: "common.source_untrained" };
  return known[source] ? t(model, known[source]) : source;
}

export function h(tag, attrs, ...children) {
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

export function fmt(x, digits = 3) {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

export function sum(values) {
  return values.reduce((a, b) => a + b, 0);
}

export function softmax(row) {
  const top = Math.max(...row);
  const exps = row.map((x) => Math.exp(x - top));
  const total = sum(exps);
  return exps.map((e) => e / total);
}

// Mask, then softmax (as encdec.attention.masked_softmax): forbidden sources leave the
// denominator; a row with every source forbidden spreads evenly, as a finite fill value does.
export function maskedSoftmaxRow(scores, forbidden) {
  const allowed = scores.map((_, j) => j).filter((j) => !forbidden[j]);
  if (allowed.length === 0) return scores.map(() => 1 / scores.length);
  const sub = softmax(allowed.map((j) => scores[j]));
  const out = scores.map(() => 0);
  allowed.forEach((j, k) => { out[j] = sub[k]; });
  return out;
}

export function shapeText(shape) {
  return "[" + shape.join(", ") + "]";
}

// Weight in [0, 1] -> a heat cell's class and style: widgets.css colours it (light to dark blue in the
// light theme, dark to light in the dark one), in two halves so its text keeps 4.5:1 at every weight.
export function heat(weight, cls = "encdec-cell") {
  const w = Math.max(0, Math.min(1, weight)), hot = w > 0.5;
  return { class: `${cls} heat${hot ? " hot" : ""}`, style: `--encdec-w: ${(100 * (hot ? 2 * w - 1 : 2 * w)).toFixed(1)}%` };
}

// A grid of cells (data-row, data-col) is one tab stop, as in ARIA's grid pattern: the cell at `at`
// ([row, col], the widget's, kept across redraws) has tabindex 0, the others -1; arrow keys move,
// Home and End go to the row's ends (with Ctrl, the grid's corners), Enter or Space calls act(row, col).
export function gridKeys(at, rows, cols, act) {
  return (e) => {
    let [i, j] = at;
    const moves = { ArrowUp: [i - 1, j], ArrowDown: [i + 1, j], ArrowLeft: [i, j - 1], ArrowRight: [i, j + 1],
      Home: [e.ctrlKey ? 0 : i, 0], End: [e.ctrlKey ? rows - 1 : i, cols - 1] };
    if ((e.key === "Enter" || e.key === " ") && act) {
      e.preventDefault();
      act(i, j);
      return;
    }
    if (!moves[e.key]) return;
    e.preventDefault();
    [i, j] = [Math.max(0, Math.min(rows - 1, moves[e.key][0])), Math.max(0, Math.min(cols - 1, moves[e.key][1]))];
    const cell = e.currentTarget.querySelector(`[data-row="${i}"][data-col="${j}"]`);
    if (!cell) return;
    for (const other of e.currentTarget.querySelectorAll('[tabindex="0"]')) other.tabIndex = -1;
    cell.tabIndex = 0;
    cell.focus();
  };
}

// The cell attributes of such a grid: its place, the roving tabindex, and `show(row, col)` on focus,
// hover and tap (a readout that is not only a tooltip).
export function gridCell(at, i, j, show) {
  const seen = () => { at[0] = i; at[1] = j; show(i, j); };
  return { role: "gridcell", "data-row": i, "data-col": j, tabindex: at[0] === i && at[1] === j ? 0 : -1,
    onfocus: seen, onmouseenter: () => show(i, j) };
}

// A redraw of another size keeps the grid's tab stop `at` inside it (back to the first cell).
export function keepStopInside(at, rows, cols) {
  if (at[0] >= rows || at[1] >= cols) at.splice(0, 2, 0, 0);
}

// A grid's readout, a visible line rather than a tooltip: what the cell last focused, hovered or
// tapped shows (`seen`, [row, col] or empty, kept by the widget across redraws), else `hint`;
// show(i, j) puts a cell in it. The tab stop `at` stays inside the grid (keepStopInside).
export function gridReadout(at, seen, rows, cols, describe, hint) {
  keepStopInside(at, rows, cols);
  const inside = seen.length === 2 && seen[0] < rows && seen[1] < cols;
  const info = h("div", { class: "encdec-info", "data-testid": "readout" }, inside ? describe(...seen) : hint);
  const show = (i, j) => { seen.splice(0, 2, i, j); info.textContent = describe(i, j); };
  return { info, show };
}

// The widget's polite live region: a short sentence after each change, read aloud, not shown.
export function liveRegion(root) {
  const live = h("p", { class: "encdec-live", "aria-live": "polite", "data-testid": "live" });
  root.append(live);
  return live;
}

// Redraw without losing the keyboard's place: when the focused element was replaced, the one at the
// same place among the widget's focusable elements takes the focus; when it was disabled (a stepper's
// end), the one before it.
export function focusable(root) {
  return [...root.querySelectorAll(["button", "input", "select", "[tabindex]"].join())].filter((e) => !e.disabled);
}

export function keepFocus(root, draw) {
  return () => {
    const was = document.activeElement;
    const k = root.contains(was) ? focusable(root).indexOf(was) : -1;
    draw();
    if (k < 0 || (root.contains(was) && !was.disabled)) return;
    const now = focusable(root);
    const target = root.contains(was)
      ? now.filter((e) => e.compareDocumentPosition(was) & Node.DOCUMENT_POSITION_FOLLOWING).pop() : now[k];
    if (target) target.focus();
  };
}

// Set traits from the browser; in a live kernel Python sees them, on the static page they stay local.
export function push(model, changes) {
  for (const [key, value] of Object.entries(changes)) model.set(key, value);
  model.save_changes();
}

// Redraw on a change of these traits, and of the language.
export function watch(model, names, callback) {
  const all = [...names, "lang", "_strings"];
  for (const name of all) model.on(`change:${name}`, callback);
  return () => { for (const name of all) model.off(`change:${name}`, callback); };
}

export function widgetRoot(el, name) {
  const root = h("div", { class: `encdec-widget encdec-${name}`, "data-widget": name });
  el.append(root);
  return root;
}
