// ShiftTeacherForcing: decoder input, label and readable answer tokens per position; leaks light up.

function teacherForcingTable(tokens, shift, causal) {
  const K = tokens.length;
  const inputs = Array.from({ length: shift ? K - 1 : K }, (_, t) => t);
  return inputs.map((inp, t) => {
    const label = shift ? t + 1 : t;
    const readable = causal ? inputs.slice(0, t + 1) : inputs.slice();
    return { position: t, input: inp, label, readable, leak: readable.includes(label) };
  });
}

function render({ model, el }) {
  const root = widgetRoot(el, "ShiftTeacherForcing");
  const toggle = (name, text) => {
    const box = h("input", { type: "checkbox", "data-testid": `toggle-${name}` });
    box.addEventListener("change", () => push(model, { [name]: box.checked }));
    return [box, h("label", { class: "encdec-switch" }, box, " ", text)];
  };
  const [shiftBox, shiftLabel] = toggle("shift", "shift (input = answer[:-1], label = answer[1:])");
  const [maskBox, maskLabel] = toggle("causal_mask", "causal mask in decoder self-attention");
  const body = h("div", {});
  root.append(h("div", { class: "encdec-toolbar" }, shiftLabel, maskLabel), body);

  function draw() {
    const tokens = model.get("tokens");
    const shift = model.get("shift"), causal = model.get("causal_mask");
    shiftBox.checked = shift; maskBox.checked = causal;
    const rows = teacherForcingTable(tokens, shift, causal);
    const leaks = rows.filter((r) => r.leak);
    const chip = (k, r) => h("span", { class: "encdec-chip" + (k === r.label ? " leak" : ""), "data-index": k },
      h("span", { class: "encdec-idx" }, k), " ", tokens[k]);
    body.replaceChildren(
      h("table", { class: "encdec-grid" },
        h("thead", {}, h("tr", {}, h("th", {}, "position t"), h("th", {}, "decoder input"), h("th", {}, "label (to predict)"),
          h("th", {}, "answer tokens position t can read"))),
        h("tbody", {}, rows.map((r) => h("tr", { class: r.leak ? "leak" : "", "data-leak": r.leak ? "yes" : "no", "data-position": r.position },
          h("td", { class: "encdec-num" }, r.position),
          h("td", {}, h("span", { class: "encdec-idx" }, r.input), " ", tokens[r.input]),
          h("td", {}, h("span", { class: "encdec-idx" }, r.label), " ", tokens[r.label]),
          h("td", {}, r.readable.map((k) => chip(k, r)), r.leak ? h("b", { class: "encdec-leak-text" }, " ← reads its own label") : null))))),
      h("p", { class: "encdec-status " + (leaks.length ? "bad" : "good"), "data-testid": "leak-status" },
        leaks.length
          ? `Leak at ${leaks.length} of ${rows.length} positions (${leaks.map((r) => r.position).join(", ")}): ` +
            (shift ? "without the causal mask, a position reads later ground-truth tokens, including the one it must predict."
                   : "without the shift, position t's input is its own label, so copying wins.")
          : "No leak: every position predicts the next token from the tokens before it only."));
  }

  draw();
  return watch(model, ["tokens", "shift", "causal_mask"], draw);
}

export default { render };
