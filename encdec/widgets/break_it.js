// BreakIt: one mistake of the lessons switched into the trained model, in the page. The intact answer is
// model_forward.js's greedyGenerate; the broken one the same greedyGenerate with the one piece the
// mistake concerns swapped (MISTAKES below), as encdec/broken.py swaps one module's forward and lets
// greedy_decode decode (each mistake on its path: uncached where it concerns a pass of several positions).
// How many of the 19,602 questions each broken model still gets right comes counted from PyTorch (the
// `tables` trait); tests/test_model_broken_js.py holds these answers equal to PyTorch's on every one of them.

import { BOS_ID, EOS_ID, OPERAND_MAX, OP_IDS, TOKENS } from "./constants.js";
import { h, keepFocus, liveRegion, push, sourceText, t, watch, widgetRoot } from "./common.js";
import { INTACT, attend, forwardError, greedyGenerate, linearRows, loadModel, positions } from "./model_forward.js";
import { operandIds, siteWeights, trueAnswer } from "./task.js";

// The mistake: softmax over every score, then the future's weights set to 0 (not renormalised: the rows
// sum to less than 1). As attend(), for query i the keys j <= limit + i are allowed. Returns the output
// (Lq, M) and no weights (the figure shows none).
export function attendAfterSoftmax(att, model, q, k, v, Lq, Lk, limit) {
  const { M, H, Dh } = model;
  const scale = 1 / Math.sqrt(Dh);
  const heads = new Float64Array(Lq * M);
  const scores = new Float64Array(Lk);
  for (let hd = 0; hd < H; hd++) {
    const c0 = hd * Dh;
    for (let i = 0; i < Lq; i++) {
      const last = Math.min(Lk - 1, limit + i);
      let top = -Infinity;
      for (let j = 0; j < Lk; j++) {
        let s = 0;
        for (let d = 0; d < Dh; d++) s += q[i * M + c0 + d] * k[j * M + c0 + d];
        scores[j] = s * scale;
        if (scores[j] > top) top = scores[j];
      }
      let total = 0;
      for (let j = 0; j < Lk; j++) { scores[j] = Math.exp(scores[j] - top); total += scores[j]; }  // the future too
      for (let j = 0; j <= last; j++) {  // the future's weights zeroed after the softmax: too late
        const w = scores[j] / total;
        for (let d = 0; d < Dh; d++) heads[i * M + c0 + d] += w * v[j * M + c0 + d];
      }
    }
  }
  return { out: linearRows(att.out_proj, heads, Lq), weights: null };
}

// Embed answer tokens ids[from..to) all at position 0, the position of step 1 (a stale cache position).
export function embedStale(model, ids, from, to, K) {
  const M = model.M, pos = positions(model, K), x = new Float64Array((to - from) * M);
  for (let r = from; r < to; r++) for (let j = 0; j < M; j++) x[(r - from) * M + j] = model.emb_layer[ids[r] * M + j] + pos[j];
  return x;
}

// Cross-attention called as attention_cross(memory, state, state): Q from the memory, K and V from the
// answer state. Its output has Kq rows where the residual out_2 + out_3 needs t: the pass cannot go on.
function qFromEncoder(c, model, out_2, state, l, t) {
  attend(c, model, linearRows(c.q_proj, state.memory, state.Kq), linearRows(c.k_proj, out_2, t),
    linearRows(c.v_proj, out_2, t), state.Kq, t, Infinity);  // (Kq, M): one row per question position
  throw forwardError("rows_differ", { rows: state.Kq, t });
}

// Each mistake: the one piece of model_forward.js's INTACT it swaps (encdec.broken.MISTAKES' `piece`).
export const MISTAKES = {
  intact: {},  // nothing: greedyGenerate as shipped
  mask_after_softmax: { attentionSelf: attendAfterSoftmax },
  no_causal_mask: { attentionSelf: (a, model, q, k, v, t, T) => attend(a, model, q, k, v, t, T, Infinity) },
  stale_position: { embed: embedStale },
  q_from_encoder: { attentionCross: qFromEncoder },
  no_cross_attention: { attentionCross: (c, model, out_2, state, l, t) => ({ out: new Float64Array(t * model.M), weights: null }) },
};

