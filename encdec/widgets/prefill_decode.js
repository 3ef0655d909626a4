// PrefillDecodeStepper: step 0 nothing has run; step 1 the prefill (the question went to the encoder,
// the decoder takes the P tokens of the known answer prefix at once); step s > 1 feeds one new token.

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
    const prefix = model.get("prefix"), P = prefix.length;
    const Kq = question.length;
    const positions = (n) => `${n} position${n === 1 ? "" : "s"}`;
    back.disabled = s === 0; next.disabled = s === steps.length;
    label.textContent = s === 0 ? `step 0 of ${steps.length}: nothing computed yet`
      : s === 1 ? `step 1 of ${steps.length}: prefill (${positions(P)})` : `step ${s} of ${steps.length}: decode (1 position)`;
    const answer = [...prefix, ...steps];  // the prefix is fed at step 1, answer[P + s - 2] at step s > 1
    const known = s === 0 ? 0 : P + s - 1;  // answer tokens inside the decoder at step s
    const fed = s <= 1 ? null : answer[known - 1];
    const produced = s === 0 ? null : steps[s - 1];
    const chip = (tok, cls, extra = {}) => h("span", { class: "encdec-chip " + (cls || ""), ...extra }, tok);

    const memory = h("div", { class: "encdec-panel" + (s >= 1 ? " ready" : ""), "data-testid": "memory" },
      h("div", { class: "encdec-label" }, `Encoder memory [Kq, M] = [${Kq}, ${M}]`),
      h("div", { class: "encdec-row" }, question.map((tok) => chip(tok, s >= 1 ? "mem" : "ghost"))),
      h("div", { class: "encdec-note", "data-testid": "memory-status" }, s === 0 ? "not computed yet"
        : s === 1 ? "computed now, once: the question goes to the encoder, which reads all of it in parallel"
        : `computed at the prefill (step 1), unchanged at step ${s}: the decoder only reads it`));

    const caches = Array.from({ length: L }, (_, l) => {
      const selfRows = s === 0 ? 0 : model.get("self_cache_lens")[s - 1][l];
      const crossRows = s === 0 ? 0 : model.get("cross_cache_lens")[s - 1][l];
      return h("tr", { "data-layer": l },
        h("th", { class: "encdec-rowhead" }, `layer ${l + 1}`),
        h("td", { class: "encdec-left", "data-testid": `self-cache-${l}`, "data-rows": selfRows },
          answer.slice(0, selfRows).map((tok, k) => chip(tok, s > 0 && (s === 1 || k === selfRows - 1) ? "new" : "kv")),
          h("span", { class: "encdec-note" }, ` ${selfRows} row${selfRows === 1 ? "" : "s"}`)),
        h("td", { "data-testid": `cross-cache-${l}`, "data-rows": crossRows },
          h("span", { class: "encdec-note" }, crossRows ? `${crossRows} rows, fixed since step 1` : "empty")));
    });

    body.replaceChildren(
      memory,
      h("div", { class: "encdec-panel" },
        h("div", { class: "encdec-label" }, "Decoder"),
        h("div", { class: "encdec-row" }, "answer so far: ",
          answer.slice(0, known).map((tok, k) => chip(tok, s === 1 || k === known - 1 ? "new" : "kv")),
          produced ? [" → ", chip(produced, "out", { "data-testid": "produced" })] : null),
        h("div", { class: "encdec-note", "data-testid": "fed" }, s === 0 ? "Press Next to run the prefill."
          : s === 1 ? `Prefill: the decoder takes the answer prefix known before generation, ${prefix.join(" ")} ` +
            `(${positions(P)}${P > 1 ? ", in one pass under the causal mask" : ""}), and leaves ${P} row${P === 1 ? "" : "s"} ` +
            `in every layer's self-attention cache; predict "${produced}"` +
            (probs.length ? ` (p = ${fmt(probs[0])})` : "") + "." +
            (P === 1 ? " One position: the decoder does as much here as in a decode step (only the encoder and the cross-attention K, V projection are extra)." : "")
          : `Decode step: feed only the newest token "${fed}" (1 position; its query reads the ${known - 1} cached ` +
            `rows and itself, so no mask is needed); predict "${produced}"` +
            (probs.length ? ` (p = ${fmt(probs[s - 1])})` : "") + ".")),
      h("table", { class: "encdec-grid encdec-cache" },
        h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, `self-attention K, V cache (${P} row${P === 1 ? "" : "s"} after the prefill, one more per decode step)`),
          h("th", {}, "cross-attention K, V cache"))),
        h("tbody", {}, caches)),
      h("p", { class: "encdec-caption" }, `Source: ${model.get("source")}. The question is not in the decoder's prefill: `,
        "it went to the encoder, and cross-attention reads its memory through keys and values projected once. ",
        "Each layer keeps its own cache; a step computes Q, K, V for its new positions only and attends over every cached row."));
  }

  draw();
  return watch(model, ["step", "steps", "prefix", "question", "probs", "self_cache_lens", "cross_cache_lens"], draw);
}

export default { render };
