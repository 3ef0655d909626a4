// AttentionMapViewer: heatmaps of a model's attention weights, by kind, layer and head.

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
    const kinds = [["encoder_self", t(model, "attention_maps.kind_encoder_self")],
      ["decoder_self", t(model, "attention_maps.kind_decoder_self")], ["cross", t(model, "attention_maps.kind_cross")]];
    const group = (name, items, current, key) => h("span", { class: "encdec-group" }, h("span", { class: "encdec-label" }, name),
      items.map(([value, text]) => h("button", {
        class: "encdec-btn" + (value === current ? " active" : ""), [`data-${key}`]: value,
        onclick: () => push(model, { [key]: value }) }, text)));
    controls.replaceChildren(h("div", { class: "encdec-toolbar" },
      group(t(model, "attention_maps.attention_label"), kinds, kind, "kind"),
      group(t(model, "attention_maps.layer_label"), Array.from({ length: layers }, (_, l) => [l, `${l + 1}`]), layer, "layer"),
      group(t(model, "attention_maps.head_label"), Array.from({ length: heads }, (_, k) => [k, `${k + 1}`]), head, "head")));
    const what = { encoder_self: t(model, "attention_maps.what_encoder_self"),
      decoder_self: t(model, "attention_maps.what_decoder_self"), cross: t(model, "attention_maps.what_cross") }[kind];
    body.replaceChildren(
      h("div", { class: "encdec-label", "data-testid": "map-title" },
        t(model, "attention_maps.title", { kind: kinds.find(([k]) => k === kind)[1], layer: layer + 1, head: head + 1, what })),
      h("table", { class: "encdec-grid encdec-heat" },
        h("thead", {}, h("tr", {}, h("th", { class: "encdec-corner" }, t(model, "common.corner_reader_source")),
          colsTok.map((tok, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", tok)))),
        h("tbody", {}, map.map((row, i) => h("tr", {}, h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-idx" }, i), " ", rowsTok[i]),
          row.map((w, j) => h("td", { class: "encdec-cell", style: heat(w), "data-row": i, "data-col": j,
            title: t(model, "attention_maps.cell_title", { reader: rowsTok[i], i, source: colsTok[j], j, weight: fmt(w) }) },
            fmt(w, 2))))))),
      h("p", { class: "encdec-caption" }, t(model, "attention_maps.caption",
        { source: sourceText(model), question: question.join(" "), input: decIn.join(" ") })));
  }

  draw();
  return watch(model, ["maps", "kind", "layer", "head", "question", "answer"], draw);
}

export default { render };