// Greedy generation with one mistake, as encdec.broken: greedyGenerate with the mistake's piece swapped
// in, with the cache (useCache) or re-running the prefix at every step. Returns the tokens, BOS up to EOS.
export function brokenGenerate(model, questionIds, mistake, useCache) {
  if (!Object.hasOwn(MISTAKES, mistake)) throw forwardError("unknown_mistake", { mistake });
  const pieces = { ...INTACT, ...MISTAKES[mistake] };
  return greedyGenerate(model, questionIds, { useCache, record: false, pieces }).tokens;
}

// The question ids of a op b (zero is POSITIVE 00; task.js).
export function breakQuestionIds(a, op, b) {
  return [BOS_ID, ...operandIds(a), OP_IDS[op], ...operandIds(b), EOS_ID];
}

// The intact and broken answers of one question: { intact, broken } token lists, broken null with
// `error` (a code and values) where the broken model cannot run.
export function breakRun(net, ids, mistake, useCache) {
  const intact = greedyGenerate(net, ids, { record: false }).tokens;
  try {
    return { intact, broken: brokenGenerate(net, ids, mistake, useCache), error: null };
  } catch (err) {
    if (err.code !== "rows_differ") throw err;
    return { intact, broken: null, error: { code: err.code, values: err.values } };
  }
}

let breakCount = 0;  // a page may hold several figures: their controls need their own ids

// The words for a mistake (kind "m": its name, "d": what it does), an operator ("op") or a column ("th").
export function breakWords(model, kind, name) {
  const known = {
    m_mask_after_softmax: "break_it.m_mask_after_softmax", m_no_causal_mask: "break_it.m_no_causal_mask",
    m_stale_position: "break_it.m_stale_position", m_q_from_encoder: "break_it.m_q_from_encoder",
    m_no_cross_attention: "break_it.m_no_cross_attention",
    d_mask_after_softmax: "break_it.d_mask_after_softmax", d_no_causal_mask: "break_it.d_no_causal_mask",
    d_stale_position: "break_it.d_stale_position", d_q_from_encoder: "break_it.d_q_from_encoder",
    d_no_cross_attention: "break_it.d_no_cross_attention",
    op_add: "break_it.op_add", op_subtract: "break_it.op_subtract",
    path_cached: "break_it.path_cached", path_uncached: "break_it.path_uncached", path_one_pass: "break_it.path_one_pass",
    th_model: "break_it.th_model", th_answer: "break_it.th_answer", th_verdict: "break_it.th_verdict", th_count: "break_it.th_count",
  };
  const key = kind + "_" + name;
  return t(model, known[key]);
}

const chip = (id, cls = "") => h("span", { class: "encdec-chip " + cls }, TOKENS[id]);

// A mistake's count of the whole space, in the reader's language.
function share(model, row) {
  return t(model, "break_it.count", { right: row.right.toLocaleString("en-US"), total: row.total.toLocaleString("en-US"),
    pct: (100 * row.right / row.total).toFixed(1) });
}

// The figure's controls and panels, made once (in `root`) so focus survives a redraw: act(changes) sets
// traits, refuse(text) takes an operand that is none of the task's.
function breakControls(model, root, uid, act, refuse) {
  const c = {};
  c.legend = h("legend", { class: "encdec-label" });
  c.radios = h("div", { class: "encdec-break-mistakes" });
  const fieldset = h("fieldset", { class: "encdec-break-fieldset", "data-testid": "mistakes" }, c.legend, c.radios);
  const number = (key) => h("input", { type: "number", min: -OPERAND_MAX, max: OPERAND_MAX, step: 1, id: `${uid}-${key}`,
    class: "encdec-input encdec-break-number", "data-testid": `operand-${key}`, onchange: (e) => {
      const value = Number(e.target.value);
      if (Number.isInteger(value) && Math.abs(value) <= OPERAND_MAX) act({ [key]: value });
      else refuse(e.target.value);
    } });
  c.inputA = number("a");
  c.inputB = number("b");
  c.opSelect = h("select", { id: `${uid}-op`, class: "encdec-select", "data-testid": "op-select",
    onchange: () => act({ op: c.opSelect.value }) });
  c.labelA = h("label", { for: `${uid}-a`, class: "encdec-label" });
  c.lesson = h("button", { type: "button", class: "encdec-btn", "data-testid": "lesson",
    onclick: () => act({ a: -30, op: "subtract", b: -34 }) });
  c.random = h("button", { type: "button", class: "encdec-btn", "data-testid": "random", onclick: () => {
    const pick = () => Math.floor(Math.random() * (2 * OPERAND_MAX + 1)) - OPERAND_MAX;
    act({ a: pick(), op: Math.random() < 0.5 ? "add" : "subtract", b: pick() });
  } });
  c.presetGroup = h("span", { class: "encdec-group", role: "group" });
  c.status = h("div", { class: "encdec-row", "data-testid": "status" });
  c.answers = h("div", {});
  c.explain = h("div", { class: "encdec-panel", "data-testid": "explain" });
  c.caption = h("p", { class: "encdec-caption" });
  c.operandNote = h("p", { class: "encdec-note warn", "data-testid": "operand-note", role: "alert" });
  root.append(fieldset, h("div", { class: "encdec-toolbar" }, c.labelA, c.inputA, c.opSelect, c.inputB, c.lesson, c.random),
    c.operandNote, h("div", { class: "encdec-toolbar" }, c.presetGroup), c.status, c.answers, c.explain, c.caption);
  return c;
}

