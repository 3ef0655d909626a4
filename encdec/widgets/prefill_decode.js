// PrefillDecodeStepper: step 0 nothing has run; step 1 the prefill (the question went to the encoder,
// the decoder takes the P tokens of the known answer prefix at once); step s > 1 feeds one new token.

function render({ model, el }) {
  const root = widgetRoot(el, "PrefillDecodeStepper");
  const go = (delta) => () => {
    const next = Math.max(0, Math.min(model.get("steps").length, model.get("step") + delta));
    push(model, { step: next });
  };
  const back = h("button", { class: "encdec-btn", "data-testid": "back", onclick: go(-1) });
  const next = h("button", { class: "encdec-btn primary", "data-testid": "next", onclick: go(1) });
  const reset = h("button", { class: "encdec-btn", "data-testid": "reset", onclick: () => push(model, { step: 0 }) });
  const label = h("span", { class: "encdec-label", "data-testid": "step-label" });
  const body = h("div", {});
  root.append(h("div", { class: "encdec-toolbar" }, back, next, reset, label), body);
  const live = liveRegion(root);

  function draw() {
    const question = model.get("question"), steps = model.get("steps"), probs = model.get("probs");
    const s = model.get("step"), L = model.get("num_layers"), M = model.get("emb_dim");
    const prefix = model.get("prefix"), P = prefix.length;
    const Kq = question.length;
    const rows = (n) => tn(model, "prefill_decode.rows", n);
    back.textContent = t(model, "prefill_decode.back");
    next.textContent = t(model, "prefill_decode.next");
    reset.textContent = t(model, "prefill_decode.reset");
    back.disabled = s === 0; next.disabled = s === steps.length;
    label.textContent = s === 0 ? t(model, "prefill_decode.step_0", { total: steps.length })
      : s === 1 ? t(model, "prefill_decode.step_prefill",
        { total: steps.length, positions: tn(model, "prefill_decode.positions", P) })
      : t(model, "prefill_decode.step_decode", { s, total: steps.length });
    const answer = [...prefix, ...steps];  // the prefix is fed at step 1, answer[P + s - 2] at step s > 1
    const known = s === 0 ? 0 : P + s - 1;  // answer tokens inside the decoder at step s
    const fed = s <= 1 ? null : answer[known - 1];
    const produced = s === 0 ? null : steps[s - 1];
    live.textContent = produced ? t(model, "prefill_decode.live", { step: label.textContent, token: produced }) : label.textContent;
    const chip = (tok, cls, extra = {}) => h("span", { class: "encdec-chip " + (cls || ""), ...extra }, tok);

    const memory = h("div", { class: "encdec-panel" + (s >= 1 ? " ready" : ""), "data-testid": "memory" },
      h("div", { class: "encdec-label" }, t(model, "prefill_decode.memory_title", { Kq, M })),
      h("div", { class: "encdec-row" }, question.map((tok) => chip(tok, s >= 1 ? "mem" : "ghost"))),
      h("div", { class: "encdec-note", "data-testid": "memory-status" }, s === 0 ? t(model, "prefill_decode.memory_0")
        : s === 1 ? t(model, "prefill_decode.memory_prefill") : t(model, "prefill_decode.memory_decode", { s })));

    const caches = Array.from({ length: L }, (_, l) => {
      const selfRows = s === 0 ? 0 : model.get("self_cache_lens")[s - 1][l];
      const crossRows = s === 0 ? 0 : model.get("cross_cache_lens")[s - 1][l];
      return h("tr", { "data-layer": l },
        h("th", { class: "encdec-rowhead" }, t(model, "prefill_decode.layer", { n: l + 1 })),
        h("td", { class: "encdec-left", "data-testid": `self-cache-${l}`, "data-rows": selfRows },
          answer.slice(0, selfRows).map((tok, k) => chip(tok, s > 0 && (s === 1 || k === selfRows - 1) ? "new" : "kv")),
          h("span", { class: "encdec-note" }, " ", rows(selfRows))),
        h("td", { "data-testid": `cross-cache-${l}`, "data-rows": crossRows },
          h("span", { class: "encdec-note" },
            crossRows ? t(model, "prefill_decode.cross_rows", { n: crossRows }) : t(model, "prefill_decode.empty"))));
    });

    body.replaceChildren(
      memory,
      h("div", { class: "encdec-panel" },
        h("div", { class: "encdec-label" }, t(model, "prefill_decode.decoder")),
        h("div", { class: "encdec-row" }, t(model, "prefill_decode.answer_so_far"), " ",
          answer.slice(0, known).map((tok, k) => chip(tok, s === 1 || k === known - 1 ? "new" : "kv")),
          produced ? [" → ", chip(produced, "out", { "data-testid": "produced" })] : null),
        h("div", { class: "encdec-note", "data-testid": "fed" }, s === 0 ? t(model, "prefill_decode.fed_0")
          : s === 1 ? t(model, "prefill_decode.fed_prefill", { prefix: prefix.join(" "),
            positions: tn(model, "prefill_decode.positions", P), one_pass: P > 1 ? t(model, "prefill_decode.one_pass") : "",
            rows: rows(P), token: produced, prob: probs.length ? t(model, "prefill_decode.prob", { p: fmt(probs[0]) }) : "" }) +
            (P === 1 ? t(model, "prefill_decode.one_position_note") : "")
          : t(model, "prefill_decode.fed_decode", { fed, cached: known - 1, token: produced,
            prob: probs.length ? t(model, "prefill_decode.prob", { p: fmt(probs[s - 1]) }) : "" }))),
      h("table", { class: "encdec-grid encdec-cache" },
        h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, t(model, "prefill_decode.th_self_cache", { rows: rows(P) })),
          h("th", {}, t(model, "prefill_decode.th_cross_cache")))),
        h("tbody", {}, caches)),
      workChart(s),
      h("p", { class: "encdec-caption" }, t(model, "prefill_decode.caption", { source: sourceText(model) })));
  }

  // the multiply-adds of every step, the current one marked: the prefill pays for the encoder and
  // the cross-attention keys and values once; a decode step costs one position's work
  function workChart(s) {
    const work = model.get("work");
    if (!work.length) return null;
    const most = Math.max(...work.map(([enc, dec]) => enc + dec));
    const mega = (n) => (n / 1e6).toFixed(2);
    return h("div", { class: "encdec-panel", "data-testid": "work" },
      h("div", { class: "encdec-label" }, t(model, "prefill_decode.work_title")),
      work.map(([enc, dec], k) => h("div", { class: "encdec-work-row" + (k === s - 1 ? " current" : ""), "data-step": k + 1 },
        h("span", { class: "encdec-work-label" }, t(model, k === 0 ? "prefill_decode.work_prefill" : "prefill_decode.work_step", { s: k + 1 })),
        h("span", { class: "encdec-work-bar" },
          h("span", { class: "encdec-work-enc", style: `width:${(100 * enc) / most}%` }),
          h("span", { class: "encdec-work-dec", style: `width:${(100 * dec) / most}%` })),
        h("span", { class: "encdec-note" }, enc ? t(model, "prefill_decode.work_both", { total: mega(enc + dec), enc: mega(enc) })
          : t(model, "prefill_decode.work_decoder", { total: mega(dec) })))));
  }

  draw();
  return watch(model, ["step", "steps", "prefix", "question", "probs", "self_cache_lens", "cross_cache_lens", "work"], keepFocus(root, draw));
}

export default { render };
