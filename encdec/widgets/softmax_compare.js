// SoftmaxMaskCompare: one reader's row; mask-then-softmax beside softmax-then-zero.

import { fmt, h, keepFocus, liveRegion, maskedSoftmaxRow, push, softmax, sum, t, watch, widgetRoot } from "./common.js";

// The caption follows the reader: the first reads only itself, the last has no future to mask.
export function captionOf(model, tokens, reader, wrongSum) {
  const token = tokens[reader];
  if (reader === tokens.length - 1) return t(model, "softmax_compare.caption_last", { i: reader, token });
  const may = t(model, reader === 0 ? "softmax_compare.may_read_first" : "softmax_compare.may_read", { i: reader, token });
  return t(model, "softmax_compare.caption", { may, sum: h("b", {}, fmt(wrongSum)) });
}

export function render({ model, el }) {
  const root = widgetRoot(el, "SoftmaxMaskCompare");
  // Controls are built once (a slider replaced mid-drag would stop following the mouse).
  const slider = h("input", { type: "range", min: -4, max: 10, step: 0.1,
    "data-testid": "future-slider" });
  slider.addEventListener("input", () => push(model, { future_score: Number(slider.value) }));
  const sliderValue = h("b", { "data-testid": "future-value" });
  const readers = h("span", {});
  const readerLabel = h("span", { class: "encdec-label" });
  const sliderLabel = h("span", {});
  const body = h("div", {});
  root.append(
    h("div", { class: "encdec-toolbar" }, readerLabel, readers),
    h("div", { class: "encdec-toolbar" }, h("label", {}, sliderLabel, " ", slider, " ", sliderValue)),
    body);
  const live = liveRegion(root);

  function draw() {
    const tokens = model.get("tokens");
    const reader = model.get("reader");
    const future = model.get("future_score");
    const row = model.get("scores").map((s, j) => (j > reader ? future : s));
    const right = maskedSoftmaxRow(row, row.map((_, j) => j > reader));
    const wrong = softmax(row).map((w, j) => (j > reader ? 0 : w));

    readerLabel.textContent = t(model, "softmax_compare.reader_label");
    sliderLabel.textContent = t(model, "softmax_compare.slider_label");
    slider.setAttribute("aria-label", t(model, "softmax_compare.slider_aria"));
    if (Number(slider.value) !== future) slider.value = future;
    slider.disabled = reader === tokens.length - 1;  // the last reader has no future for it to score
    sliderValue.textContent = fmt(future, 1);
    readers.replaceChildren(...tokens.map((tok, i) => h("button", {
      class: "encdec-btn" + (i === reader ? " active" : ""), "data-reader": i, "aria-pressed": i === reader ? "true" : "false",
      onclick: () => push(model, { reader: i }) }, `${i} ${tok}`)));

    const bar = (w, cls) => h("div", { class: "encdec-bar-wrap" },
      h("div", { class: `encdec-bar ${cls}`, style: `width: ${(100 * w).toFixed(1)}%` }));
    const line = (label, weights, key, cls) => h("tr", { "data-testid": `row-${key}` },
      h("th", { class: "encdec-rowhead" }, label),
      weights.map((w, j) => h("td", { class: "encdec-num" + (j > reader ? " future" : ""), "data-testid": `w-${key}-${j}` },
        h("span", { class: "w" }, fmt(w)), bar(w, cls))),
      h("td", { class: "encdec-sum" + (Math.abs(sum(weights) - 1) > 5e-4 ? " warn" : " ok"), "data-testid": `sum-${key}` },
        fmt(sum(weights))));

    body.replaceChildren(
      h("table", { class: "encdec-grid encdec-compare encdec-standing" },
        h("thead", {}, h("tr", {}, h("th", {}, t(model, "softmax_compare.source")),
          tokens.map((tok, j) => h("th", { class: j > reader ? "future" : "" }, h("span", { class: "encdec-idx" }, j), " ", tok,
            j > reader ? h("div", { class: "encdec-tag" }, t(model, "softmax_compare.future")) : null)),
          h("th", {}, t(model, "softmax_compare.sum")))),
        h("tbody", {},
          h("tr", {}, h("th", { class: "encdec-rowhead" }, t(model, "softmax_compare.score")),
            row.map((s, j) => h("td", { class: "encdec-num" + (j > reader ? " future" : ""), "data-testid": `score-${j}` }, fmt(s, 2))),
            h("td", {})),
          line(t(model, "softmax_compare.row_mask"), right, "mask", "good"),
          line(t(model, "softmax_compare.row_zero"), wrong, "zero", "bad"))),
      h("p", { class: "encdec-caption", "data-testid": "caption" }, captionOf(model, tokens, reader, sum(wrong))));
    live.textContent = t(model, "softmax_compare.live",
      { i: reader, token: tokens[reader], score: fmt(future, 1), right: fmt(sum(right)), wrong: fmt(sum(wrong)) });
  }

  draw();
  return watch(model, ["tokens", "scores", "reader", "future_score"], keepFocus(root, draw));
}

export default { render };
