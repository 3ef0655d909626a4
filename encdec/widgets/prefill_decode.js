// PrefillDecodeStepper: step 0 nothing has run; step 1 the prefill; step s > 1 feeds one new token.

function render({ model, el }) {
  const root = widgetRoot(el, "PrefillDecodeStepper");
  const go = (delta) => () => {
    const next = Math.max(0, Math.min(model.get("steps").length, model.get("step") + delta));
    push(model, { step: next });
  };
  const back = h("button", { class: "encdec-btn", "data-testid": "back", onclick: go(-1) }, "◀ Back");
  const next = h("button", { class: "encdec-btn primary", "data-testid": "next", onclick: go(1) }, "Next ▶");
  const reset = h("button", { class: "encdec-btn", "data-testid": "reset", onclick: () => push(model, { step: 0 }) }, "Reset");
  const label = h("span", { class: "encdec-label", "data-testid": "step-label" });
  const body = h("div", {});
  root.append(h("div", { class: "encdec-toolbar" }, back, next, reset, label), body);

  function draw() {
    const question = model.get("question"), steps = model.get("steps"), probs = model.get("probs");
    const s = model.get("step"), L = model.get("num_layers"), M = model.get("emb_dim");
    const Kq = question.length;
    back.disabled = s === 0; next.disabled = s === steps.length;
    label.textContent = s === 0 ? `step 0 of ${steps.length}: nothing computed yet`
      : s === 1 ? `step 1 of ${steps.length}: prefill` : `step ${s} of ${steps.length}: decode`;
    const answer = ["BOS", ...steps];  // answer[k] is fed at step k + 1
    const fed = s === 0 ? null : answer[s - 1];
    const produced = s === 0 ? null : steps[s - 1];
    const chip = (tok, cls, extra = {}) => h("span", { class: "encdec-chip " + (cls || ""), ...extra }, tok);

    const memory = h("div", { class: "encdec-panel" + (s >= 1 ? " ready" : ""), "data-testid": "memory" },
      h("div", { class: "encdec-label" }, `Encoder memory [Kq, M] = [${Kq}, ${M}]`),
      h("div", { class: "encdec-row" }, question.map((tok) => chip(tok, s >= 1 ? "mem" : "ghost"))),
      h("div", { class: "encdec-note", "data-testid": "memory-status" }, s === 0 ? "not computed yet"
        : s === 1 ? "computed now, once (the encoder runs on the whole question in parallel)"
        : `computed at the prefill (step 1), unchanged at step ${s}: the decoder only reads it`));

    const caches = Array.from({ length: L }, (_, l) => {
      const selfRows = s === 0 ? 0 : model.get("self_cache_lens")[s - 1][l];
      const crossRows = s === 0 ? 0 : model.get("cross_cache_lens")[s - 1][l];
      return h("tr", { "data-layer": l },
        h("th", { class: "encdec-rowhead" }, `layer ${l + 1}`),
        h("td", { class: "encdec-left", "data-testid": `self-cache-${l}`, "data-rows": selfRows },
          answer.slice(0, selfRows).map((tok, k) => chip(tok, k === selfRows - 1 && s > 0 ? "new" : "kv")),
          h("span", { class: "encdec-note" }, ` ${selfRows} row${selfRows === 1 ? "" : "s"}`)),
        h("td", { "data-testid": `cross-cache-${l}`, "data-rows": crossRows },
          h("span", { class: "encdec-note" }, crossRows ? `${crossRows} rows, fixed since step 1` : "empty")));
    });

    body.replaceChildren(
      memory,
      h("div", { class: "encdec-panel" },
        h("div", { class: "encdec-label" }, "Decoder"),
        h("div", { class: "encdec-row" }, "answer so far: ",
          (s === 0 ? [] : answer.slice(0, s)).map((tok, k) => chip(tok, k === s - 1 ? "new" : "kv")),
          produced ? [" → ", chip(produced, "out", { "data-testid": "produced" })] : null),
        h("div", { class: "encdec-note", "data-testid": "fed" }, s === 0 ? "Press Next to run the prefill."
          : s === 1 ? `Prefill: feed the prompt (${fed}), fill every layer's cache, predict "${produced}"` +
            (probs.length ? ` (p = ${fmt(probs[0])})` : "") + "."
          : `Decode step: feed only the newest token "${fed}" (1 position, no mask needed); predict "${produced}"` +
            (probs.length ? ` (p = ${fmt(probs[s - 1])})` : "") + ".")),
      h("table", { class: "encdec-grid encdec-cache" },
        h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "self-attention K, V cache (one more row per step)"),
          h("th", {}, "cross-attention K, V cache"))),
        h("tbody", {}, caches)),
      h("p", { class: "encdec-caption" }, `Source: ${model.get("source")}. Each layer keeps its own cache of keys and values; `,
        "a step computes Q, K, V for the new position only and attends over every cached row."));
  }

  draw();
  return watch(model, ["step", "steps", "question", "probs", "self_cache_lens", "cross_cache_lens"], draw);
}

export default { render };