// The intact and the broken model's answers to the question (`truth` its right answer), each with its
// verdict and its count of the whole space (`row`, `intactRow` of the mistake table).
function answersTable(model, run, truth, mistake, row, intactRow) {
  const marked = (tokens) => tokens.map((id, i) => chip(id, i === 0 ? "kv" : id === truth[i] ? "out" : "leak"));
  const same = (tokens) => tokens !== null && tokens.join() === truth.join();
  const verdict = (tokens) => tokens === null ? h("span", { class: "encdec-sum warn" }, t(model, "break_it.no_answer"))
    : same(tokens) ? h("span", { class: "encdec-sum ok" }, t(model, "break_it.right")) : h("span", { class: "encdec-sum warn" }, t(model, "break_it.wrong"));
  const line = (label, tokens, countRow, testid) => h("tr", { "data-testid": testid },
    h("th", { class: "encdec-rowhead encdec-wrap" }, label),
    h("td", { class: "encdec-left", "data-testid": `${testid}-answer`, "data-ids": tokens === null ? "" : tokens.join(" ") },
      tokens === null ? t(model, "break_it.no_answer_cell", run.error.values) : marked(tokens)),
    h("td", { "data-testid": `${testid}-verdict` }, verdict(tokens)),
    h("td", { class: "encdec-num", "data-testid": `${testid}-count` }, share(model, countRow)));
  return h("div", { class: "encdec-scroll" }, h("table", { class: "encdec-grid", "data-testid": "answers" },
    h("thead", {}, h("tr", {}, ["model", "answer", "verdict", "count"].map((k) =>
      h("th", { class: "encdec-wrap" }, breakWords(model, "th", k))))),
    h("tbody", {}, line(t(model, "break_it.row_intact"), run.intact, intactRow, "intact"),
      line(breakWords(model, "m", mistake), run.broken, row, "broken"))));
}

// What the mistake is and does, the path it runs on, and PyTorch's error where it cannot run.
function explainParts(model, row, mistake) {
  return [
    h("p", {}, h("strong", {}, breakWords(model, "m", mistake)), " ", breakWords(model, "d", mistake)),
    h("p", { class: "encdec-note", "data-testid": "path" }, breakWords(model, "path", row.use_cache ? "cached" : mistake === "q_from_encoder" ? "one_pass" : "uncached")),
    ...(row.error ? [h("p", { class: "encdec-note", "data-testid": "torch-error" }, t(model, "break_it.torch_error", { error: row.error }))] : []),
  ];
}

