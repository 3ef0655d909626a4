// ScoreExplorer: one query and one key in one head of the trained model (chapter 11): the two vectors,
// their products and sum, the division by √Dh, and the query's whole row of scores with its softmax.
// The page computes it with model_forward.js on the site's weights, which load when the reader first
// asks for another question, attention or layer; the first setting's Q and K come with the figure
// (`shown`, from score_explorer.score_parts), so it draws whole before any weights.

import { ANSWER_LEN, OP_IDS, QUESTION_LEN, SIGN_IDS, TOKENS } from "./constants.js";
import { fmt, h, keepFocus, liveRegion, maskedSoftmaxRow, push, sourceText, sum, t, watch, widgetRoot } from "./common.js";
import { INTACT, decoderPass, embedAnswer, encode, exportedFloats, linearRows, loadModel, newDecoderState } from "./model_forward.js";
import { parseQuestion, siteWeights, trueAnswer } from "./task.js";

export const KINDS = ["encoder_self", "decoder_self", "cross"];

const QUESTION_CHARS = 64;  // the longest question of the task in tokens, "BOS NEGATIVE 49 subtract NEGATIVE 49 EOS", is 40

// A kind of attention in words.
function kindText(model, kind) {
  const known = { encoder_self: "score_explorer.kind_encoder_self", decoder_self: "score_explorer.kind_decoder_self",
    cross: "score_explorer.kind_cross" };
  return t(model, known[kind]);
}

// What masked_softmax puts in a masked score (shown.fill, torch.finfo(float32).min), as the figure writes it.
const fillText = (model) => model.get("shown").fill.toExponential(4).replace("-", "−");

// Every attention's projected queries and keys on one question, the decoder teacher-forced on the true
// answer shifted (BOS sign d d, at the positions of a five-token answer), as training feeds it: per kind
// of KINDS, per layer, { q: Lq rows of M, k: Lk rows of M }. The twin of score_explorer.score_parts.
export function attentionParts(net, questionIds) {
  const M = net.M, Kq = questionIds.length;
  const answer = trueAnswer(questionIds), Ka = answer.length, fed = Ka - 1;
  const rows = (flat, n) => Array.from({ length: n }, (_, r) => Array.from(flat.subarray(r * M, (r + 1) * M)));
  // encoder layer l reads the output of the first l layers: the same forward pass, stopped there
  const encoderSelf = net.encoder.map((layer, l) => {
    const x = encode({ ...net, encoder: net.encoder.slice(0, l) }, questionIds);  // (Kq, M)
    const a = layer.attention_self;
    return { q: rows(linearRows(a.q_proj, x, Kq), Kq), k: rows(linearRows(a.k_proj, x, Kq), Kq) };
  });
  const decoderSelf = [], cross = [];
  const watched = {  // the decoder's two attentions as INTACT computes them, their Q and K kept on the way
    ...INTACT,
    attentionSelf: (a, model, q, k, v, n, T, before) => {
      decoderSelf.push({ q: rows(q, n), k: rows(k, T) });
      return INTACT.attentionSelf(a, model, q, k, v, n, T, before);
    },
    attentionCross: (c, model, out_2, state, l, n) => {
      cross.push({ q: rows(linearRows(c.q_proj, out_2, n), n), k: rows(state.cross[l].k, state.Kq) });
      return INTACT.attentionCross(c, model, out_2, state, l, n);
    },
  };
  const state = newDecoderState(net, encode(net, questionIds));
  decoderPass(net, state, embedAnswer(net, answer, 0, fed, Ka), fed, watched);
  return { question: questionIds, answer, encoder_self: encoderSelf, decoder_self: decoderSelf, cross };
}

