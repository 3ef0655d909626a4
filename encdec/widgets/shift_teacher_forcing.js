// ShiftTeacherForcing: decoder input, label and readable answer tokens per position; leaks light up.

import { h, liveRegion, push, t, watch, widgetRoot } from "./common.js";

export function teacherForcingTable(tokens, shift, causal) {
  const K = tokens.length;
  const inputs = Array.from({ length: shift ? K - 1 : K }, (_, t) => t);
  return inputs.map((inp, t) => {
    const label = shift ? t + 1 : t;
    const readable = causal ? inputs.slice(0, t + 1) : inputs.slice();
    return { position: t, input: inp, label, readable, leak: readable.includes(label) };
  });
}

export function render({ model, el }) {
  const root = widgetRoot(el, "ShiftTeacherForcing");
  const toggle = (name) => {
    const box = h("input", { type: "checkbox", "data-testid": `toggle-${name}` });
    box.addEventListener("change", () => push(model, { [name]: box.checked }));
    const text = h("span", {});
    return [box, h("label", { class: "encdec-switch" }, box, " ", text), text];
  };
  const [shiftBox, shiftLabel, shiftText] = toggle("shift");
  const [maskBox, maskLabel, maskText] = toggle("causal_mask");
  const body = h("div", {});
  root.append(h("div", { class: "encdec-toolbar" }, shiftLabel, maskLabel), body);
  const live = liveRegion(root);

  function draw() {
    const tokens = model.get("tokens");
    const shift = model.get("shift"), causal = model.get("causal_mask");
    shiftBox.checked = shift; maskBox.checked = causal;
    shiftText.textContent = t(model, "shift_teacher_forcing.shift_label");
    maskText.textContent = t(model, "shift_teacher_forcing.mask_label");
    const rows = teacherForcingTable(tokens, shift, causal);
    const leaks = rows.filter((r) => r.leak);
    live.textContent = leaks.length ? t(model, "shift_teacher_forcing.live_leak", { n: leaks.length, total: rows.length })
      : t(model, "shift_teacher_forcing.no_leak");
    const chip = (k, r) => h("span", { class: "encdec-chip" + (k === r.label ? " leak" : ""), "data-index": k },
      h("span", { class: "encdec-idx" }, k), " ", tokens[k]);
    body.replaceChildren(
      h("table", { class: "encdec-grid" },
        h("thead", {}, h("tr", {}, h("th", {}, t(model, "shift_teacher_forcing.th_position")),
          h("th", {}, t(model, "shift_teacher_forcing.th_input")), h("th", {}, t(model, "shift_teacher_forcing.th_label")),
          h("th", {}, t(model, "shift_teacher_forcing.th_readable")))),
        h("tbody", {}, rows.map((r) => h("tr", { class: r.leak ? "leak" : "", "data-leak": r.leak ? "yes" : "no", "data-position": r.position },
          h("td", { class: "encdec-num" }, r.position),
          h("td", {}, h("span", { class: "encdec-idx" }, r.input), " ", tokens[r.input]),
          h("td", {}, h("span", { class: "encdec-idx" }, r.label), " ", tokens[r.label]),
          h("td", {}, r.readable.map((k) => chip(k, r)), r.leak ? h("b", { class: "encdec-leak-text" }, " ", t(model, "shift_teacher_forcing.reads_own_label")) : null))))),
      h("p", { class: "encdec-status " + (leaks.length ? "bad" : "good"), "data-testid": "leak-status" },
        leaks.length
          ? t(model, shift ? "shift_teacher_forcing.leak_no_mask" : "shift_teacher_forcing.leak_no_shift",
            { n: leaks.length, total: rows.length, positions: leaks.map((r) => r.position).join(", ") })
          : t(model, "shift_teacher_forcing.no_leak")));
  }

  draw();
  return watch(model, ["tokens", "shift", "causal_mask"], draw);
}

export default { render };