export function render({ model, el }) {
  const root = widgetRoot(el, "BreakIt");
  const uid = `encdec-break-${++breakCount}`;
  const nets = {};
  const fromSite = () => model.get("weights_src") !== "";
  const weights = () => (fromSite() ? window.encdecWeights || {} : model.get("weights"));
  const net = (preset) => nets[preset] || (nets[preset] = loadModel(weights()[preset]));
  let loadFailed = false, wanted = false;  // did the site's weights fail to load; has the reader acted yet
  let refused = null;  // what the reader typed as an operand that is none of the task's
  const c = breakControls(model, root, uid, (changes) => act(changes), (text) => { refused = text; draw(); });
  const live = liveRegion(root);
  // A reader's change; the first one loads the site's weights (the page carries none until then).
  function act(changes) {
    refused = null;
    push(model, changes);
    if (!wanted && fromSite() && !window.encdecWeights) {
      wanted = true;
      siteWeights(model.get("weights_src")).then(draw, () => { loadFailed = true; draw(); });
      draw();
    }
  }

  function draw() {
    const presets = model.get("presets"), tables = model.get("tables");
    const preset = presets.includes(model.get("preset")) ? model.get("preset") : presets[0];
    const table = tables[preset] || [];
    const mistake = model.get("mistake"), a = model.get("a"), op = model.get("op"), b = model.get("b");
    c.legend.textContent = t(model, "break_it.legend", { preset });
    c.radios.replaceChildren(...table.filter((row) => row.name !== "intact").map((row) => {
      const id = `${uid}-m-${row.name}`;
      return h("div", { class: "encdec-break-choice" + (row.name === mistake ? " active" : "") },
        h("input", { type: "radio", name: `${uid}-mistake`, id, value: row.name, checked: row.name === mistake,
          "data-testid": `mistake-${row.name}`, onclick: () => act({ mistake: row.name }) }),  // a click on the chosen one runs it too
        h("label", { for: id }, breakWords(model, "m", row.name), " ",
          h("span", { class: "encdec-note", "data-testid": `count-${row.name}`, "data-right": row.right }, share(model, row))));
    }));
    c.labelA.textContent = t(model, "break_it.question_label");
    c.operandNote.hidden = refused === null;
    c.operandNote.textContent = refused === null ? "" : t(model, "break_it.operand_range", { value: refused, max: OPERAND_MAX });
    c.inputA.setAttribute("aria-label", t(model, "break_it.first_label"));
    c.opSelect.setAttribute("aria-label", t(model, "break_it.operator_label"));
    c.inputB.setAttribute("aria-label", t(model, "break_it.second_label"));
    if (document.activeElement !== c.inputA) c.inputA.value = a;
    if (document.activeElement !== c.inputB) c.inputB.value = b;
    c.opSelect.replaceChildren(...["add", "subtract"].map((o) => h("option", { value: o }, breakWords(model, "op", o))));
    c.opSelect.value = op;
    c.lesson.textContent = t(model, "break_it.lesson");
    c.random.textContent = t(model, "break_it.random");
    c.presetGroup.replaceChildren(h("span", { class: "encdec-label" }, t(model, "break_it.checkpoint")),
      ...presets.map((p) => h("button", { type: "button", class: "encdec-btn" + (p === preset ? " active" : ""),
        "aria-pressed": p === preset ? "true" : "false", "data-preset": p, onclick: () => act({ preset: p }) }, p)));
    c.caption.replaceChildren(...[].concat(t(model, "break_it.caption", { source: sourceText(model) })));

    if (fromSite() && !window.encdecWeights) {  // not asked yet, or the site's weights script is loading
      c.status.className = "encdec-row encdec-status";
      const src = { src: model.get("weights_src") };
      c.status.textContent = loadFailed ? t(model, "break_it.weights_failed", src)
        : wanted ? t(model, "break_it.weights_loading", src) : t(model, "break_it.weights_wait");
      c.answers.replaceChildren();
      c.explain.replaceChildren();
      return;
    }
    const row = table.find((r) => r.name === mistake), intactRow = table.find((r) => r.name === "intact");
    const ids = breakQuestionIds(a, op, b), truth = trueAnswer(ids);
    const run = breakRun(net(preset), ids, mistake, row.use_cache);
    c.status.className = "encdec-row";
    c.status.replaceChildren(h("span", { class: "encdec-label" }, t(model, "break_it.reads")), " ",
      h("span", { "data-testid": "question-tokens" }, ids.map((id) => chip(id, "mem"))));
    c.answers.replaceChildren(answersTable(model, run, truth, mistake, row, intactRow));
    c.explain.replaceChildren(...explainParts(model, row, mistake));
    const said = run.broken === null ? t(model, "break_it.no_answer") : run.broken.map((id) => TOKENS[id]).join(" ");
    live.textContent = t(model, "break_it.live", { mistake: breakWords(model, "m", mistake), answer: said, count: share(model, row) });
  }
  draw();
  return watch(model, ["mistake", "a", "op", "b", "preset", "presets", "tables", "weights", "weights_src"], keepFocus(root, draw));
}

export default { render };
