// The task's questions and the site's weights, shared by the figures that run the trained model
// (ask_model.js, break_it.js): token ids of a question and of its right answer, what a reader typed,
// and the one weights script of the built site, loaded once on a reader's first request.

import { BOS_ID, EOS_ID, OPERAND_MAX, OP_IDS, QUESTION_LEN, SIGN_IDS, TOKENS } from "./constants.js";
import { checkQuestionIds } from "./model_forward.js";

// The question ids of one operand: sign and two digits (zero is POSITIVE 00).
export function operandIds(value) {
  const a = Math.abs(value);
  return [value < 0 ? SIGN_IDS.NEGATIVE : SIGN_IDS.POSITIVE, Math.floor(a / 10), a % 10];
}

// What the reader typed -> { ids } (the 9 question ids) or { error, values } (a code the table words).
// The codes: no_text, bad_format (not a question of the task), out_of_range (an operand beyond ±49).
// "-30 - -34", "12 + 7", "12 add -7", "−30 subtract −34", or the tokens "NEGATIVE 30 subtract NEGATIVE 34"
// with or without BOS and EOS. The twin of ask_model.parse_question.
export function parseQuestion(text) {
  const clean = String(text ?? "").replace(/[\u2212\u2013]/g, "-").trim();
  if (!clean) return { error: "no_text", values: {} };
  const arith = clean.match(/^([+-]?)\s*(\d+)\s*(\+|-|add|subtract)\s*([+-]?)\s*(\d+)$/i);
  if (arith) {
    const [, sa, da, op, sb, db] = arith;
    const a = (sa === "-" ? -1 : 1) * Number(da), b = (sb === "-" ? -1 : 1) * Number(db);
    for (const [value, digits] of [[a, da], [b, db]]) {
      if (digits.length > 2 || Math.abs(value) > OPERAND_MAX) return { error: "out_of_range", values: { value: `${value}` } };
    }
    const opId = op === "+" || op.toLowerCase() === "add" ? OP_IDS.add : OP_IDS.subtract;
    return { ids: [BOS_ID, ...operandIds(a), opId, ...operandIds(b), EOS_ID] };
  }
  let words = clean.split(/\s+/).map((word) => TOKENS.find((tok) => tok.toLowerCase() === word.toLowerCase()) ?? word);
  if (words[0] !== "BOS") words = ["BOS", ...words];
  if (words[words.length - 1] !== "EOS") words = [...words, "EOS"];
  const ids = [];
  for (const word of words) {
    if (TOKENS.includes(word)) ids.push(TOKENS.indexOf(word));
    else if (/^\d{1,2}$/.test(word)) ids.push(...[...word].map(Number));
    else if (/^\d+$/.test(word)) return { error: "out_of_range", values: { value: word } };
    else return { error: "bad_format", values: { text: clean } };
  }
  try {
    return { ids: checkQuestionIds(ids) };
  } catch (err) {
    if (ids.length === QUESTION_LEN) {
      for (const k of [2, 6]) {  // a well-formed operand above 49
        const value = 10 * ids[k] + ids[k + 1];
        if (ids[k] <= 9 && ids[k + 1] <= 9 && value > OPERAND_MAX) {
          return { error: "out_of_range", values: { value: `${ids[k - 1] === SIGN_IDS.NEGATIVE ? "-" : ""}${value}` } };
        }
      }
    }
    return { error: "bad_format", values: { text: clean } };
  }
}

// The right answer's ids for question ids: BOS sign d d EOS.
export function trueAnswer(ids) {
  const operand = (k) => (ids[k] === SIGN_IDS.NEGATIVE ? -1 : 1) * (10 * ids[k + 1] + ids[k + 2]);
  const value = ids[4] === OP_IDS.add ? operand(1) + operand(5) : operand(1) - operand(5);
  return [BOS_ID, ...operandIds(value), EOS_ID];
}

// The weights: a figure's own (a notebook), or, in the built book, one script per site (weights_src,
// relative to the site's root: a classic <script> loads from file://), loaded once, and only when the
// reader first asks a model something: until then the page carries none of it.
export function siteWeights(src) {
  if (window.encdecWeights) return Promise.resolve(window.encdecWeights);
  if (!window.encdecWeightsLoading) {
    const root = document.documentElement.dataset.content_root || "";
    window.encdecWeightsLoading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = root + src;
      script.onload = () => resolve(window.encdecWeightsReady || window.encdecWeights || {});
      script.onerror = () => reject(new Error(script.src));
      document.head.appendChild(script);
    });
  }
  return window.encdecWeightsLoading;
}
