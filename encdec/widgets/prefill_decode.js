// PrefillDecodeStepper: step 0 nothing has run; step 1 the prefill (the question went to the encoder,
// the decoder takes the P tokens of the known answer prefix at once); step s > 1 feeds one new token.
// With a trained checkpoint (the `preset` trait) the page runs the model itself (model_forward.js) on
// any question, any forced prefix and greedy or sampled decoding: the run's numbers replace the traits
// (the same ones Python's decode_trace fills; the run itself is prefill_run.js), and the figure draws
// whatever the traits hold.

import { OPERAND_MAX, TOKENS } from "./constants.js";
import { fmt, h, keepFocus, liveRegion, push, sourceText, t, tn, watch, widgetRoot } from "./common.js";
import { loadModel } from "./model_forward.js";
import { pageRun } from "./prefill_run.js";
import { parseQuestion, siteWeights, trueAnswer } from "./task.js";

let stepperCount = 0;  // a page may hold several figures: their controls need their own ids

// The settings of an in-page run, made once so focus and typing survive a redraw: the question, the
// forced prefix, the preset and mode groups, the sampling numbers. act(changes) runs the model on a
// reader's change; draw() redraws after a number the figure refused.
function settingsControls(model, uid, act, draw) {
  const control = (tag, key, attrs, onchange) => h(tag, { id: `${uid}-${key}`, "data-testid": key, onchange, ...attrs });
  const labels = {};  // each control's label, by its key
  const labelFor = (key) => (labels[key] = h("label", { for: `${uid}-${key}`, class: "encdec-label" }));
  const questionPick = control("select", "question-pick", { class: "encdec-select" }, () => act({ question: questionPick.value }));
  const random = h("button", { type: "button", class: "encdec-btn", "data-testid": "random", onclick: () => {
    const pick = () => Math.floor(Math.random() * (2 * OPERAND_MAX + 1)) - OPERAND_MAX;
    act({ question: `${pick()} ${Math.random() < 0.5 ? "+" : "-"} ${pick()}` });
  } });
  const prefixPick = control("select", "prefix-pick", { class: "encdec-select" }, () => act({ prefix: prefixPick.value.split(" ") }));
  const presetGroup = h("span", { class: "encdec-group", role: "group" });
  const modeGroup = h("span", { class: "encdec-group", role: "group" });
  const number = (key, attrs, parse) => control("input", key, { type: "number", class: "encdec-input encdec-stepper-number", ...attrs },
    (e) => { const value = parse(e.target.value); if (value !== undefined) act({ [key.replace("-", "_")]: value }); else draw(); });
  const inRange = (lo, hi, integer) => (text) => {
    const x = Number(text);
    return text !== "" && Number.isFinite(x) && x >= lo && x <= hi && (!integer || Number.isInteger(x)) ? x : undefined;
  };
  const temperature = number("temperature", { min: 0, max: 10, step: 0.1 }, inRange(0, 10, false));
  const topK = number("top-k", { min: 0, max: 16, step: 1 }, (text) => { const k = inRange(0, 16, true)(text); return k === undefined ? k : k || null; });
  const topP = number("top-p", { min: 0.01, max: 1, step: 0.05 }, (text) => { const p = inRange(0.01, 1, false)(text); return p === undefined ? p : p === 1 ? null : p; });
  const seed = number("seed", { min: 0, max: 4294967295, step: 1 }, inRange(0, 4294967295, true));
  const again = h("button", { type: "button", class: "encdec-btn", "data-testid": "draw-again",
    onclick: () => act({ seed: (model.get("seed") + 1) % 4294967296 }) });
  const sampling = h("div", { class: "encdec-toolbar", "data-testid": "sampling-settings" },
    h("span", { class: "encdec-group" }, labelFor("temperature"), temperature),
    h("span", { class: "encdec-group" }, labelFor("top-k"), topK),
    h("span", { class: "encdec-group" }, labelFor("top-p"), topP),
    h("span", { class: "encdec-group" }, labelFor("seed"), seed, again));
  const samplingSlot = h("div", {});  // the sampling settings, there in sample mode only
  const status = h("div", { class: "encdec-note", "data-testid": "status" });
  const panel = h("div", { class: "encdec-panel encdec-stepper-settings", "data-testid": "settings" },
    h("div", { class: "encdec-toolbar" }, h("span", { class: "encdec-group" }, labelFor("question-pick"), questionPick, random)),
    h("div", { class: "encdec-toolbar" }, h("span", { class: "encdec-group" }, labelFor("prefix-pick"), prefixPick), presetGroup),
    h("div", { class: "encdec-toolbar" }, modeGroup), samplingSlot, status);
  return { panel, labels, questionPick, random, prefixPick, presetGroup, modeGroup, temperature, topK, topP, seed, again,
    sampling, samplingSlot, status };
}