// One query and one key in one head, from q (Lq rows of M) and k (Lk rows of M): the head's slices of
// both, their products and sum, √Dh and the score; the query's whole row of scores, the keys the causal
// mask forbids (j > query, with `causal`), the softmax after the mask, and its largest score and
// denominator. The twin of score_explorer.score_step.
export function scoreStep(q, k, heads, head, query, key, causal) {
  const Dh = q[0].length / heads, c0 = head * Dh;
  const qv = q[query].slice(c0, c0 + Dh), kv = k[key].slice(c0, c0 + Dh);
  const scale = Math.sqrt(Dh);
  const scores = k.map((row) => sum(qv.map((x, d) => x * row[c0 + d])) / scale);  // (Lk,)
  const masked = k.map((_, j) => causal && j > query);  // mask before softmax: the future leaves the row
  const products = qv.map((x, d) => x * kv[d]);
  const dot = sum(products);
  const open = scores.filter((_, j) => !masked[j]);
  const top = Math.max(...open);
  return { q: qv, k: kv, products, dot, scale, score: dot / scale, scores, masked,
    weights: maskedSoftmaxRow(scores, masked), top, total: sum(open.map((s) => Math.exp(s - top))) };
}

// How many queries and keys one kind of attention has: the question's Kq, or the Ka - 1 the decoder reads.
export function lengths(kind) {
  const fed = ANSWER_LEN - 1;
  return { encoder_self: [QUESTION_LEN, QUESTION_LEN], decoder_self: [fed, fed], cross: [fed, QUESTION_LEN] }[kind];
}

// A question's ids as the arithmetic a reader types, "-30 - -34" (parseQuestion reads it back).
export function arithmetic(ids) {
  const operand = (k) => `${ids[k] === SIGN_IDS.NEGATIVE ? "-" : ""}${10 * ids[k + 1] + ids[k + 2]}`;
  return `${operand(1)} ${ids[4] === OP_IDS.add ? "+" : "-"} ${operand(5)}`;
}

// The tokens of one kind's queries and keys: the question's, or what the decoder reads (no EOS).
export function positionTokens(kind, questionIds) {
  const question = questionIds.map((id) => TOKENS[id]);
  const fed = trueAnswer(questionIds).slice(0, -1).map((id) => TOKENS[id]);
  return { encoder_self: [question, question], decoder_self: [fed, fed], cross: [fed, question] }[kind];
}

// The Q and K the figure carries (score_explorer.packed: float32 rows in base64), as rows of numbers.
export function unpacked(shown) {
  const rows = (data) => {
    const floats = exportedFloats({ data });
    return Array.from({ length: floats.length / shown.width }, (_, r) => Array.from(floats.subarray(r * shown.width, (r + 1) * shown.width)));
  };
  return { q: rows(shown.q), k: rows(shown.k) };
}

// The setting shown, each index brought inside what the model and the attention have (a trait set from
// Python may ask for more).
export function setting(model, shape) {
  const kind = KINDS.includes(model.get("kind")) ? model.get("kind") : "cross", [Lq, Lk] = lengths(kind);
  const inside = (name, n) => Math.max(0, Math.min(model.get(name), n - 1));
  return { kind, layer: inside("layer", shape.layers[kind]), head: inside("head", shape.heads), i: inside("query", Lq), j: inside("key", Lk) };
}

let explorerCount = 0;  // a page may hold several figures: their controls need their own ids

// The controls, made once so typing and focus survive a redraw; request(name, value) is a reader's change.
function makeControls(root, uid, request) {
  const c = {};
  const select = (name) => {
    c[name] = h("select", { id: `${uid}-${name}`, class: "encdec-select", "data-testid": name, onchange: () => request(name, c[name].value) });
    c[name + "Label"] = h("label", { for: `${uid}-${name}`, class: "encdec-label" });
    return h("span", { class: "encdec-group" }, c[name + "Label"], c[name]);
  };
  // what the reader types is data: bounded here, read by parseQuestion, shown only as text
  c.input = h("input", { type: "text", id: `${uid}-q`, class: "encdec-input", "data-testid": "question-input",
    autocomplete: "off", spellcheck: "false", enterkeyhint: "go", maxlength: QUESTION_CHARS });
  c.questionLabel = h("label", { for: `${uid}-q`, class: "encdec-label" });
  c.show = h("button", { type: "submit", class: "encdec-btn primary", "data-testid": "show" });
  const form = h("form", { class: "encdec-ask-form", onsubmit: (e) => { e.preventDefault(); request("question", c.input.value); } },
    c.questionLabel, c.input, c.show);
  c.status = h("div", { class: "encdec-row", "data-testid": "status" });
  c.body = h("div", {});
  root.append(form, h("div", { class: "encdec-toolbar" }, select("pick")),
    h("div", { class: "encdec-toolbar" }, select("kind"), select("layer"), select("head")),
    h("div", { class: "encdec-toolbar" }, select("query"), select("key")), c.status, c.body);
  return c;
}

