// AttentionMapViewer: heatmaps of a model's attention weights, by kind, layer and head.

import { fmt, gridCell, gridKeys, gridReadout, h, heat, keepFocus, liveRegion, push, sourceText, t, watch, widgetRoot } from "./common.js";

export function render({ model, el }) {
  const root = widgetRoot(el, "AttentionMapViewer");
  const controls = h("div", {});
  const body = h("div", {});
  root.append(controls, body);
  const live = liveRegion(root);
  const at = [0, 0];  // the map's tab stop
  const shown = [];  // the cell the readout describes (focused, hovered or tapped)

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
        class: "encdec-btn" + (value === current ? " active" : ""), [`data-${key}`]: value, "aria-pressed": value === current ? "true" : "false",
        onclick: () => push(model, { [key]: value }) }, text)));
    controls.replaceChildren(h("div", { class: "encdec-toolbar" },
      group(t(model, "attention_maps.attention_label"), kinds, kind, "kind"),
      group(t(model, "attention_maps.layer_label"), Array.from({ length: layers }, (_, l) => [l, `${l + 1}`]), layer, "layer"),
      group(t(model, "attention_maps.head_label"), Array.from({ length: heads }, (_, k) => [k, `${k + 1}`]), head, "head")));
    const what = { encoder_self: t(model, "attention_maps.what_encoder_self"),
      decoder_self: t(model, "attention_maps.what_decoder_self"), cross: t(model, "attention_maps.what_cross") }[kind];
    const title = t(model, "attention_maps.title", { kind: kinds.find(([k]) => k === kind)[1], layer: layer + 1, head: head + 1, what });
    const describe = (i, j) => t(model, "attention_maps.cell_title", { reader: rowsTok[i], i, source: colsTok[j], j, weight: fmt(map[i][j], 2) });
    const { info, show } = gridReadout(at, shown, map.length, colsTok.length, describe, t(model, "attention_maps.readout_hint"));
    live.textContent = title;
    body.replaceChildren(
      h("div", { class: "encdec-label", "data-testid": "map-title" }, title),
      h("table", { class: "encdec-grid encdec-heat encdec-standing", role: "grid", "aria-label": title,
        onkeydown: gridKeys(at, map.length, colsTok.length, null) },
        h("thead", {}, h("tr", {}, h("th", { class: "encdec-corner" }, t(model, "common.corner_reader_source")),
          colsTok.map((tok, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", tok)))),
        h("tbody", {}, map.map((row, i) => h("tr", {}, h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-idx" }, i), " ", rowsTok[i]),
          row.map((w, j) => h("td", { ...heat(w), ...gridCell(at, i, j, show), "aria-label": describe(i, j), onclick: () => show(i, j) },
            fmt(w, 2))))))),
      info,
      h("p", { class: "encdec-caption" }, t(model, "attention_maps.caption",
        { source: sourceText(model), question: question.join(" "), input: decIn.join(" ") })));
  }

  draw();
  return watch(model, ["maps", "kind", "layer", "head", "question", "answer"], keepFocus(root, draw));
}

export default { render };