// The settings as the traits hold them, in the reader's language; `weights` says whether the site's
// weights are loading or failed ({ loading, failed }).
function drawSettings(model, c, act, weights) {
  const question = model.get("question"), prefix = model.get("prefix"), text = question.join(" ");
  c.labels["question-pick"].textContent = t(model, "prefill_decode.question_label");
  c.labels["prefix-pick"].textContent = t(model, "prefill_decode.prefix_label");
  const parsed = parseQuestion(text);
  const same = (q) => (parseQuestion(q).ids || []).join() === (parsed.ids || []).join();  // "30" or "3 0"
  const examples = model.get("examples");
  const options = examples.some(same) ? examples : [text, ...examples];
  c.questionPick.replaceChildren(...options.map((q) => h("option", { value: q, selected: same(q) }, q)));
  const truth = parsed.ids ? trueAnswer(parsed.ids).map((id) => TOKENS[id]) : [...prefix, "EOS"];
  const prefixes = [1, 2, 3, 4].map((P) => truth.slice(0, P).join(" "));
  if (!prefixes.includes(prefix.join(" "))) prefixes.push(prefix.join(" "));
  c.prefixPick.replaceChildren(...prefixes.map((p) => h("option", { value: p, selected: p === prefix.join(" ") },
    t(model, "prefill_decode.prefix_option", { prefix: p, P: p.split(" ").length }))));
  const preset = model.get("preset"), mode = model.get("mode");
  c.presetGroup.replaceChildren(h("span", { class: "encdec-label" }, t(model, "prefill_decode.preset_label")),
    ...model.get("presets").map((p) => h("button", { type: "button", class: "encdec-btn" + (p === preset ? " active" : ""),
      "aria-pressed": p === preset ? "true" : "false", "data-preset": p, onclick: () => act({ preset: p }) }, p)));
  c.modeGroup.replaceChildren(h("span", { class: "encdec-label" }, t(model, "prefill_decode.mode_label")),
    ...["greedy", "sample"].map((m) => h("button", { type: "button", class: "encdec-btn" + (m === mode ? " active" : ""),
      "aria-pressed": m === mode ? "true" : "false", "data-mode": m, onclick: () => act({ mode: m }) },
    m === "greedy" ? t(model, "prefill_decode.mode_greedy") : t(model, "prefill_decode.mode_sample"))));
  if (mode === "sample") c.samplingSlot.replaceChildren(c.sampling);
  else c.samplingSlot.replaceChildren();
  const setValue = (input, value) => { if (document.activeElement !== input || input.value === "") input.value = value; };
  setValue(c.temperature, `${model.get("temperature")}`);
  setValue(c.topK, `${model.get("top_k") ?? 0}`);
  setValue(c.topP, `${model.get("top_p") ?? 1}`);
  setValue(c.seed, `${model.get("seed")}`);
  c.labels.temperature.textContent = t(model, "prefill_decode.temperature_label");
  c.labels["top-k"].textContent = t(model, "prefill_decode.top_k_label");
  c.labels["top-p"].textContent = t(model, "prefill_decode.top_p_label");
  c.labels.seed.textContent = t(model, "prefill_decode.seed_label");
  c.random.textContent = t(model, "prefill_decode.random");
  c.again.textContent = t(model, "prefill_decode.draw_again");
  c.status.textContent = weights.loading ? t(model, "prefill_decode.loading")
    : weights.failed ? t(model, "prefill_decode.failed", { why: weights.failed.message || `${weights.failed}` })
      : model.get("source") === "page" ? t(model, "prefill_decode.ran_in_page", { preset })
        : t(model, "prefill_decode.not_yet_in_page", { preset });
}

