// MaskToggle: the reader x source grid of chapter 11; weights are mask-then-softmax per row.

function presetMask(preset, K, numPadding) {
  return Array.from({ length: K }, (_, i) =>
    Array.from({ length: K }, (_, j) =>
      preset === "causal" ? j > i : preset === "padding" ? j >= K - numPadding : false));
}

function render({ model, el }) {
  const root = widgetRoot(el, "MaskToggle");

  function draw() {
    const tokens = model.get("tokens");
    const scores = model.get("scores");
    const mask = model.get("mask");
    const preset = model.get("preset");
    const K = tokens.length;
    const weights = scores.map((row, i) => maskedSoftmaxRow(row, mask[i]));
    const presetNames = { causal: t(model, "mask_toggle.preset_causal"), padding: t(model, "mask_toggle.preset_padding"),
      none: t(model, "mask_toggle.preset_none") };
    const status = { causal: "mask_toggle.status_causal", padding: "mask_toggle.status_padding",
      none: "mask_toggle.status_none", custom: "mask_toggle.status_custom" };

    const toolbar = h("div", { class: "encdec-toolbar" },
      h("span", { class: "encdec-label" }, t(model, "mask_toggle.preset_label")),
      ["causal", "padding", "none"].map((p) => h("button", {
        class: "encdec-btn" + (preset === p ? " active" : ""), "data-preset": p,
        onclick: () => push(model, { preset: p, mask: presetMask(p, K, model.get("num_padding")) }),
      }, presetNames[p])),
      h("span", { class: "encdec-note", "data-testid": "preset" }, t(model, status[preset])));

    const head = h("tr", {}, h("th", { class: "encdec-corner" }, t(model, "common.corner_reader_source")),
      tokens.map((tok, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", tok)),
      h("th", {}, t(model, "mask_toggle.row_sum")));
    const rows = tokens.map((tok, i) => {
      const allForbidden = mask[i].every(Boolean);
      return h("tr", {}, h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-idx" }, i), " ", tok),
        tokens.map((_, j) => h("td", {
          class: "encdec-cell " + (mask[i][j] ? "forbidden" : "allowed"),
          style: mask[i][j] ? "" : heat(weights[i][j]),
          "data-row": i, "data-col": j,
          title: t(model, mask[i][j] ? "mask_toggle.cell_forbidden" : "mask_toggle.cell_allowed",
            { i, reader: tokens[i], j, source: tokens[j], score: fmt(scores[i][j], 2) }),
          onclick: () => {
            const next = mask.map((r) => r.slice());
            next[i][j] = !next[i][j];
            push(model, { mask: next, preset: "custom" });
          },
        }, h("span", { class: "w" }, mask[i][j] && !allForbidden ? "✕" : fmt(weights[i][j])),
          h("span", { class: "s" }, `s=${fmt(scores[i][j], 1)}`))),
        h("td", { class: "encdec-sum" + (allForbidden ? " warn" : ""), "data-testid": `rowsum-${i}`,
          title: allForbidden ? t(model, "mask_toggle.all_forbidden") : "" },
          fmt(sum(weights[i]))));
    });
    root.replaceChildren(toolbar,
      h("table", { class: "encdec-grid" }, h("thead", {}, head), h("tbody", {}, rows)),
      h("p", { class: "encdec-caption" }, t(model, "mask_toggle.caption")));
  }

  draw();
  return watch(model, ["tokens", "scores", "mask", "preset"], draw);
}

export default { render };
