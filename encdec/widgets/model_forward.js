// The trained encoder–decoder's forward pass in the browser (chapter 13): the twin of encdec/model.py
// and encdec/generate.py, run on weights that encdec/widgets/export_weights.py exports. Shared by every
// figure that runs a model in the page (each imports what it uses; the bundle step joins them).
// Plain functions on Float64Arrays: a sequence of K vectors of width M is one flat array (K, M).
// Letters as in the lesson: Kq question length, Ka answer length, M width, H heads, Dh = M / H,
// V vocabulary, F the MLP's hidden width. Errors carry a code and values (forwardError); the figure
// words them from its string table.

import { ANSWER_LEN, BOS_ID, EOS_ID, OPERAND_MAX, QUESTION_LAYOUT, QUESTION_LEN } from "./constants.js";

const LAYER_NORM_EPS = 1e-5;  // torch.nn.LayerNorm's default

export function forwardError(code, values = {}) {
  const err = new Error(code);
  err.code = code;
  err.values = values;
  return err;
}

// An export's float32 data (little-endian bytes) as Float32Array, read whatever the machine's order:
// the bytes are the base64 `data` of an export, or the site's script's unpacked `bytes` (site_weights.js).
export function exportedFloats(exported) {
  const bytes = exported.bytes || Uint8Array.from(atob(exported.data), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(4 * i, true);
  return out;
}

// One exported checkpoint -> the model's parameters under the lesson's names (encdec/model.py).
export function loadModel(exported) {
  const unpacked = exported && exported.bytes instanceof Uint8Array;  // the site's script (site_weights.js)
  if (!exported || exported.format !== 1 || !exported.config || (typeof exported.data !== "string" && !unpacked)) {
    throw forwardError("bad_weights", { format: exported && exported.format });
  }
  const floats = exportedFloats(exported);
  const index = new Map(exported.tensors.map(([name, shape, offset]) => [name, { shape, offset }]));
  const get = (name) => {
    const entry = index.get(name);
    if (!entry) throw forwardError("missing_tensor", { name });
    const n = entry.shape.reduce((a, b) => a * b, 1);
    return Float64Array.from(floats.subarray(entry.offset, entry.offset + n));
  };
  const linear = (p) => {  // nn.Linear: W (out, in) row-major, b (out,)
    const W = get(p + ".weight"), b = get(p + ".bias");
    return { W, b, out: b.length, inp: W.length / b.length };
  };
  const attention = (p) => ({ q_proj: linear(p + ".q_proj"), k_proj: linear(p + ".k_proj"),
    v_proj: linear(p + ".v_proj"), out_proj: linear(p + ".out_proj") });
  const norm = (p) => ({ weight: get(p + ".weight"), bias: get(p + ".bias") });
  const mlp = (p) => ({ linear_1: linear(p + ".linear_1"), linear_2: linear(p + ".linear_2") });
  const c = exported.config;
  const range = (n) => Array.from({ length: n }, (_, l) => l);
  const block = (stack, l) => `${stack}.layers.${l}.`;  // "encoder.layers.0." ...
  return {
    preset: exported.preset, config: c,
    M: c.emb_dim, H: c.num_heads, Dh: c.emb_dim / c.num_heads, V: c.vocab_size,
    emb_layer: get("emb_layer.weight"),  // (V, M)
    encoder: range(c.num_enc_layers).map((l) => {
      const p = block("encoder", l);
      return { attention_self: attention(p + "attention_self"), layer_norm_1: norm(p + "layer_norm_1"),
        feed_forward: mlp(p + "feed_forward"), layer_norm_2: norm(p + "layer_norm_2") };
    }),
    decoder: range(c.num_dec_layers).map((l) => {
      const p = block("decoder", l);
      return { attention_self: attention(p + "attention_self"), layer_norm_1: norm(p + "layer_norm_1"),
        attention_cross: attention(p + "attention_cross"), layer_norm_2: norm(p + "layer_norm_2"),
        feed_forward: mlp(p + "feed_forward"), layer_norm_3: norm(p + "layer_norm_3") };
    }),
    proj_to_vocab: linear("proj_to_vocab"),
    positionTables: new Map(),
  };
}

// The model's position encoding for a sequence of length K: (K, M), as Transformer.positions.
export function positions(model, K) {
  if (!model.positionTables.has(K)) {
    const M = model.M, out = new Float64Array(K * M), kind = model.config.position_encoding;
    for (let p = 0; p < K; p++) {
      for (let j = 0; j < M; j++) {
        if (kind === "simple") out[p * M + j] = Math.fround(p / K);  // n / K in every feature
        else {
          // sin at 2i, cos at 2i + 1, both of p / 10000^(2i / M), rounded to float32 at each step as
          // position_encoding_sinusoid computes them (the model was trained on those values)
          const f = Math.fround, twoI = j - (j % 2);
          const angle = f(p / f(10000 ** f(twoI / M)));
          out[p * M + j] = f(j % 2 === 0 ? Math.sin(angle) : Math.cos(angle));
        }
      }
    }
    if (kind !== "simple" && kind !== "sinusoid") throw forwardError("bad_positions", { kind });
    model.positionTables.set(K, out);
  }
  return model.positionTables.get(K);
}

// x (K, inp) -> (K, out): every row times W^T plus b (nn.Linear). Two rows and four outputs at a
// time: eight independent sums keep the processor busy and each weight is read once for two rows
// (every sum still adds its terms in order).
export function linearRows(lin, x, K) {
  const { W, b, out: O, inp: I } = lin;
  const y = new Float64Array(K * O);
  const O4 = O - (O % 4);
  let r = 0;
  for (; r + 1 < K; r += 2) {
    const xa = r * I, xb = xa + I, ya = r * O, yb = ya + O;
    for (let o = 0; o < O4; o += 4) {
      const w0 = o * I, w1 = w0 + I, w2 = w1 + I, w3 = w2 + I;
      let a0 = b[o], a1 = b[o + 1], a2 = b[o + 2], a3 = b[o + 3];
      let b0 = a0, b1 = a1, b2 = a2, b3 = a3;
      for (let i = 0; i < I; i++) {
        const p = x[xa + i], q = x[xb + i];
        const u0 = W[w0 + i], u1 = W[w1 + i], u2 = W[w2 + i], u3 = W[w3 + i];
        a0 += u0 * p; a1 += u1 * p; a2 += u2 * p; a3 += u3 * p;
        b0 += u0 * q; b1 += u1 * q; b2 += u2 * q; b3 += u3 * q;
      }
      y[ya + o] = a0; y[ya + o + 1] = a1; y[ya + o + 2] = a2; y[ya + o + 3] = a3;
      y[yb + o] = b0; y[yb + o + 1] = b1; y[yb + o + 2] = b2; y[yb + o + 3] = b3;
    }
  }
  for (; r < K; r++) {  // the last row of an odd count
    const xo = r * I, yo = r * O;
    for (let o = 0; o < O4; o += 4) {
      const w0 = o * I, w1 = w0 + I, w2 = w1 + I, w3 = w2 + I;
      let s0 = b[o], s1 = b[o + 1], s2 = b[o + 2], s3 = b[o + 3];
      for (let i = 0; i < I; i++) {
        const xi = x[xo + i];
        s0 += W[w0 + i] * xi; s1 += W[w1 + i] * xi; s2 += W[w2 + i] * xi; s3 += W[w3 + i] * xi;
      }
      y[yo + o] = s0; y[yo + o + 1] = s1; y[yo + o + 2] = s2; y[yo + o + 3] = s3;
    }
  }
  for (let o = O4; o < O; o++) {  // outputs beyond a multiple of four
    for (let rr = 0; rr < K; rr++) {
      let s = b[o];
      for (let i = 0; i < I; i++) s += W[o * I + i] * x[rr * I + i];
      y[rr * O + o] = s;
    }
  }
  return y;
}

// LayerNorm(a + b) row by row: the post-norm residual (biased variance, as torch).
export function addNorm(norm, a, b, K, M) {
  const y = new Float64Array(K * M);
  for (let r = 0; r < K; r++) {
    const o = r * M;
    let mean = 0;
    for (let j = 0; j < M; j++) { y[o + j] = a[o + j] + b[o + j]; mean += y[o + j]; }
    mean /= M;
    let v = 0;
    for (let j = 0; j < M; j++) { const d = y[o + j] - mean; v += d * d; }
    const scale = 1 / Math.sqrt(v / M + LAYER_NORM_EPS);
    for (let j = 0; j < M; j++) y[o + j] = (y[o + j] - mean) * scale * norm.weight[j] + norm.bias[j];
  }
  return y;
}

// The position-wise MLP: Linear(M, F) -> ReLU -> Linear(F, M). (K, M) -> (K, M).
export function feedForward(ff, x, K) {
  const hidden = linearRows(ff.linear_1, x, K);  // (K, F)
  for (let i = 0; i < hidden.length; i++) if (hidden[i] < 0) hidden[i] = 0;
  return linearRows(ff.linear_2, hidden, K);  // (K, M)
}

// softmax(Q K^T / sqrt(Dh)) V per head, then out_proj. q (Lq, M) projected queries; k, v (Lk, M)
// projected keys and values; query i may read keys j <= limit + i (limit = Infinity: no mask).
// Returns the output (Lq, M) and the weights (H, Lq, Lk).
export function attend(att, model, q, k, v, Lq, Lk, limit) {
  const { M, H, Dh } = model;
  const scale = 1 / Math.sqrt(Dh);
  const heads = new Float64Array(Lq * M);  // (Lq, H, Dh) = (Lq, M) before out_proj
  const weights = new Float64Array(H * Lq * Lk);
  const scores = new Float64Array(Lk);
  for (let hd = 0; hd < H; hd++) {
    const c0 = hd * Dh;
    for (let i = 0; i < Lq; i++) {
      const last = Math.min(Lk - 1, limit + i);  // mask before softmax: the future leaves the denominator
      let top = -Infinity;
      for (let j = 0; j <= last; j++) {
        let s = 0;
        for (let d = 0; d < Dh; d++) s += q[i * M + c0 + d] * k[j * M + c0 + d];
        scores[j] = s * scale;
        if (scores[j] > top) top = scores[j];
      }
      let total = 0;
      for (let j = 0; j <= last; j++) { scores[j] = Math.exp(scores[j] - top); total += scores[j]; }
      const w0 = (hd * Lq + i) * Lk;
      for (let j = 0; j <= last; j++) {
        const w = scores[j] / total;
        weights[w0 + j] = w;
        for (let d = 0; d < Dh; d++) heads[i * M + c0 + d] += w * v[j * M + c0 + d];
      }
    }
  }
  return { out: linearRows(att.out_proj, heads, Lq), weights };
}

// Question ids (Kq,) -> encoder memory (Kq, M): embedding + positions, then every EncoderBlock.
export function encode(model, ids) {
  const K = ids.length, M = model.M;
  const pos = positions(model, K);
  let x = new Float64Array(K * M);  // (Kq, M)
  ids.forEach((id, r) => { for (let j = 0; j < M; j++) x[r * M + j] = model.emb_layer[id * M + j] + pos[r * M + j]; });
  for (const layer of model.encoder) {
    const a = layer.attention_self;
    const q = linearRows(a.q_proj, x, K), k = linearRows(a.k_proj, x, K), v = linearRows(a.v_proj, x, K);
    const out_1 = attend(a, model, q, k, v, K, K, Infinity).out;  // every question position reads every other
    const out_2 = addNorm(layer.layer_norm_1, x, out_1, K, M);
    x = addNorm(layer.layer_norm_2, out_2, feedForward(layer.feed_forward, out_2, K), K, M);
  }
  return x;
}

// Decoder caches for one question: per layer the self-attention K, V rows decoded so far (empty), and
// the cross-attention K, V of the memory, projected once here and fixed after (KVCache(static=True)).
export function newDecoderState(model, memory) {
  const Kq = memory.length / model.M;
  return {
    Kq, fed: 0, memory,
    self: model.decoder.map(() => ({ k: new Float64Array(0), v: new Float64Array(0) })),  // (T, M) each
    cross: model.decoder.map((layer) => ({ k: linearRows(layer.attention_cross.k_proj, memory, Kq),
      v: linearRows(layer.attention_cross.v_proj, memory, Kq) })),  // (Kq, M) each
  };
}

export function concatRows(a, b) {
  const out = new Float64Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

// The pieces a decoding is made of, under the lesson's names: what BreakIt swaps one of, as
// encdec/broken.py swaps a module's forward (break_it.js). Each attention returns { out, weights }.
export const INTACT = {
  // the answer tokens ids[from..to) embedded at their positions of an answer of length K: (to - from, M)
  embed: (model, ids, from, to, K) => embedAnswer(model, ids, from, to, K),
  // a decoder layer's masked self-attention: query i of the t new reads the cached rows up to before + i
  attentionSelf: (a, model, q, k, v, t, T, before) => attend(a, model, q, k, v, t, T, before),
  // its cross-attention: Q from the answer-so-far out_2 (t, M), K and V the memory's, projected once
  attentionCross: (c, model, out_2, state, l, t) => attend(c, model, linearRows(c.q_proj, out_2, t),
    state.cross[l].k, state.cross[l].v, t, state.Kq, Infinity),
};

// One decoder call: x (t, M) holds the embedded tokens of the positions state.fed .. state.fed + t - 1;
// their K, V join the self-attention caches, and each new position reads the cached rows and the new
// ones up to itself (the causal mask). Returns the final states (t, M) and, per layer, the weights.
export function decoderPass(model, state, x, t, pieces = INTACT) {
  const M = model.M, before = state.fed;
  const selfWeights = [], crossWeights = [];
  model.decoder.forEach((layer, l) => {
    const a = layer.attention_self, cache = state.self[l];
    const q = linearRows(a.q_proj, x, t);  // (t, M)
    cache.k = concatRows(cache.k, linearRows(a.k_proj, x, t));  // (T, M) + (t, M) -> (T + t, M)
    cache.v = concatRows(cache.v, linearRows(a.v_proj, x, t));
    const T = before + t;
    const self = pieces.attentionSelf(a, model, q, cache.k, cache.v, t, T, before);  // weights (H, t, T)
    const out_2 = addNorm(layer.layer_norm_1, x, self.out, t, M);  // answer-so-far
    const cross = pieces.attentionCross(layer.attention_cross, model, out_2, state, l, t);  // weights (H, t, Kq)
    const out_4 = addNorm(layer.layer_norm_2, out_2, cross.out, t, M);  // + what the question says
    x = addNorm(layer.layer_norm_3, out_4, feedForward(layer.feed_forward, out_4, t), t, M);
    selfWeights.push(self.weights);
    crossWeights.push(cross.weights);
  });
  state.fed = before + t;
  return { out: x, selfWeights, crossWeights };
}

// Embed answer tokens ids[from..to) at their positions of an answer of length K: (to - from, M).
export function embedAnswer(model, ids, from, to, K) {
  const M = model.M, pos = positions(model, K), x = new Float64Array((to - from) * M);
  for (let r = from; r < to; r++) {
    for (let j = 0; j < M; j++) x[(r - from) * M + j] = model.emb_layer[ids[r] * M + j] + pos[r * M + j];
  }
  return x;
}

// Row r of a (H, Lq, Lk) weights array: per head, reader r's weights over the Lk sources.
export function weightRow(weights, H, Lq, Lk, r) {
  return Array.from({ length: H }, (_, hd) => Array.from(weights.subarray((hd * Lq + r) * Lk, (hd * Lq + r + 1) * Lk)));
}

// A question must be the task's 9 ids: BOS sign d d op sign d d EOS (QUESTION_LAYOUT, from
// encdec.data), operands within -49..49.
export function checkQuestionIds(ids) {
  const ok = Array.isArray(ids) && ids.length === QUESTION_LEN && ids.every((id, i) => QUESTION_LAYOUT[i].includes(id))
    && 10 * ids[2] + ids[3] <= OPERAND_MAX && 10 * ids[6] + ids[7] <= OPERAND_MAX;
  if (!ok) throw forwardError("bad_question_ids", { ids: JSON.stringify(ids) });
  return ids;
}

// Greedy generation as encdec.generate.greedy_decode: the encoder once; the prefill feeds the prefix
// (P tokens, BOS alone by default) in one pass; each decode step feeds the newest token; stop at EOS or
// after maxNewTokens. Positions are those of an answer of length P + maxNewTokens (5, as in training).
// useCache = false re-runs the whole prefix at every step (fresh caches), as greedy_decode does;
// `pieces` the decoding's pieces (INTACT, or one swapped: BreakIt).
// Returns the tokens (prefix + produced, up to the first EOS) and per step what it fed and computed.
export function greedyGenerate(model, questionIds,
  { prefix = [BOS_ID], useCache = true, maxNewTokens = null, record = true, pieces = INTACT } = {}) {
  checkQuestionIds(questionIds);
  if (!Array.isArray(prefix) || prefix.length < 1 || prefix[0] !== BOS_ID
    || !prefix.every((id) => Number.isInteger(id) && id >= 0 && id < model.V)) {
    throw forwardError("bad_prefix", { prefix: JSON.stringify(prefix) });
  }
  const P = prefix.length;
  const n = maxNewTokens === null ? Math.max(0, ANSWER_LEN - P) : maxNewTokens;
  const K = P + n;  // the answer length whose positions the decoder uses
  const memory = encode(model, questionIds);  // (Kq, M): once, fixed for every step
  let state = newDecoderState(model, memory);
  const tokens = [...prefix], steps = [];
  let computed = 0;
  for (let s = 0; s < n && !tokens.includes(EOS_ID); s++) {
    const T = tokens.length;
    // no cache: the whole prefix again, from empty self-attention caches (the memory's cross K, V are
    // the same numbers at every step: projected once)
    if (!useCache && s > 0) state = { ...state, fed: 0, self: state.self.map(() => ({ k: new Float64Array(0), v: new Float64Array(0) })) };
    const from = state.fed;
    const x = pieces.embed(model, tokens, from, T, K);  // (T - from, M)
    const pass = decoderPass(model, state, x, T - from, pieces);
    const t = T - from, M = model.M;
    const logits = linearRows(model.proj_to_vocab, pass.out.subarray((t - 1) * M, t * M), 1);  // (V,): last position
    let next = 0;
    for (let v = 1; v < logits.length; v++) if (logits[v] > logits[next]) next = v;  // argmax: first maximum
    computed += t;
    if (record) {
      steps.push({
        fed: tokens.slice(from, T), positions: Array.from({ length: t }, (_, i) => from + i),
        logits: Array.from(logits), next, computed: t, computedTotal: computed,
        selfRows: state.self.map((c) => c.k.length / M),
        cross: pass.crossWeights.map((w) => weightRow(w, model.H, t, state.Kq, t - 1)),  // [layer][head][Kq]
        self: pass.selfWeights.map((w) => weightRow(w, model.H, t, T, t - 1)),  // [layer][head][T]
      });
    }
    tokens.push(next);
  }
  return { tokens, steps, positionsComputed: computed };
}

// Teacher forcing (Transformer.forward): the true answer shifted right in one pass under the causal mask;
// per position the logits (V,) of the next token. answerIds has Ka tokens; Ka - 1 rows come back.
export function teacherForced(model, questionIds, answerIds) {
  checkQuestionIds(questionIds);
  const Ka = answerIds.length, t = Ka - 1, M = model.M;
  const state = newDecoderState(model, encode(model, questionIds));
  const out = decoderPass(model, state, embedAnswer(model, answerIds, 0, t, Ka), t).out;  // (Ka - 1, M)
  const logits = linearRows(model.proj_to_vocab, out, t);  // (Ka - 1, V)
  return Array.from({ length: t }, (_, r) => Array.from(logits.subarray(r * model.V, (r + 1) * model.V)));
}
