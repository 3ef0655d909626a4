// AskTheModel: the trained checkpoints answer any question of the task in the page (model_forward.js,
// on the weights the widget carries), greedily, step by step; two experiments: a forced first token
// (free running against teacher forcing) and the KV cache switched off (the same tokens, more work).

import { BOS_ID, OPERAND_MAX, QUESTION_LEN, TOKENS } from "./constants.js";
import { fmt, gridCell, gridKeys, gridReadout, h, heat, keepFocus, liveRegion, push, softmax, sourceText, t, tn, watch, widgetRoot } from "./common.js";
import { greedyGenerate, loadModel, teacherForced } from "./model_forward.js";
import { parseQuestion, siteWeights, trueAnswer } from "./task.js";

// Everything the figure shows for one question under one setting, for one checkpoint: the greedy run
// with its steps, the same run without the cache, and the teacher-forced predictions.
export function askRun(net, ids, forced, useCache) {
  const prefix = forced === null ? [BOS_ID] : [BOS_ID, forced];
  const run = greedyGenerate(net, ids, { prefix, useCache });
  const other = greedyGenerate(net, ids, { prefix, useCache: !useCache });
  const truth = trueAnswer(ids);
  const teacher = teacherForced(net, ids, truth).map((row) => row.indexOf(Math.max(...row)));
  return { ...run, question: ids, prefix, truth, teacher, other, sameTokens: other.tokens.join() === run.tokens.join() };
}

// First answer position where the tokens leave the right answer, and the step that produced it.
export function verdict(tokens, truth, P) {
  const k = truth.findIndex((id, i) => tokens[i] !== id);
  if (k < 0) return { right: true };
  return { right: false, position: k, step: k < P ? 0 : k - P + 1 };
}

// The words of a forward-pass error (model_forward.js codes) in the page's language.
export function forwardMessage(model, err) {
  const known = { bad_weights: "ask_model.error_bad_weights", missing_tensor: "ask_model.error_missing_tensor",
    bad_positions: "ask_model.error_bad_positions", bad_question_ids: "ask_model.error_bad_question_ids",
    bad_prefix: "ask_model.error_bad_prefix" };
  const code = err && err.code;
  if (!known[code]) throw err;
  return t(model, known[code], err.values);
}

let askCount = 0;  // a page may hold several figures: their controls need their own ids

const chip = (id, cls = "", extra = {}) => h("span", { class: "encdec-chip " + cls, ...extra }, TOKENS[id]);

// A question of the task drawn at random that `accept(ids)` takes (the figure's own after 1000 tries).
function randomQuestion(model, accept) {
  for (let tries = 0; tries < 1000; tries++) {
    const a = Math.floor(Math.random() * 99) - OPERAND_MAX, b = Math.floor(Math.random() * 99) - OPERAND_MAX;
    const text = `${a} ${Math.random() < 0.5 ? "+" : "-"} ${b}`;
    if (accept(parseQuestion(text).ids)) return text;
  }
  return model.get("question");
}

// window.encdec.generate(preset, questionIds): a promise of the answer ids from BOS through EOS
// (documented in the README); the first call loads the site's weights.
function installApi(model, weightsLoaded, weights, net) {
  if (typeof window === "undefined") return;
  const api = window.encdec || (window.encdec = {});
  api.presets = model.get("presets");
  api.generate = async (preset, questionIds) => {
    await weightsLoaded();
    if (!weights()[preset]) {
      throw new Error(t(model, "ask_model.error_preset", { preset: `${preset}`, known: Object.keys(weights()).join(", ") }));
    }
    try {
      return greedyGenerate(net(preset), Array.isArray(questionIds) ? questionIds : Array.from(questionIds ?? []), { record: false }).tokens;
    } catch (err) {
      throw new Error(forwardMessage(model, err));
    }
  };
}