// The controls' words, options and values from the traits; `tokens` the query and key tokens, or null.
function drawControls(model, c, shape, at, tokens) {
  const kind = at.kind;
  const options = (el, values, label, current) => {
    el.replaceChildren(...values.map((v, k) => h("option", { value: v }, label(v, k))));
    el.value = String(current);
  };
  const known = { question: "score_explorer.question_label", pick: "score_explorer.pick_label", kind: "score_explorer.kind_label",
    layer: "score_explorer.layer_label", head: "score_explorer.head_label", query: "score_explorer.query_label", key: "score_explorer.key_label" };
  for (const name of Object.keys(known)) c[name + "Label"].textContent = t(model, known[name]);
  c.show.textContent = t(model, "score_explorer.show");
  if (document.activeElement !== c.input) {
    const parsed = parseQuestion(model.get("question"));  // shown as typed, a question of the task as arithmetic
    c.input.value = parsed.error ? model.get("question") : arithmetic(parsed.ids);
  }
  const example = (v) => { const parsed = parseQuestion(v); return parsed.error ? v : arithmetic(parsed.ids); };
  options(c.pick, ["", ...model.get("examples")], (v) => (v ? example(v) : t(model, "score_explorer.pick")), "");
  options(c.kind, KINDS, (v) => kindText(model, v), kind);
  const count = (n) => Array.from({ length: n }, (_, k) => k);
  options(c.layer, count(shape.layers[kind]), (v) => v + 1, at.layer);
  options(c.head, count(shape.heads), (v) => v + 1, at.head);
  const [queries, keys] = tokens || [[], []];
  const causal = kind === "decoder_self";
  options(c.query, count(queries.length), (j) => t(model, "score_explorer.position", { j, token: queries[j] }), at.i);
  options(c.key, count(keys.length), (j) => {
    const late = causal && j > at.i;  // a key the causal mask forbids this query
    return t(model, late ? "score_explorer.position_masked" : "score_explorer.position", { j, token: keys[j] });
  }, at.j);
}

// A number to 3 decimals, never "-0.000".
const num = (x) => fmt(x).replace(/^-(0\.0+)$/, "$1");

// A number and a bar from the middle: right for positive, left for negative, `most` the column's largest size.
function signed(x, most) {
  const width = `${(50 * Math.min(1, Math.abs(x) / (most || 1))).toFixed(1)}%`;
  return [h("span", { class: "encdec-num" }, num(x)), h("div", { class: "encdec-pm", "aria-hidden": "true" },
    h("div", { class: `encdec-pm-bar ${x < 0 ? "neg" : "pos"}`, style: `width: ${width}; ${x < 0 ? "right" : "left"}: 50%` }))];
}

// The two vectors of the head, their products, the dot product and the scale.
function vectorPanel(model, step, Dh) {
  const most = (xs) => Math.max(...xs.map(Math.abs));
  const cols = [step.q, step.k, step.products], tops = cols.map(most);
  const known = { d: "score_explorer.th_d", q: "score_explorer.th_q", k: "score_explorer.th_k", product: "score_explorer.th_product" };
  return h("div", { class: "encdec-panel" },
    h("div", { class: "encdec-label" }, t(model, "score_explorer.vectors_label", { Dh })),
    h("table", { class: "encdec-grid encdec-score-vectors", "data-testid": "vectors" },
      h("thead", {}, h("tr", {}, Object.keys(known).map((name) => h("th", { scope: "col" }, t(model, known[name]))))),
      h("tbody", {}, step.q.map((_, d) => h("tr", { "data-d": d }, h("th", { class: "encdec-rowhead", scope: "row" }, d),
        cols.map((col, c) => h("td", { class: "encdec-score-cell" }, ...signed(col[d], tops[c]))))))),
    h("p", { class: "encdec-row", "data-testid": "dot", "data-value": step.dot }, t(model, "score_explorer.dot", { Dh, dot: fmt(step.dot) })),
    h("p", { class: "encdec-row", "data-testid": "scale", "data-value": step.score },
      t(model, "score_explorer.scale", { Dh, scale: fmt(step.scale, 0), score: h("b", {}, fmt(step.score)) })));
}