const SETTINGS = ["question", "prefix", "preset", "mode", "temperature", "top_k", "top_p", "seed"];

// A run in the page on the settings as they stand (the traits) with the reader's pending changes
// (`wanted`) over them: { changes }, the traits to set, or { failed } for a question of no use.
function pageChanges(model, net, wanted) {
  const now = Object.fromEntries(SETTINGS.map((key) => [key, key in wanted ? wanted[key] : model.get(key)]));
  const text = Array.isArray(now.question) ? now.question.join(" ") : now.question;
  const parsed = parseQuestion(text);
  if (!parsed.ids) return { failed: new Error(text) };
  const truth = trueAnswer(parsed.ids).map((id) => TOKENS[id]);
  // a new question keeps the prefix's length, with the new question's right tokens
  const prefix = "question" in wanted && !("prefix" in wanted) ? truth.slice(0, model.get("prefix").length) : now.prefix;
  const m = net(now.preset);
  const run = pageRun(m, parsed.ids, prefix.map((tok) => TOKENS.indexOf(tok)),
    { mode: now.mode, temperature: now.temperature, topK: now.top_k, topP: now.top_p, seed: now.seed });
  // another question or prefix is another generation: a reader past its start sees its prefill
  const restart = "question" in wanted || "prefix" in wanted;
  const c = m.config;
  return { changes: { ...now, question: parsed.ids.map((id) => TOKENS[id]), prefix,
    steps: run.steps, probs: run.probs, dists: run.dists, self_cache_lens: run.self_cache_lens,
    cross_cache_lens: run.cross_cache_lens, work: run.work, num_layers: c.num_dec_layers, num_heads: c.num_heads,
    emb_dim: c.emb_dim, source: "page", step: Math.min(model.get("step"), restart ? 1 : run.steps.length) } };
}

// The step label: nothing has run, the prefill, or decode step s.
function stepLabel(model, s) {
  const total = model.get("steps").length, P = model.get("prefix").length;
  return s === 0 ? t(model, "prefill_decode.step_0", { total })
    : s === 1 ? t(model, "prefill_decode.step_prefill", { total, positions: tn(model, "prefill_decode.positions", P) })
      : t(model, "prefill_decode.step_decode", { s, total });
}

const chip = (tok, cls, extra = {}) => h("span", { class: "encdec-chip " + (cls || ""), ...extra }, tok);

// The caches at step s, a row per decoder layer: the self-attention rows so far, the cross rows.
function cacheTable(model, s, answer) {
  const P = model.get("prefix").length, rows = (n) => tn(model, "prefill_decode.rows", n);
  const caches = Array.from({ length: model.get("num_layers") }, (_, l) => {
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
  return h("table", { class: "encdec-grid encdec-cache" },
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, t(model, "prefill_decode.th_self_cache", { rows: rows(P) })),
      h("th", {}, t(model, "prefill_decode.th_cross_cache")))),
    h("tbody", {}, caches));
}

