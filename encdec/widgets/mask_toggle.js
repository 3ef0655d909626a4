// MaskToggle: the reader x source grid of chapter 11; weights are mask-then-softmax per row.

import { fmt, gridCell, gridKeys, gridReadout, h, heat, keepFocus, liveRegion, maskedSoftmaxRow, push, sum, t, watch, widgetRoot } from "./common.js";

export function presetMask(preset, K, numPadding) {
  return Array.from({ length: K }, (_, i) =>
    Array.from({ length: K }, (_, j) =>
      preset === "causal" ? j > i : preset === "padding" ? j >= K - numPadding : false));
}

export function render({ model, el }) {
  const root = widgetRoot(el, "MaskToggle");
  const body = h("div", {});
  root.append(body);
  const live = liveRegion(root);
  const at = [0, 0];  // the grid's tab stop
  const read = [];  // the cell the readout describes (focused, hovered or tapped)

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
    // what a cell shows (its weight, or ✕, and s = its score), first in its name and the readout
    const shown = (i, j) => [mask[i][j] && !mask[i].every(Boolean) ? "✕" : fmt(weights[i][j]), `s=${fmt(scores[i][j], 1)}`];
    const describe = (i, j) => t(model, mask[i][j] ? "mask_toggle.cell_forbidden" : "mask_toggle.cell_allowed",
      { i, reader: tokens[i], j, source: tokens[j], shown: shown(i, j).join(" ") });
    const { info, show } = gridReadout(at, read, K, K, describe, t(model, "mask_toggle.readout_hint"));
    const toggle = (i, j) => {
      const next = mask.map((r) => r.slice());
      next[i][j] = !next[i][j];
      read.splice(0, 2, i, j);
      push(model, { mask: next, preset: "custom" });
      const row = maskedSoftmaxRow(model.get("scores")[i], next[i]);
      live.textContent = t(model, next[i][j] ? "mask_toggle.live_forbidden" : "mask_toggle.live_allowed",
        { i, reader: tokens[i], j, source: tokens[j], sum: fmt(sum(row)) });
    };

    const toolbar = h("div", { class: "encdec-toolbar" },
      h("span", { class: "encdec-label" }, t(model, "mask_toggle.preset_label")),
      ["causal", "padding", "none"].map((p) => h("button", {
        class: "encdec-btn" + (preset === p ? " active" : ""), "data-preset": p, "aria-pressed": preset === p ? "true" : "false",
        onclick: () => {
          push(model, { preset: p, mask: presetMask(p, K, model.get("num_padding")) });
          live.textContent = t(model, "mask_toggle.live_preset", { mask: t(model, status[p]) });
        },
      }, presetNames[p])),
      h("span", { class: "encdec-note", "data-testid": "preset" }, t(model, status[preset])));

    const head = h("tr", {}, h("th", { class: "encdec-corner" }, t(model, "common.corner_reader_source")),
      tokens.map((tok, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", tok)),
      h("th", {}, t(model, "mask_toggle.row_sum")));
    const rows = tokens.map((tok, i) => {
      const allForbidden = mask[i].every(Boolean);
      const cell = (j) => { const [w, s] = shown(i, j); return [h("span", { class: "w" }, w), " ", h("span", { class: "s" }, s)]; };
      return h("tr", {}, h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-idx" }, i), " ", tok),
        tokens.map((_, j) => h("td", {
          ...(mask[i][j] ? { class: "encdec-cell forbidden" } : heat(weights[i][j], "encdec-cell allowed")),
          ...gridCell(at, i, j, show), "aria-label": describe(i, j), onclick: () => toggle(i, j),
        }, cell(j))),
        h("td", { class: "encdec-sum" + (allForbidden ? " warn" : ""), "data-testid": `rowsum-${i}` }, fmt(sum(weights[i]))));
    });
    body.replaceChildren(toolbar,
      h("table", { class: "encdec-grid encdec-standing", role: "grid", "aria-label": t(model, "mask_toggle.grid_label"),
        onkeydown: gridKeys(at, K, K, toggle) }, h("thead", {}, head), h("tbody", {}, rows)),
      info,
      mask.some((r) => r.every(Boolean)) ? h("p", { class: "encdec-note", "data-testid": "all-forbidden" },
        t(model, "mask_toggle.all_forbidden")) : "",
      h("p", { class: "encdec-caption" }, t(model, "mask_toggle.caption")));
  }

  draw();
  return watch(model, ["tokens", "scores", "mask", "preset"], keepFocus(root, draw));
}

export default { render };