// The query's whole row: every key's score, the mask, the softmax; the chosen key marked.
function rowPanel(model, step, keys, i, j, causal) {
  const known = { key: "score_explorer.th_key", score: "score_explorer.th_score", masked: "score_explorer.th_masked", weight: "score_explorer.th_weight" };
  const heads = causal ? ["key", "score", "masked", "weight"] : ["key", "score", "weight"];
  const rows = keys.map((token, k) => h("tr", { "data-key": k, class: (k === j ? "encdec-chosen " : "") + (step.masked[k] ? "future" : ""),
    "aria-current": k === j ? "true" : null },
  h("th", { class: "encdec-rowhead", scope: "row" }, t(model, "score_explorer.position", { j: k, token })),
  h("td", { class: "encdec-num", "data-testid": `score-${k}` }, num(step.scores[k])),
  causal ? h("td", { class: "encdec-num" }, step.masked[k] ? t(model, "score_explorer.masked_cell", { min: fillText(model) }) : num(step.scores[k])) : null,
  h("td", { class: "encdec-num", "data-testid": `weight-${k}`, "data-value": step.weights[k] }, fmt(step.weights[k]),
    h("div", { class: "encdec-bar-wrap", "aria-hidden": "true" }, h("div", { class: "encdec-bar model", style: `width: ${(100 * step.weights[k]).toFixed(1)}%` })))));
  const how = step.masked[j] ? t(model, "score_explorer.masked_note", { i, j, min: fillText(model) })
    : t(model, "score_explorer.weight_line", { score: fmt(step.score), top: fmt(step.top), total: fmt(step.total), weight: h("b", {}, fmt(step.weights[j])) });
  return h("div", { class: "encdec-panel" },
    h("div", { class: "encdec-label" }, t(model, "score_explorer.row_label", { i })),
    h("table", { class: "encdec-grid", "data-testid": "row" },
      h("thead", {}, h("tr", {}, heads.map((name) => h("th", { scope: "col", class: "encdec-wrap" }, t(model, known[name]))))),
      h("tbody", {}, rows)),
    h("p", { class: "encdec-row", "data-testid": "weight-line" }, how));
}

// What the figure shows for one setting, `parts` its Q and K; and the sentence the live region says.
function drawParts(model, c, parts, shape, at, ids, tokens) {
  const { kind, i, j, head } = at;
  const causal = kind === "decoder_self", Dh = parts.q[0].length / shape.heads;
  const step = scoreStep(parts.q, parts.k, shape.heads, head, i, j, causal);
  const [queries, keys] = tokens;
  const title = t(model, "score_explorer.title", { kind: kindText(model, kind), layer: at.layer + 1,
    head: head + 1, heads: shape.heads, i, query_token: queries[i], j, key_token: keys[j] });
  c.status.className = "encdec-row";
  c.status.replaceChildren(h("span", { class: "encdec-label", "data-testid": "title" }, title));
  c.body.replaceChildren(h("div", { class: "encdec-columns" }, vectorPanel(model, step, Dh), rowPanel(model, step, keys, i, j, causal)),
    h("p", { class: "encdec-caption" }, t(model, "score_explorer.caption", { source: sourceText(model),
      question: ids.map((id) => TOKENS[id]).join(" "), input: positionTokens("decoder_self", ids)[0].join(" "),
      M: parts.q[0].length, H: shape.heads, Dh })));
  return t(model, "score_explorer.live", { title, dot: fmt(step.dot), score: fmt(step.score), weight: fmt(step.weights[j]) });
}