// What step s shows: the encoder's memory, the decoder's answer so far and what it was fed, the
// caches, the distribution the step took its token from, the work of every step, the caption.
function stepParts(model, s, inPage) {
  const question = model.get("question"), steps = model.get("steps"), probs = model.get("probs");
  const prefix = model.get("prefix"), P = prefix.length, Kq = question.length, M = model.get("emb_dim");
  const answer = [...prefix, ...steps];  // the prefix is fed at step 1, answer[P + s - 2] at step s > 1
  const known = s === 0 ? 0 : P + s - 1;  // answer tokens inside the decoder at step s
  const fed = s <= 1 ? null : answer[known - 1];
  const produced = s === 0 ? null : steps[s - 1];
  const sampled = model.get("mode") === "sample" && model.get("dists").length > 0;
  const predict = (token) => (sampled ? t(model, "prefill_decode.drawn", { token }) : t(model, "prefill_decode.predict", { token }));
  const prob = (k) => (probs.length ? t(model, "prefill_decode.prob", { p: fmt(probs[k]) }) : "");
  const memory = h("div", { class: "encdec-panel" + (s >= 1 ? " ready" : ""), "data-testid": "memory" },
    h("div", { class: "encdec-label" }, t(model, "prefill_decode.memory_title", { Kq, M })),
    h("div", { class: "encdec-row" }, question.map((tok) => chip(tok, s >= 1 ? "mem" : "ghost"))),
    h("div", { class: "encdec-note", "data-testid": "memory-status" }, s === 0 ? t(model, "prefill_decode.memory_0")
      : s === 1 ? t(model, "prefill_decode.memory_prefill") : t(model, "prefill_decode.memory_decode", { s })));
  const source = model.get("source") === "page" ? t(model, "prefill_decode.source_page", { preset: model.get("preset") }) : sourceText(model);
  return [  // a part with nothing to show is null: left out (replaceChildren would write "null")
    memory,
    h("div", { class: "encdec-panel" },
      h("div", { class: "encdec-label" }, t(model, "prefill_decode.decoder")),
      h("div", { class: "encdec-row", "data-testid": "answer" }, t(model, "prefill_decode.answer_so_far"), " ",
        answer.slice(0, known).map((tok, k) => chip(tok, s === 1 || k === known - 1 ? "new" : "kv")),
        produced ? [" → ", chip(produced, "out", { "data-testid": "produced" })] : null),
      h("div", { class: "encdec-note", "data-testid": "fed" }, s === 0 ? t(model, "prefill_decode.fed_0")
        : s === 1 ? t(model, "prefill_decode.fed_prefill", { prefix: prefix.join(" "),
          positions: tn(model, "prefill_decode.positions", P), one_pass: P > 1 ? t(model, "prefill_decode.one_pass") : "",
          rows: tn(model, "prefill_decode.rows", P), predict: predict(produced), prob: prob(0) }) +
          (P === 1 ? t(model, "prefill_decode.one_position_note") : "")
        : t(model, "prefill_decode.fed_decode", { fed, cached: known - 1, predict: predict(produced), prob: prob(s - 1) }))),
    cacheTable(model, s, answer),
    distChart(model, s, produced),
    workChart(model, s),
    h("p", { class: "encdec-caption" }, t(model, "prefill_decode.caption", { source }),
      inPage ? t(model, "prefill_decode.caption_page") : "")].filter((part) => part !== null);
}