// The figure's controls and panels, made once (in `root`) so typing and focus survive a redraw. `on`:
// request(changes) a reader's request, weightsLoaded() the site's weights' promise, net(preset) a
// checkpoint, total() the steps of the run shown.
function askControls(model, root, uid, on) {
  const c = {};
  c.input = h("input", { type: "text", id: `${uid}-q`, class: "encdec-input", "data-testid": "question-input",
    autocomplete: "off", spellcheck: "false", enterkeyhint: "go" });
  c.questionLabel = h("label", { for: `${uid}-q`, class: "encdec-label" });
  c.ask = h("button", { type: "submit", class: "encdec-btn primary", "data-testid": "ask" });
  const form = h("form", { class: "encdec-ask-form", onsubmit: (e) => {
    e.preventDefault();
    on.request({ question: c.input.value, step: 0 });
  } }, c.questionLabel, c.input, c.ask);
  c.pick = h("select", { id: `${uid}-pick`, class: "encdec-select", "data-testid": "pick", onchange: () => {
    if (c.pick.value) on.request({ question: c.pick.value, step: 0 });
  } });
  c.pickLabel = h("label", { for: `${uid}-pick`, class: "encdec-note" });
  c.random = h("button", { type: "button", class: "encdec-btn", "data-testid": "random",
    onclick: () => on.request({ question: randomQuestion(model, () => true), step: 0 }) });
  c.randomWrong = h("button", { type: "button", class: "encdec-btn", "data-testid": "random-wrong", onclick: () => on.weightsLoaded().then(() => {
    const wrong = (ids) => !verdict(greedyGenerate(on.net("historical"), ids, { record: false }).tokens, trueAnswer(ids), 1).right;
    push(model, { question: randomQuestion(model, wrong), preset: "historical", step: 0 });
  }, () => {}) });
  c.forcedSelect = h("select", { id: `${uid}-forced`, class: "encdec-select", "data-testid": "forced", onchange: () =>
    on.request({ forced: c.forcedSelect.value, step: 0 }) });
  c.forcedLabel = h("label", { for: `${uid}-forced`, class: "encdec-label" });
  c.cacheBox = h("input", { type: "checkbox", id: `${uid}-cache`, "data-testid": "use-cache", onchange: () =>
    on.request({ use_cache: c.cacheBox.checked }) });
  c.cacheLabel = h("label", { for: `${uid}-cache`, class: "encdec-label" });
  const go = (delta) => () => push(model, { step: Math.max(0, Math.min(on.total(), model.get("step") + delta)) });
  c.back = h("button", { type: "button", class: "encdec-btn", "data-testid": "back", onclick: go(-1) });
  c.next = h("button", { type: "button", class: "encdec-btn primary", "data-testid": "next", onclick: go(1) });
  c.reset = h("button", { type: "button", class: "encdec-btn", "data-testid": "reset", onclick: () => push(model, { step: 0 }) });
  c.end = h("button", { type: "button", class: "encdec-btn", "data-testid": "end", onclick: () => push(model, { step: on.total() }) });
  c.presetGroup = h("span", { class: "encdec-group", role: "group" });
  c.stepLabel = h("span", { class: "encdec-label", "data-testid": "step-label" });
  c.status = h("div", { class: "encdec-row", "data-testid": "status" });
  for (const part of ["answers", "stepView", "experiments"]) c[part] = h("div", {});
  c.caption = h("p", { class: "encdec-caption" });
  root.append(form, h("div", { class: "encdec-toolbar" }, c.pickLabel, c.pick, c.random, c.randomWrong), c.status, c.answers,
    h("div", { class: "encdec-toolbar" }, c.forcedLabel, c.forcedSelect, h("span", { class: "encdec-group" }, c.cacheBox, c.cacheLabel)),
    h("div", { class: "encdec-toolbar" }, c.presetGroup, c.back, c.next, c.reset, c.end, c.stepLabel), c.stepView, c.experiments, c.caption);
  return c;
}

