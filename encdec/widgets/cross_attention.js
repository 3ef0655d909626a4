// CrossAttentionExplorer: shapes of Q, K, V, scores, A and output; hover A to read who reads whom.

function render({ model, el }) {
  const root = widgetRoot(el, "CrossAttentionExplorer");
  const maxLen = model.get("max_len");
  const makeRange = (name) => {
    const input = h("input", { type: "range", min: 1, max: maxLen, step: 1, "data-testid": `${name}-input`, "aria-label": name });
    input.addEventListener("input", () => push(model, { [name]: Number(input.value), selected: [0, 0] }));
    return input;
  };
  const kaInput = makeRange("Ka");
  const kqInput = makeRange("Kq");
  const kaValue = h("b", { "data-testid": "Ka-value" });
  const kqValue = h("b", { "data-testid": "Kq-value" });
  const swap = h("input", { type: "checkbox", "data-testid": "swap-q" });
  swap.addEventListener("change", () => push(model, { swap_q: swap.checked, selected: [0, 0] }));
  const body = h("div", {});
  const info = h("div", { class: "encdec-info", "data-testid": "hover-info", "aria-live": "polite" });
  root.append(
    h("div", { class: "encdec-toolbar" },
      h("label", {}, "Ka (answer length) ", kaInput, " ", kaValue),
      h("label", {}, "Kq (question length) ", kqInput, " ", kqValue)),
    h("div", { class: "encdec-toolbar" }, h("label", {}, swap, " take Q from the encoder instead (swap the Q source)")),
    body, info);

  function describe(i, j) {
    const Ka = model.get("Ka"), Kq = model.get("Kq");
    const lesson = Ka === model.get("answer_tokens").length && Kq === model.get("question_tokens").length;
    const ans = (k) => (lesson ? ` (${model.get("answer_tokens")[k]})` : "");
    const que = (k) => (lesson ? ` (${model.get("question_tokens")[k]})` : "");
    return model.get("swap_q")
      ? `A[:, ${i}, ${j}]: question position ${i}${que(i)} reads answer position ${j}${ans(j)}`
      : `A[:, ${i}, ${j}]: answer position ${i}${ans(i)} reads question position ${j}${que(j)}`;
  }

  function draw() {
    const Ka = model.get("Ka"), Kq = model.get("Kq"), swapped = model.get("swap_q");
    const [sel_i, sel_j] = model.get("selected");
    kaInput.value = Ka; kqInput.value = Kq; swap.checked = swapped;
    kaValue.textContent = Ka; kqValue.textContent = Kq;
    const qLen = swapped ? Kq : Ka, kvLen = swapped ? Ka : Kq;
    const qFrom = swapped ? "encoder (question)" : "decoder (answer so far)";
    const kvFrom = swapped ? "decoder (answer so far)" : "encoder memory (question)";
    const shapes = [
      ["Q", ["N", qLen, "M"], `queries, from the ${qFrom}`],
      ["K", ["N", kvLen, "M"], `keys, from the ${kvFrom}`],
      ["V", ["N", kvLen, "M"], `values, from the ${kvFrom}`],
      ["scores = Q Kᵀ / √d", ["N", qLen, kvLen], "one score per (reader, source) pair"],
      ["A = softmax(scores)", ["N", qLen, kvLen], "each row sums to 1 over the sources"],
      ["output = A V", ["N", qLen, "M"], swapped ? "one row per QUESTION position" : "one row per answer position"],
    ];
    const lesson = Ka === model.get("answer_tokens").length && Kq === model.get("question_tokens").length;
    const label = (side, k) => [`${side}${k}`, lesson
      ? h("div", { class: "encdec-tag" }, model.get(side === "a" ? "answer_tokens" : "question_tokens")[k]) : null];
    const rowTok = (k) => label(swapped ? "q" : "a", k);
    const colTok = (k) => label(swapped ? "a" : "q", k);
    const grid = h("table", { class: "encdec-grid encdec-small" },
      h("thead", {}, h("tr", {}, h("th", { class: "encdec-corner" }, swapped ? "question ↓ · answer →" : "answer ↓ · question →"),
        Array.from({ length: kvLen }, (_, j) => h("th", {}, ...colTok(j))))),
      h("tbody", {}, Array.from({ length: qLen }, (_, i) => h("tr", {}, h("th", { class: "encdec-rowhead" }, ...rowTok(i)),
        Array.from({ length: kvLen }, (_, j) => h("td", {
          class: "encdec-cell encdec-acell" + (i === sel_i && j === sel_j ? " selected" : ""),
          "data-row": i, "data-col": j, title: describe(i, j),
          onmouseenter: () => { info.textContent = describe(i, j); },
          onmouseleave: () => { info.textContent = describe(...model.get("selected")); },
          onclick: () => push(model, { selected: [i, j] }),
        }, ""))))));
    body.replaceChildren(
      h("div", { class: "encdec-columns" },
        h("table", { class: "encdec-grid encdec-shapes" },
          h("thead", {}, h("tr", {}, h("th", {}, "tensor"), h("th", {}, "shape"), h("th", {}, "meaning"))),
          h("tbody", {}, shapes.map(([name, shape, meaning]) => h("tr", { "data-testid": `shape-${name.split(" ")[0]}` },
            h("th", { class: "encdec-rowhead" }, name), h("td", { class: "encdec-mono" }, shapeText(shape)), h("td", { class: "encdec-left" }, meaning))))),
        h("div", {}, h("div", { class: "encdec-label" }, `A ${shapeText(["N", qLen, kvLen])}: hover a cell`), grid)),
      h("p", { class: "encdec-caption", "data-testid": "swap-note" }, swapped
        ? `Swapped: each of the ${Kq} question positions now reads the answer, and the output has ${Kq} rows — ` +
          `it no longer lines up with the ${Ka} answer positions the decoder must predict, so it cannot be the decoder's next state.`
        : `Q decides the number of rows: ${Ka} answer positions each read all ${Kq} question positions. ` +
          "The output keeps the decoder's length, so it adds question information to each answer position."));
    const [i, j] = model.get("selected");
    info.textContent = i < qLen && j < kvLen ? describe(i, j) : "Hover a cell of A.";
  }

  draw();
  return watch(model, ["Ka", "Kq", "swap_q", "selected", "answer_tokens", "question_tokens"], draw);
}

export default { render };
