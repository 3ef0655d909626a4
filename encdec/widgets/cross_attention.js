// CrossAttentionExplorer: shapes of Q, K, V, scores, A and output, and A's weights; hover, tap or focus A
// to read who reads whom.

import { fmt, gridCell, gridKeys, h, heat, keepFocus, keepStopInside, liveRegion, push, shapeText, softmax, sourceText, t, watch, widgetRoot } from "./common.js";

// Made-up weights of a (rows, cols) A, only to show the shape: a softmax over each row of a fixed
// smooth pattern of scores (twin of cross_attention.example_weights).
export function exampleWeights(rows, cols) {
  return Array.from({ length: rows }, (_, i) => softmax(Array.from({ length: cols }, (_, j) => 2.0 * Math.cos(0.9 * i - 1.3 * j))));
}

// The weights the grid shows: the model's (the `weights` trait) at their own shape with Q from the
// decoder, else made-up ones (the twin of CrossAttentionExplorer.shown_weights).
export function shownWeights(given, rows, cols, swapped) {
  const own = !swapped && given.length === rows && given.length > 0 && given[0].length === cols;
  return { weights: own ? given : exampleWeights(rows, cols), own };
}

// What cell (i, j) of the weights shows, in words (the readout and the cell's label).
function describe(model, i, j) {
  const Ka = model.get("Ka"), Kq = model.get("Kq"), swapped = model.get("swap_q");
  const A = shownWeights(model.get("weights"), swapped ? Kq : Ka, swapped ? Ka : Kq, swapped).weights;
  const w = fmt(A[i][j], 2);
  const lesson = Ka === model.get("answer_tokens").length && Kq === model.get("question_tokens").length;
  const ans = (k) => (lesson ? t(model, "cross_attention.token", { token: model.get("answer_tokens")[k] }) : "");
  const que = (k) => (lesson ? t(model, "cross_attention.token", { token: model.get("question_tokens")[k] }) : "");
  return model.get("swap_q")
    ? t(model, "cross_attention.hover_swapped", { i, j, w, question: que(i), answer: ans(j) })
    : t(model, "cross_attention.hover", { i, j, w, answer: ans(i), question: que(j) });
}

// The tensors of cross-attention and their shapes (qLen queries over kvLen keys), as the lesson names them.
function shapesTable(model, qLen, kvLen, swapped) {
  const qFrom = t(model, swapped ? "cross_attention.from_encoder" : "cross_attention.from_decoder");
  const kvFrom = t(model, swapped ? "cross_attention.from_decoder" : "cross_attention.from_memory");
  // The first column names the tensors as the lesson's code does; the data-testid is its first word.
  const shapes = [
    ["Q", ["N", qLen, "M"], t(model, "cross_attention.meaning_q", { from: qFrom })],
    ["K", ["N", kvLen, "M"], t(model, "cross_attention.meaning_k", { from: kvFrom })],
    ["V", ["N", kvLen, "M"], t(model, "cross_attention.meaning_v", { from: kvFrom })],
    ["scores = Q Kᵀ / √d", ["N", qLen, kvLen], t(model, "cross_attention.meaning_scores")],
    ["A = softmax(scores)", ["N", qLen, kvLen], t(model, "cross_attention.meaning_a")],
    ["output = A V", ["N", qLen, "M"],
      t(model, swapped ? "cross_attention.meaning_output_swapped" : "cross_attention.meaning_output")],
  ];
  return h("table", { class: "encdec-grid encdec-shapes" },
    h("thead", {}, h("tr", {}, h("th", {}, t(model, "cross_attention.th_tensor")),
      h("th", {}, t(model, "cross_attention.th_shape")), h("th", {}, t(model, "cross_attention.th_meaning")))),
    h("tbody", {}, shapes.map(([name, shape, meaning]) => h("tr", { "data-testid": `shape-${name.split(" ")[0]}` },
      h("th", { class: "encdec-rowhead" }, name), h("td", { class: "encdec-mono" }, shapeText(shape)), h("td", { class: "encdec-left" }, meaning)))));
}

