// The generation view's run in the page (prefill_decode.js draws it): one generation of a trained
// checkpoint on any question and forced answer prefix, greedy or sampled, with what each step drew
// from and what it cost. The Python twins are in prefill_decode.py (sample_trace, decode_trace,
// mulberry32, draw_token, step_work; encdec.sampling.sampling_probs); tests/test_model_generation_js.py holds them equal.

import { ANSWER_LEN, BOS_ID, EOS_ID, TOKENS } from "./constants.js";
import { softmax, sum } from "./common.js";
import { checkQuestionIds, decoderPass, embedAnswer, encode, forwardError, linearRows, newDecoderState } from "./model_forward.js";

// The page's seeded random numbers: mulberry32, a 32-bit generator small enough to have a Python twin
// (prefill_decode.py's mulberry32). Its draws are not torch.Generator's: the page and sample_decode draw
// from the same distributions, with different random numbers.
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;  // in [0, 1)
  };
}

// The distribution a sampling step draws from, (V,) from the last position's logits: the twin of
// encdec.sampling.sampling_probs (topK, topP null: not applied). Temperature first (T = 0: a one-hot on
// the greedy token), then top-k (keep the k largest, ties with the k-th kept), then top-p (keep a token
// while the mass ahead of it is short of p); what is kept is renormalised after each cut.
export function samplingProbs(logits, temperature = 1, topK = null, topP = null) {
  const V = logits.length;
  if (temperature === 0) {
    let best = 0;
    for (let v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;  // argmax: first maximum
    return Array.from({ length: V }, (_, v) => (v === best ? 1 : 0));
  }
  let probs = softmax(Array.from(logits, (x) => x / temperature));
  const renorm = (keep) => {
    const kept = probs.map((p, v) => (keep[v] ? p : 0));
    const total = sum(kept);
    return kept.map((p) => p / total);
  };
  if (topK !== null) {
    const kth = [...probs].sort((a, b) => b - a)[Math.min(topK, V) - 1];  // the k-th largest
    probs = renorm(probs.map((p) => p >= kth));
  }
  if (topP !== null) {
    const order = probs.map((_, v) => v).sort((a, b) => probs[b] - probs[a]);  // most probable first
    const keep = new Array(V).fill(false);
    let before = 0;  // the mass of the tokens ahead
    for (const v of order) { keep[v] = before < topP; before += probs[v]; }
    probs = renorm(keep);
  }
  return probs;
}

// The drawn token: the first of the vocabulary whose cumulative probability passes u (inverse CDF);
// the last token with any mass if rounding leaves u beyond the total.
export function drawToken(probs, u) {
  let cum = 0, last = 0;
  for (let v = 0; v < probs.length; v++) {
    if (probs[v] > 0) last = v;
    cum += probs[v];
    if (u < cum) return v;
  }
  return last;
}

// The multiply-adds of one decoder call (and of the encoder at the prefill), from the shapes alone, as
// encdec.widgets._base.watch_greedy counts them through hooks: every linear layer's rows x in x out,
// every attention's scores and weighted values (2 Lq Lk M). t new positions, T cached rows after them.
export function stepWork(config, Kq, t, T, prefill) {
  const M = config.emb_dim, F = config.feedforward_dim, V = config.vocab_size;
  const encoder = prefill ? config.num_enc_layers * (4 * Kq * M * M + 2 * Kq * Kq * M + 2 * Kq * M * F) : 0;
  const perLayer = 4 * t * M * M + 2 * t * T * M  // self-attention: Q, K, V, out; scores and values over T
    + 2 * t * M * M + 2 * t * Kq * M + (prefill ? 2 * Kq * M * M : 0)  // cross: Q, out; over Kq; its K, V once
    + 2 * t * M * F;  // the MLP
  return [encoder, config.num_dec_layers * perLayer + M * V];  // + the readout of the last position
}

// One generation in the page, as the figure shows it: the question's 9 ids, the forced answer prefix
// (P ids, BOS first), then the cached loop of greedyGenerate: the prefill feeds the P tokens at once,
// each decode step the newest one, until EOS or an answer of 5 tokens. Greedy takes the argmax;
// sample draws from samplingProbs with mulberry32(seed). Returns the stepper's traits, the tokens and
// each step's logits (V,).
export function pageRun(net, questionIds, prefixIds, { mode = "greedy", temperature = 1, topK = null, topP = null, seed = 0 } = {}) {
  checkQuestionIds(questionIds);
  const P = prefixIds.length, K = ANSWER_LEN, M = net.M, Kq = questionIds.length;
  if (P < 1 || P >= K || prefixIds[0] !== BOS_ID) throw forwardError("bad_prefix", { prefix: JSON.stringify(prefixIds) });
  const random = mulberry32(seed), sample = mode === "sample";
  const state = newDecoderState(net, encode(net, questionIds));  // the memory and its cross K, V: once
  const tokens = [...prefixIds];
  const out = { steps: [], probs: [], dists: [], self_cache_lens: [], cross_cache_lens: [], work: [], logits: [] };
  for (let s = 0; s < K - P && !tokens.includes(EOS_ID); s++) {
    const T = tokens.length, from = state.fed, t = T - from;
    const pass = decoderPass(net, state, embedAnswer(net, tokens, from, T, K), t);
    const logits = Array.from(linearRows(net.proj_to_vocab, pass.out.subarray((t - 1) * M, t * M), 1));  // (V,)
    const p = softmax(sample && temperature > 0 ? logits.map((x) => x / temperature) : logits);
    let next, q = null, u = null;
    if (sample) {
      q = samplingProbs(logits, temperature, topK, topP);
      u = random();
      next = drawToken(q, u);
    } else {
      next = 0;
      for (let v = 1; v < logits.length; v++) if (logits[v] > logits[next]) next = v;  // argmax: first maximum
    }
    tokens.push(next);
    out.steps.push(TOKENS[next]);
    out.probs.push((q || p)[next]);
    out.dists.push({ p, q, u });
    out.self_cache_lens.push(state.self.map((c) => c.k.length / M));
    out.cross_cache_lens.push(state.cross.map((c) => c.k.length / M));
    out.work.push(stepWork(net.config, Kq, t, T, s === 0));
    out.logits.push(logits);
  }
  return { ...out, tokens };
}