// The controls' words and values from the traits.
function drawControls(model, c) {
  c.questionLabel.textContent = t(model, "ask_model.question_label");
  c.ask.textContent = t(model, "ask_model.ask");
  if (document.activeElement !== c.input) c.input.value = model.get("question");
  c.pickLabel.textContent = t(model, "ask_model.pick_label");
  c.pick.replaceChildren(h("option", { value: "" }, t(model, "ask_model.pick")),
    ...model.get("examples").map((q) => h("option", { value: q }, q)));
  c.pick.value = "";
  c.random.textContent = t(model, "ask_model.random");
  c.randomWrong.textContent = t(model, "ask_model.random_wrong");
  c.randomWrong.disabled = !model.get("presets").includes("historical");
  c.forcedLabel.textContent = t(model, "ask_model.forced_label");
  c.forcedSelect.replaceChildren(h("option", { value: "" }, t(model, "ask_model.forced_free")),
    ...TOKENS.filter((tok) => tok !== "BOS").map((tok) => h("option", { value: tok }, tok)));
  c.forcedSelect.value = model.get("forced");
  c.cacheBox.checked = model.get("use_cache");
  c.cacheLabel.textContent = t(model, "ask_model.cache_label");
  c.back.textContent = t(model, "ask_model.back");
  c.next.textContent = t(model, "ask_model.next");
  c.reset.textContent = t(model, "ask_model.reset");
  c.end.textContent = t(model, "ask_model.end");
  c.caption.replaceChildren(...[].concat(t(model, "ask_model.caption", { source: sourceText(model) })));
}

// Nothing to run: a question of no use (`error`, the live region says it) or the site's weights not
// there yet (`weights`: idle, loading, failed; said once asked for). The status says why.
function drawBlocked(model, c, live, { error, values, weights, said }) {
  const known = { no_text: "ask_model.error_empty", bad_format: "ask_model.error_format", out_of_range: "ask_model.error_range",
    failed: "ask_model.weights_failed", loading: "ask_model.weights_loading", idle: "ask_model.weights_idle" };
  c.status.className = "encdec-row encdec-status" + (error ? " bad" : "");
  if (weights) c.status.setAttribute("data-weights", weights);
  const why = error || weights;
  c.status.textContent = t(model, known[why], error ? values : { src: model.get("weights_src") });
  if (error || said) live.textContent = c.status.textContent;
  for (const part of [c.answers, c.stepView, c.experiments, c.presetGroup]) part.replaceChildren();
  c.stepLabel.textContent = "";
  c.back.disabled = c.next.disabled = c.reset.disabled = c.end.disabled = true;
}

// Both checkpoints' answers, side by side (P: the forced prefix's length); and what the live region says of them.
function answersTable(model, runs, net, P) {
  const said = [];
  const table = h("div", { class: "encdec-scroll" }, h("table", { class: "encdec-grid", "data-testid": "answers" },
    h("thead", {}, h("tr", {}, h("th", { class: "encdec-wrap" }, t(model, "ask_model.th_model")),
      h("th", { class: "encdec-wrap" }, t(model, "ask_model.th_answer")), h("th", { class: "encdec-wrap" }, t(model, "ask_model.th_verdict")))),
    h("tbody", {}, model.get("presets").map((preset) => {
      const run = runs[preset], v = verdict(run.tokens, run.truth, P), c = net(preset).config;
      const simple = c.position_encoding === "simple";
      const cell = v.right ? h("span", { class: "encdec-sum ok" }, t(model, "ask_model.right"))
        : v.step === 0 ? h("span", { class: "encdec-sum warn" }, t(model, "ask_model.wrong_prefix"))
          : h("button", { type: "button", class: "encdec-btn encdec-wrap", "data-testid": `goto-${preset}`,
            onclick: () => push(model, { preset, step: v.step }) },
          t(model, "ask_model.wrong_step", { s: v.step, got: TOKENS[run.tokens[v.position]] ?? "—", want: TOKENS[run.truth[v.position]] }));
      said.push(t(model, "ask_model.live_answer", { preset, answer: run.tokens.map((id) => TOKENS[id]).join(" "), verdict: cell.textContent }));
      return h("tr", { "data-preset": preset },
        h("th", { class: "encdec-rowhead encdec-wrap" }, h("code", {}, preset), h("div", { class: "encdec-note" },
          t(model, "ask_model.preset_desc", { enc: c.num_enc_layers, dec: c.num_dec_layers, M: c.emb_dim,
            pe: t(model, simple ? "ask_model.pe_simple" : "ask_model.pe_sinusoid") }))),
        h("td", { class: "encdec-left", "data-testid": `answer-${preset}`, "data-ids": run.tokens.join(" ") },
          run.tokens.map((id, i) => chip(id, i < P ? "kv" : id === run.truth[i] ? "out" : "leak"))),
        h("td", { "data-testid": `verdict-${preset}` }, cell));
    }))));
  return { table, said };
}