export function render({ model, el }) {
  const root = widgetRoot(el, "CrossAttentionExplorer");
  const maxLen = model.get("max_len");
  const makeRange = (name) => {
    const input = h("input", { type: "range", min: 1, max: maxLen, step: 1, "data-testid": `${name}-input` });
    input.addEventListener("input", () => push(model, { [name]: Number(input.value), selected: [0, 0] }));
    return input;
  };
  const kaInput = makeRange("Ka");
  const kqInput = makeRange("Kq");
  const kaValue = h("b", { "data-testid": "Ka-value" });
  const kqValue = h("b", { "data-testid": "Kq-value" });
  const swap = h("input", { type: "checkbox", "data-testid": "swap-q" });
  swap.addEventListener("change", () => push(model, { swap_q: swap.checked, selected: [0, 0] }));
  const kaLabel = h("span", {}), kqLabel = h("span", {}), swapLabel = h("span", {});
  const body = h("div", {});
  const info = h("div", { class: "encdec-info", "data-testid": "hover-info" });
  root.append(
    h("div", { class: "encdec-toolbar" },
      h("label", {}, kaLabel, " ", kaInput, " ", kaValue),
      h("label", {}, kqLabel, " ", kqInput, " ", kqValue)),
    h("div", { class: "encdec-toolbar" }, h("label", {}, swap, " ", swapLabel)),
    body, info);
  const live = liveRegion(root);
  const at = [0, 0];  // the grid's tab stop

  function draw() {
    const Ka = model.get("Ka"), Kq = model.get("Kq"), swapped = model.get("swap_q");
    const [sel_i, sel_j] = model.get("selected");
    kaInput.value = Ka; kqInput.value = Kq; swap.checked = swapped;
    kaValue.textContent = Ka; kqValue.textContent = Kq;
    kaLabel.textContent = t(model, "cross_attention.ka_label");
    kqLabel.textContent = t(model, "cross_attention.kq_label");
    swapLabel.textContent = t(model, "cross_attention.swap_label");
    kaInput.setAttribute("aria-label", t(model, "cross_attention.ka_aria"));
    kqInput.setAttribute("aria-label", t(model, "cross_attention.kq_aria"));
    const qLen = swapped ? Kq : Ka, kvLen = swapped ? Ka : Kq;
    const lesson = Ka === model.get("answer_tokens").length && Kq === model.get("question_tokens").length;
    const label = (side, k) => [`${side}${k}`, lesson
      ? h("div", { class: "encdec-tag" }, model.get(side === "a" ? "answer_tokens" : "question_tokens")[k]) : null];
    const rowTok = (k) => label(swapped ? "q" : "a", k);
    const colTok = (k) => label(swapped ? "a" : "q", k);
    keepStopInside(at, qLen, kvLen);
    const given = model.get("weights");
    const { weights: A, own } = shownWeights(given, qLen, kvLen, swapped);
    const select = (i, j) => push(model, { selected: [i, j] });
    const grid = h("table", { class: "encdec-grid encdec-heat encdec-standing", role: "grid", "data-testid": "A",
      "aria-label": t(model, "cross_attention.grid_label", { shape: shapeText(["N", qLen, kvLen]) }), onkeydown: gridKeys(at, qLen, kvLen, select) },
      h("thead", {}, h("tr", {}, h("th", { class: "encdec-corner" }, t(model, swapped ? "cross_attention.corner_swapped" : "cross_attention.corner")),
        Array.from({ length: kvLen }, (_, j) => h("th", {}, ...colTok(j))))),
      h("tbody", {}, Array.from({ length: qLen }, (_, i) => h("tr", {}, h("th", { class: "encdec-rowhead" }, ...rowTok(i)),
        Array.from({ length: kvLen }, (_, j) => h("td", {
          ...heat(A[i][j], "encdec-cell encdec-acell" + (i === sel_i && j === sel_j ? " selected" : "")),
          ...gridCell(at, i, j, (r, c) => { info.textContent = describe(model, r, c); }),
          "aria-label": describe(model, i, j), "aria-selected": i === sel_i && j === sel_j ? "true" : "false",
          onmouseleave: () => { info.textContent = describe(model, ...model.get("selected")); },
          onclick: () => select(i, j),
        }, fmt(A[i][j], 2)))))));
    const lessonShape = given.length > 0 ? { Ka: given.length, Kq: given[0].length } : null;
    const whose = own ? t(model, "cross_attention.weights_given", { source: sourceText(model), input: model.get("answer_tokens").join(" ") })
      : lessonShape ? t(model, "cross_attention.weights_example_trained", { source: sourceText(model), ...lessonShape })
        : t(model, "cross_attention.weights_example");
    body.replaceChildren(
      h("div", { class: "encdec-columns" },
        shapesTable(model, qLen, kvLen, swapped),
        h("div", {}, h("div", { class: "encdec-label" },
          t(model, "cross_attention.grid_label", { shape: shapeText(["N", qLen, kvLen]) })), h("div", { class: "encdec-scroll" }, grid))),
      h("p", { class: "encdec-caption", "data-testid": "weights-note", "data-own": own ? "yes" : "no" }, whose),
      h("p", { class: "encdec-caption", "data-testid": "swap-note" },
        t(model, swapped ? "cross_attention.note_swapped" : "cross_attention.note", { Ka, Kq })));
    const [i, j] = model.get("selected");
    info.textContent = i < qLen && j < kvLen ? describe(model, i, j) : t(model, "cross_attention.hover_hint");
    live.textContent = t(model, "cross_attention.live", { a: shapeText(["N", qLen, kvLen]), output: shapeText(["N", qLen, "M"]),
      cell: info.textContent });
  }

  draw();
  return watch(model, ["Ka", "Kq", "swap_q", "selected", "answer_tokens", "question_tokens", "weights", "source"], keepFocus(root, draw));
}

export default { render };