export function render({ model, el }) {
  const root = widgetRoot(el, "ScoreExplorer");
  const uid = `encdec-score-${++explorerCount}`;
  const fromSite = () => model.get("weights_src") !== "";
  const ready = () => !fromSite() || Boolean(window.encdecWeights);
  let net = null, loading = false, loadFailed = false, memo = { key: null, parts: null };
  const redraw = keepFocus(root, () => draw());
  function load() {  // the site's weights, asked for by the reader's change: once
    if (loading) return;
    loading = true;
    siteWeights(model.get("weights_src")).then(redraw, () => { loadFailed = true; redraw(); });
  }
  const shape = () => ({ heads: model.get("shown").heads, layers: model.get("shown").layers });
  // A reader's change. The query, key and layer are brought inside what the new setting has first, the
  // attention or question changed last: every state between stays one the figure can draw.
  function request(name, value) {
    if (name === "pick" && !value) return;
    const trait = name === "pick" ? "question" : name;
    const raw = { [trait]: ["kind", "question"].includes(trait) ? value : Number(value) };
    const kind = raw.kind ?? model.get("kind"), [Lq, Lk] = lengths(kind);
    const fit = { query: Math.min(raw.query ?? model.get("query"), Lq - 1), key: Math.min(raw.key ?? model.get("key"), Lk - 1),
      layer: Math.min(raw.layer ?? model.get("layer"), shape().layers[kind] - 1), head: Math.min(raw.head ?? model.get("head"), shape().heads - 1) };
    push(model, { ...fit, ...(trait in fit ? {} : raw) });
  }
  const c = makeControls(root, uid, request);
  const live = liveRegion(root);

  // The Q and K of the current setting: the figure's own numbers for its first setting, else the page's
  // forward pass (null while the weights load).
  function partsOf(ids, { kind, layer }) {
    const shown = model.get("shown");
    if (shown.kind === kind && shown.layer === layer && shown.question.join() === ids.join()) return unpacked(shown);
    if (!ready()) return null;
    if (memo.key !== ids.join()) {
      net = net || loadModel((fromSite() ? window.encdecWeights : model.get("weights"))[model.get("preset")]);
      memo = { key: ids.join(), parts: attentionParts(net, ids) };
    }
    return memo.parts[kind][layer];
  }

  function draw() {
    const parsed = parseQuestion(model.get("question")), at = setting(model, shape());
    const tokens = parsed.error ? null : positionTokens(at.kind, parsed.ids);
    drawControls(model, c, shape(), at, tokens);
    const known = { no_text: "score_explorer.error_empty", bad_format: "score_explorer.error_format", out_of_range: "score_explorer.error_range" };
    let parts = null, why = null;
    try {
      parts = parsed.error ? null : partsOf(parsed.ids, at);
    } catch (err) {
      why = t(model, "score_explorer.error_model", { why: err.code || err.message });
    }
    if (!parts) {
      if (!why && !parsed.error && !loadFailed) load();
      const status = parsed.error ? "bad" : loadFailed ? "failed" : why ? "failed" : "loading";
      c.status.className = "encdec-row encdec-status" + (status === "loading" ? "" : " bad");
      c.status.setAttribute("data-weights", status);
      const error = parsed.error;
      c.status.textContent = live.textContent = why || (error ? t(model, known[error], parsed.values)
        : t(model, loadFailed ? "score_explorer.weights_failed" : "score_explorer.weights_loading", { src: model.get("weights_src") }));
      c.body.replaceChildren();
      return;
    }
    c.status.setAttribute("data-weights", "ready");
    live.textContent = drawParts(model, c, parts, shape(), at, parsed.ids, tokens);
  }

  draw();
  return watch(model, ["question", "kind", "layer", "head", "query", "key", "shown", "weights", "weights_src", "examples"], redraw);
}

export default { render };