function stepPanel(model, grid, m, run, s, useCache) {
  const step = run.steps[s - 1], Kq = QUESTION_LEN, L = m.decoder.length;
  const last = step.fed.length - 1, newest = TOKENS[step.fed[last]];
  const fed = s === 1
    ? t(model, "ask_model.fed_prefill", { Kq, tokens: step.fed.map((id) => TOKENS[id]).join(" "), positions: step.positions.join(", ") })
    : t(model, useCache ? "ask_model.fed_decode" : "ask_model.fed_nocache",
      { token: newest, position: step.positions[last], positions: `${step.positions[0]}–${step.positions[last]}` });

  // the five most probable next tokens, with bars
  const probs = softmax(step.logits);
  const order = probs.map((p, v) => v).sort((a, b) => probs[b] - probs[a]).slice(0, 5);
  const topRows = order.map((v, k) => h("tr", { "data-token": TOKENS[v] },
    h("th", { class: "encdec-rowhead" }, chip(v, v === step.next ? "out" : "")),
    h("td", { class: "encdec-num", "data-testid": `top-${k}` }, fmt(probs[v]),
      h("div", { class: "encdec-bar-wrap" }, h("div", { class: "encdec-bar good", style: `width: ${(100 * probs[v]).toFixed(1)}%` })))));
  const top = h("div", {}, h("div", { class: "encdec-label" }, t(model, "ask_model.top_title")),
    h("table", { class: "encdec-grid", "data-testid": "top" }, h("tbody", {}, topRows)));

  // every layer's self-attention cache after this step: the rows computed now in yellow
  const answerSoFar = run.tokens.slice(0, run.prefix.length + s);
  const cacheRows = Array.from({ length: L }, (_, l) => h("tr", {},
    h("th", { class: "encdec-rowhead" }, t(model, "ask_model.layer", { n: l + 1 })),
    h("td", { class: "encdec-left", "data-testid": `self-rows-${l}`, "data-rows": step.selfRows[l] },
      answerSoFar.slice(0, step.selfRows[l]).map((id, k) => chip(id, k >= step.selfRows[l] - step.computed ? "new" : "kv")))));
  const caches = h("div", {}, h("div", { class: "encdec-label" }, t(model, "ask_model.self_title")),
    h("table", { class: "encdec-grid", "data-testid": "self-cache" }, h("tbody", {}, cacheRows)),
    h("div", { class: "encdec-note", "data-testid": "cross-kv" },
      t(model, useCache ? "ask_model.cross_kv_fixed" : "ask_model.cross_kv_again", { Kq, L })));

  // this step's cross-attention: one row per layer and head, one column per question token
  const H = step.cross[0].length, rows = step.cross.length * H;
  const describe = (r, j) => t(model, "ask_model.cross_cell",
    { l: Math.floor(r / H) + 1, h: (r % H) + 1, source: TOKENS[run.question[j]], j, w: fmt(step.cross[Math.floor(r / H)][r % H][j], 2) });
  const { info, show } = gridReadout(grid.at, grid.shown, rows, Kq, describe, t(model, "ask_model.readout_hint"));
  const head = h("tr", {}, h("th", { class: "encdec-corner encdec-wrap" }, t(model, "ask_model.cross_corner")),
    run.question.map((id, j) => h("th", {}, h("span", { class: "encdec-idx" }, j), " ", TOKENS[id])));
  const crossRows = step.cross.flatMap((heads, l) => heads.map((row, hd) => h("tr", { "data-layer": l, "data-head": hd },
    h("th", { class: "encdec-rowhead" }, t(model, "ask_model.layer_head", { l: l + 1, h: hd + 1 })),
    row.map((w, j) => h("td", { ...heat(w), ...gridCell(grid.at, H * l + hd, j, show), "aria-label": describe(H * l + hd, j),
      onclick: () => show(H * l + hd, j) }, fmt(w, 2))))));
  const cross = h("div", { class: "encdec-scroll" }, h("table", { class: "encdec-grid encdec-heat encdec-standing", "data-testid": "cross",
    role: "grid", "aria-label": t(model, "ask_model.cross_title", { Kq, token: newest }), onkeydown: gridKeys(grid.at, rows, Kq, null) },
    h("thead", {}, head), h("tbody", {}, crossRows)));

  return h("div", { class: "encdec-panel ready", "data-testid": "step-panel", "data-step": s },
    h("div", { class: "encdec-row", "data-testid": "fed" }, fed),
    h("div", { class: "encdec-note", "data-testid": "computed" },
      tn(model, "ask_model.computed", step.computed, { total: step.computedTotal })),
    h("div", { class: "encdec-columns" }, top, caches),
    h("div", { class: "encdec-label" }, t(model, "ask_model.cross_title", { Kq, token: newest })),
    cross, info);
}