// The distribution step s draws from: the most probable tokens, each with the model's probability
// (after the temperature) and, when sampling, what top-k and top-p keep of it, renormalised; the
// token the step took marked, and the random number it drew.
function distChart(model, s, produced) {
  const dists = model.get("dists");
  if (s === 0 || !dists.length) return null;
  const { p, q, u } = dists[s - 1];
  const order = p.map((_, v) => v).sort((a, b) => p[b] - p[a]);
  const shown = order.slice(0, 6);
  const chosen = TOKENS.indexOf(produced);
  if (!shown.includes(chosen)) shown.push(chosen);  // a drawn token from the tail is shown too
  const kept = q ? q.filter((x) => x > 0).length : 1;
  const bar = (x, cls) => h("div", { class: "encdec-bar-wrap" }, h("div", { class: `encdec-bar ${cls}`, style: `width: ${(100 * x).toFixed(1)}%` }));
  const rowsShown = shown.map((v) => {
    const cut = q !== null && q[v] === 0;
    return h("tr", { "data-token": TOKENS[v], "data-kept": q === null ? null : cut ? "no" : "yes", class: v === chosen ? "encdec-drawn" : null },
      h("th", { class: "encdec-rowhead" }, h("span", { class: "encdec-chip" + (v === chosen ? " out" : "") }, TOKENS[v])),
      h("td", { class: "encdec-num encdec-dist-cell", "data-testid": "p" }, fmt(p[v]), bar(p[v], "model")),
      q === null ? null : h("td", { class: "encdec-num encdec-dist-cell", "data-testid": "q" },
        cut ? t(model, "prefill_decode.cut") : fmt(q[v]), bar(q[v], "good")),
      h("td", { class: "encdec-note encdec-wrap" }, v === chosen ? t(model, q === null ? "prefill_decode.taken" : "prefill_decode.drawn_mark") : ""));
  });
  const T = model.get("temperature");
  const head = h("tr", {}, h("th", {}, t(model, "prefill_decode.th_token")),
    h("th", {}, t(model, q === null ? "prefill_decode.th_p" : "prefill_decode.th_p_temp", { T })),
    q === null ? null : h("th", {}, t(model, "prefill_decode.th_q")), h("th", {}, ""));
  const k = model.get("top_k"), topP = model.get("top_p");
  const what = q === null ? t(model, "prefill_decode.dist_greedy", { token: produced })
    : t(model, "prefill_decode.dist_sample", { T, k: k ?? t(model, "prefill_decode.off"), p: topP ?? t(model, "prefill_decode.off"),
      kept, u: fmt(u, 4), token: produced });
  return h("div", { class: "encdec-panel", "data-testid": "dist", "data-step": s, "data-kept": kept, "data-u": u === null ? null : u },
    h("div", { class: "encdec-label" }, t(model, q === null ? "prefill_decode.dist_title_greedy" : "prefill_decode.dist_title", { s })),
    h("div", { class: "encdec-scroll" }, h("table", { class: "encdec-grid encdec-dist" }, h("thead", {}, head), h("tbody", {}, rowsShown))),
    h("div", { class: "encdec-note", "data-testid": "dist-note" }, what));
}

// The multiply-adds of every step, the current one marked: the prefill pays for the encoder and
// the cross-attention keys and values once; a decode step costs one position's work
function workChart(model, s) {
  const work = model.get("work");
  if (!work.length) return null;
  const most = Math.max(...work.map(([enc, dec]) => enc + dec));
  const mega = (n) => (n / 1e6).toFixed(2);
  return h("div", { class: "encdec-panel", "data-testid": "work" },
    h("div", { class: "encdec-label" }, t(model, "prefill_decode.work_title")),
    h("div", { class: "encdec-note", "data-testid": "work-legend" },
      ...[["enc", t(model, "prefill_decode.work_key_enc")], ["dec", t(model, "prefill_decode.work_key_dec")]].flatMap(([part, words]) =>
        [h("span", { class: `encdec-work-key encdec-work-${part}`, "aria-hidden": "true" }), ` ${words} `])),
    work.map(([enc, dec], k) => h("div", { class: "encdec-work-row" + (k === s - 1 ? " current" : ""), "data-step": k + 1,
      "data-enc": enc, "data-dec": dec },
      h("span", { class: "encdec-work-label" }, t(model, k === 0 ? "prefill_decode.work_prefill" : "prefill_decode.work_step", { s: k + 1 })),
      h("span", { class: "encdec-work-bar" },
        h("span", { class: "encdec-work-enc", style: `width:${(100 * enc) / most}%` }),
        h("span", { class: "encdec-work-dec", style: `width:${(100 * dec) / most}%` })),
      h("span", { class: "encdec-note" }, enc ? t(model, "prefill_decode.work_both", { total: mega(enc + dec), enc: mega(enc) })
        : t(model, "prefill_decode.work_decoder", { total: mega(dec) })))));
}

