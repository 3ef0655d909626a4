// AttentionMapViewer: heatmaps of a model's attention weights, by kind, layer and head.

const KINDS = [["encoder_self", "encoder self"], ["decoder_self", "decoder self"], ["cross", "decoder cross"]];

function render({ model, el }) {
  const root = widgetRoot(el, "AttentionMapViewer");
  const controls = h("div", {});
  const body = h("div", {});
  root.append(controls, body);

  function draw() {
    const maps = model.get("maps"), kind = model.get("kind");
    const layer = model.get("layer"), head = model.get("head");
    const layers = maps[kind].length, heads = maps[kind][0].length;
    const question = model.get("question"), decIn = model.get("answer").slice(0, -1);
    const rowsTok = kind === "encoder_self" ? question : decIn;
    const colsTok = kind === "decoder_self" ? decIn : question;
    const map = maps[kind][Math.min(layer, layers - 1)][Math.min(head, heads - 1)];
    const group = (name, items, current, key) => h("span", { class: "encdec-group" }, h("span", { class: "encdec-label" }, name),
      items.map(([value, text]) => h("button", {
        class: "encdec-btn" + (value === current ? " active" : ""), [`data-${key}`]: value,
        onclick: () => push(model, { [key]: value }) }, text)));
    controls.replaceChildren(h("div", { class: "encdec-toolbar" },
      group("Attention:", KINDS, kind, "kind"),
      group("Layer:", Array.from({ length: layers }, (_, l) => [l, `${l + 1}`]), layer, "layer"),
      group("Head:", Array.from({ length: heads }, (_, k) => [k, `${k + 1}`]), head, "head")));
    const what = { encoder_self: "question positions read question positions",
      decoder_self: "answer positions read earlier answer positions (causal mask)",
      cross: "answer positions (decoder queries) read question positions (encoder memory)" }[kind];
    body.replaceChildren(
      h("div", { class: "encdec-label", "data-testid": "map-title" },
        `${KINDS.find(([k]) => k === kind)[1]} attention, layer ${layer + 1}, head ${head + 1}: ${what}`),
      h("table", { class: "encdec-grid encdec-heat" },
        h("thead", {}, h("tr", {}, h("th", { class: "encdec-corner" }, "reader ↓ · source →"),
          colsTok.map((tok, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", tok)))),
        h("tbody", {}, map.map((row, i) => h("tr", {}, h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-idx" }, i), " ", rowsTok[i]),
          row.map((w, j) => h("td", { class: "encdec-cell", style: heat(w), "data-row": i, "data-col": j,
            title: `${rowsTok[i]} (position ${i}) → ${colsTok[j]} (position ${j}): ${fmt(w)}` }, fmt(w, 2))))))),
      h("p", { class: "encdec-caption" }, `Source: ${model.get("source")}. Question: ${question.join(" ")}; `,
        `decoder input: ${decIn.join(" ")}. Each row sums to 1.`));
  }

  draw();
  return watch(model, ["maps", "kind", "layer", "head", "question", "answer"], draw);
}

export default { render };
