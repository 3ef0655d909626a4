// QuickCheck: questions the page marks itself. A click on an option, or a typed number and
// Check, is marked right or wrong here in the browser (as encdec.widgets.quick_check.is_right).

import { h, keepFocus, liveRegion, push, t, watch, widgetRoot } from "./common.js";

export function isRight(q, response) {
  if (response === null || response === undefined || response === "") return null;
  if (q.kind === "choice") return Number(response) === q.answer;
  const text = String(response).trim().replace(/^\+/, "");
  if (!/^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text)) return null;  // what Python's float() reads
  const x = Number(text);
  if (!Number.isFinite(x)) return null;
  return Math.abs(x - q.answer) <= q.tolerance + 1e-9 * Math.max(1, Math.abs(q.answer));
}

// `code` spans of a prompt or explanation become <code>; the rest stays text.
export function richText(text) {
  return String(text).split("`").map((part, k) => (k % 2 ? h("code", {}, part) : part));
}

export function numberText(x) {
  return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(6)));
}

// The line under a question (as encdec.widgets.quick_check.QuickCheck.status says it in Python).
export function statusText(model, state, response) {
  if (state === "right") return t(model, "quick_check.status_right");
  if (state === "wrong") return t(model, "quick_check.status_wrong");
  if (state === "revealed") return t(model, "quick_check.status_revealed");
  return response !== null && response !== undefined && response !== "" ? t(model, "quick_check.status_not_a_number") : "";
}

export function render({ model, el }) {
  const root = widgetRoot(el, "QuickCheck");
  const body = h("div", {});
  root.append(body);
  const live = liveRegion(root);
  const typed = {};  // number questions: the text in each box, kept across redraws

  function setAt(name, i, value) {
    const next = model.get(name).slice();
    next[i] = value;
    push(model, { [name]: next });
    const q = model.get("questions")[i], response = model.get("responses")[i] ?? null, verdict = isRight(q, response);
    const state = model.get("revealed")[i] ? "revealed" : verdict === null ? "unanswered" : verdict ? "right" : "wrong";
    live.textContent = t(model, "quick_check.live", { n: i + 1, status: statusText(model, state, response), score: scoreText() });
  }

  function scoreText() {
    const questions = model.get("questions"), responses = model.get("responses");
    const right = questions.filter((q, i) => isRight(q, responses[i] ?? null) === true).length;
    return t(model, "quick_check.score", { right, total: questions.length });
  }

  function question(q, i, response, revealed) {
    const verdict = isRight(q, response);
    const state = revealed ? "revealed" : verdict === null ? "unanswered" : verdict ? "right" : "wrong";
    let body;
    if (q.kind === "choice") {
      body = h("div", { class: "encdec-qc-options", role: "group" }, q.options.map((opt, j) => {
        const chosen = response !== null && Number(response) === j;
        const mark = chosen ? (j === q.answer ? " right" : " wrong") : (revealed && j === q.answer ? " right" : "");
        return h("button", { class: "encdec-btn encdec-qc-option" + mark, "data-option": j, "aria-pressed": chosen,
          onclick: () => setAt("responses", i, j) }, h("span", { class: "encdec-qc-mark" }, mark ? (mark === " wrong" ? "✗" : "✓") : ""),
          richText(opt));
      }));
    } else {
      const input = h("input", { type: "text", inputmode: "decimal", class: "encdec-qc-number", "data-testid": `number-${i}`,
        "aria-label": t(model, "quick_check.your_answer"), value: typed[i] ?? (response ?? "") });
      const check = () => { typed[i] = input.value; setAt("responses", i, input.value.trim()); };
      input.addEventListener("input", () => { typed[i] = input.value; });
      input.addEventListener("keydown", (e) => { if (e.key === "Enter") check(); });
      body = h("div", { class: "encdec-qc-options" }, input,
        h("button", { class: "encdec-btn", "data-testid": `check-${i}`, onclick: check }, t(model, "quick_check.check")),
        revealed ? h("span", { class: "encdec-qc-answer" },
          t(model, "quick_check.answer", { answer: h("b", {}, numberText(q.answer)) }),
          q.tolerance > 0 ? ` (± ${numberText(q.tolerance)})` : "") : null);
    }
    const status = statusText(model, state, response);
    const open = state === "right" || state === "revealed";
    return h("div", { class: `encdec-qc-question ${state}`, "data-question": i, "data-state": state },
      h("div", { class: "encdec-qc-prompt" }, h("span", { class: "encdec-idx" }, `${i + 1}. `), richText(q.prompt)),
      body,
      h("div", { class: "encdec-qc-foot" },
        h("span", { class: "encdec-qc-status", "data-testid": `status-${i}` }, status),
        state === "wrong" ? h("button", { class: "encdec-btn", "data-testid": `reveal-${i}`,
          onclick: () => setAt("revealed", i, true) }, t(model, "quick_check.show_answer")) : null),
      open && q.explain ? h("div", { class: "encdec-qc-explain", "data-testid": `explain-${i}` }, richText(q.explain)) : null);
  }

  function draw() {
    const questions = model.get("questions"), responses = model.get("responses"), revealed = model.get("revealed");
    body.replaceChildren(
      h("div", { class: "encdec-toolbar" },
        h("span", { class: "encdec-label" }, model.get("title") || t(model, "quick_check.title")),
        h("span", { class: "encdec-note", "data-testid": "score" }, scoreText())),
      ...questions.map((q, i) => question(q, i, responses[i] ?? null, Boolean(revealed[i]))));
  }

  draw();
  return watch(model, ["questions", "responses", "revealed", "title"], keepFocus(root, draw));
}

export default { render };