function experimentPanel(model, m, run, forced, useCache) {
  const P = run.prefix.length;
  const row = (key, tokens, marks, testid) => h("tr", { "data-testid": testid },
    h("th", { class: "encdec-rowhead encdec-wrap" }, key),
    h("td", { class: "encdec-left" }, tokens.map((id, i) => chip(id, marks[i]))));
  const ownRun = forced === null ? run : { tokens: greedyGenerate(m, run.question, { record: false }).tokens };
  const mark = (tokens, fixed) => tokens.map((id, i) => (i < fixed ? "kv" : id === run.truth[i] ? "out" : "leak"));
  const teacherTokens = [BOS_ID, ...run.teacher];
  const stepsOn = useCache ? run.steps : run.other.steps, stepsOff = useCache ? run.other.steps : run.steps;
  const perStep = (stepsRun) => stepsRun.length ? stepsRun.map((x) => x.computed).join(" + ") : "0";
  const on = useCache ? run : run.other, off = useCache ? run.other : run;
  const rows = [
    row(t(model, "ask_model.row_free"), ownRun.tokens, mark(ownRun.tokens, 1), "row-free"),
    forced === null ? null : row(t(model, "ask_model.row_forced", { token: TOKENS[forced] }), run.tokens, mark(run.tokens, P), "row-forced"),
    row(t(model, "ask_model.row_teacher"), teacherTokens, mark(teacherTokens, 1), "row-teacher"),
  ];
  return h("div", { class: "encdec-panel" },
    h("div", { class: "encdec-label" }, t(model, "ask_model.exp_title", { preset: m.preset })),
    h("div", { class: "encdec-scroll" }, h("table", { class: "encdec-grid", "data-testid": "experiment" }, h("tbody", {}, rows))),
    h("p", { class: "encdec-note" }, t(model, forced === null ? "ask_model.exp_force_hint" : "ask_model.exp_forced_note")),
    h("div", { class: "encdec-row", "data-testid": "cache-compare", "data-on": on.positionsComputed, "data-off": off.positionsComputed,
      "data-same": run.sameTokens ? "yes" : "no" },
      t(model, "ask_model.cache_compare", { on: perStep(stepsOn), on_total: on.positionsComputed, off: perStep(stepsOff),
        off_total: off.positionsComputed, same: t(model, run.sameTokens ? "ask_model.same_yes" : "ask_model.same_no") })));
}