export function render({ model, el }) {
  const root = widgetRoot(el, "PrefillDecodeStepper");
  const uid = `encdec-stepper-${++stepperCount}`;
  const inPage = () => model.get("preset") !== "";  // a shipped checkpoint: the page can run it
  const fromSite = () => model.get("weights_src") !== "";
  const weights = () => (fromSite() ? window.encdecWeights || {} : model.get("weights"));
  const ready = () => !fromSite() || Boolean(window.encdecWeights);
  const nets = {};
  const net = (preset) => nets[preset] || (nets[preset] = loadModel(weights()[preset]));
  const site = { loading: false, failed: null };  // the site's weights on their way; what went wrong
  let wanted = {}, quiet = false;  // the reader's changes not yet run; no redraw while a run's traits are set

  const go = (delta) => () => {
    const next = Math.max(0, Math.min(model.get("steps").length, model.get("step") + delta));
    push(model, { step: next });
  };
  const back = h("button", { type: "button", class: "encdec-btn", "data-testid": "back", onclick: go(-1) });
  const next = h("button", { type: "button", class: "encdec-btn primary", "data-testid": "next", onclick: go(1) });
  const reset = h("button", { type: "button", class: "encdec-btn", "data-testid": "reset", onclick: () => push(model, { step: 0 }) });
  const label = h("span", { class: "encdec-label", "data-testid": "step-label" });
  const body = h("div", {});
  const settings = settingsControls(model, uid, (changes) => act(changes), () => draw());
  // a figure of a model the page cannot run (the lesson's example, an untrained model) replays only
  if (inPage()) root.append(settings.panel);
  root.append(h("div", { class: "encdec-toolbar" }, back, next, reset, label), body);
  const live = liveRegion(root);

  // A reader's change of setting: the question (text), prefix, preset, mode or a sampling setting. The
  // page runs the model on the new settings, after loading the site's weights on the first change.
  function act(changes) {
    wanted = { ...wanted, ...changes };
    if (ready()) return runInPage();
    if (!site.loading) {
      site.loading = true;
      site.failed = null;
      siteWeights(model.get("weights_src")).then(() => { site.loading = false; runInPage(); },
        (err) => { site.loading = false; site.failed = err; redraw(); });
    }
    redraw();
  }

  function runInPage() {
    const run = pageChanges(model, net, wanted);
    wanted = {};
    site.failed = run.failed || null;
    if (run.changes) {
      quiet = true;  // one redraw for the whole run, not one per trait
      push(model, run.changes);
      quiet = false;
    }
    redraw();
  }

  function draw() {
    if (inPage()) drawSettings(model, settings, act, site);
    const steps = model.get("steps"), s = Math.min(model.get("step"), steps.length);
    back.textContent = t(model, "prefill_decode.back");
    next.textContent = t(model, "prefill_decode.next");
    reset.textContent = t(model, "prefill_decode.reset");
    back.disabled = s === 0; next.disabled = s === steps.length;
    label.textContent = stepLabel(model, s);
    const produced = s === 0 ? null : steps[s - 1];
    const sampled = model.get("mode") === "sample" && model.get("dists").length > 0;
    live.textContent = produced ? t(model, sampled ? "prefill_decode.live_drawn" : "prefill_decode.live", { step: label.textContent, token: produced })
      : label.textContent;
    body.replaceChildren(...stepParts(model, s, inPage()));
  }

  const redrawNow = keepFocus(root, draw);
  const redraw = () => { if (!quiet) redrawNow(); };
  draw();
  return watch(model, ["step", "steps", "prefix", "question", "probs", "dists", "self_cache_lens", "cross_cache_lens", "work",
    "preset", "presets", "mode", "temperature", "top_k", "top_p", "seed", "examples", "source", "weights", "weights_src"], redraw);
}

export default { render };