export function render({ model, el }) {
  const root = widgetRoot(el, "AskTheModel");
  const uid = `encdec-ask-${++askCount}`;
  const nets = {};
  const fromSite = () => model.get("weights_src") !== "";
  const weights = () => (fromSite() ? window.encdecWeights || {} : model.get("weights"));
  const ready = () => !fromSite() || Boolean(window.encdecWeights);
  const net = (preset) => nets[preset] || (nets[preset] = loadModel(weights()[preset]));
  let wanted = false, loadFailed = false;  // has the reader asked yet; did the site's weights fail to load
  const redraw = keepFocus(root, () => draw());
  // The site's weights, fetched on the reader's first request (the figure says it is loading).
  function weightsLoaded() {
    wanted = true;
    if (ready()) return Promise.resolve();
    const loading = siteWeights(model.get("weights_src"));
    loading.then(redraw, () => { loadFailed = true; redraw(); });
    redraw();
    return loading;
  }
  // A reader's request: the settings change, and the weights load if they have not.
  function request(changes) {
    push(model, changes);
    if (!ready() || !wanted) weightsLoaded();
  }
  installApi(model, weightsLoaded, weights, net);
  let total = 0;  // the steps of the run shown
  const c = askControls(model, root, uid, { request, weightsLoaded, net, total: () => total });
  const live = liveRegion(root);
  let heard = null;  // the question and setting whose answers the live region said last
  const grid = { at: [0, 0], shown: [] };  // the cross-attention map's tab stop, and its cell the readout describes
  let memo = { key: null, runs: null };
  function compute(ids, forced, useCache) {
    const key = `${ids.join()}|${forced}|${useCache}`;
    if (memo.key !== key) memo = { key, runs: Object.fromEntries(model.get("presets").map((p) => [p, askRun(net(p), ids, forced, useCache)])) };
    return memo.runs;
  }

  function draw() {
    const presets = model.get("presets"), question = model.get("question");
    const forcedName = model.get("forced"), useCache = model.get("use_cache");
    const forced = forcedName ? TOKENS.indexOf(forcedName) : null;
    drawControls(model, c);
    const parsed = parseQuestion(question);
    if (parsed.error || !ready()) {  // a question of no use; the site's weights not asked for yet, or loading
      total = 0;
      if (parsed.error) heard = null;
      drawBlocked(model, c, live, parsed.error ? parsed : { weights: loadFailed ? "failed" : wanted ? "loading" : "idle", said: wanted });
      return;
    }
    let runs;
    try {
      runs = compute(parsed.ids, forced, useCache);
    } catch (err) {
      c.status.className = "encdec-row encdec-status bad";
      c.status.textContent = live.textContent = forwardMessage(model, err);
      heard = null;
      return;
    }
    c.status.className = "encdec-row";
    c.status.setAttribute("data-weights", "ready");
    c.status.replaceChildren(h("span", { class: "encdec-label" }, t(model, "ask_model.reads")), " ",
      h("span", { "data-testid": "question-tokens" }, parsed.ids.map((id) => chip(id, "mem"))));
    const { table, said } = answersTable(model, runs, net, forced === null ? 1 : 2);
    c.answers.replaceChildren(table);
    // The chosen checkpoint, step by step.
    const preset = presets.includes(model.get("preset")) ? model.get("preset") : presets[0];
    c.presetGroup.replaceChildren(h("span", { class: "encdec-label" }, t(model, "ask_model.step_model")),
      ...presets.map((p) => h("button", { type: "button", class: "encdec-btn" + (p === preset ? " active" : ""),
        "aria-pressed": p === preset ? "true" : "false", "data-preset": p, onclick: () => push(model, { preset: p }) }, p)));
    const run = runs[preset], m = net(preset);
    total = run.steps.length;
    const s = Math.min(model.get("step"), total);
    c.back.disabled = s === 0; c.next.disabled = s === total; c.reset.disabled = s === 0; c.end.disabled = s === total;
    c.stepLabel.textContent = total === 0 ? t(model, "ask_model.nothing_to_decode")
      : s === 0 ? t(model, "ask_model.step_0", { total })
        : t(model, s === 1 ? "ask_model.step_prefill" : "ask_model.step_decode", { s, total });
    const heardKey = `${question}|${forcedName}|${useCache}`, step = run.steps[s - 1];
    live.textContent = heard !== heardKey ? said.join(" ") : s === 0 ? c.stepLabel.textContent
      : t(model, "ask_model.live_step", { step: c.stepLabel.textContent, token: TOKENS[step.next], p: fmt(softmax(step.logits)[step.next]) });
    heard = heardKey;
    c.stepView.replaceChildren(s === 0 ? h("p", { class: "encdec-note" }, t(model, total ? "ask_model.press_next" : "ask_model.forced_eos"))
      : stepPanel(model, grid, m, run, s, useCache));
    c.experiments.replaceChildren(experimentPanel(model, m, run, forced, useCache));
  }

  draw();
  return watch(model, ["question", "preset", "presets", "step", "forced", "use_cache", "weights", "weights_src", "examples"], keepFocus(root, draw));
}

export default { render };
