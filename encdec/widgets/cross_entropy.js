// CrossEntropySlider: P(correct) -> loss -log p, and the gradient p - one_hot for each token.

import { fmt, h, liveRegion, push, t, watch, widgetRoot } from "./common.js";

export function ceExample(vocab, correct, rival, pCorrect, pRef, rivalRef) {
  // The worked example: at P(correct) = pRef the rival has rivalRef and the other tokens share
  // the rest evenly; other P(correct) rescale the wrong tokens in those proportions.
  const scale = (1 - pCorrect) / (1 - pRef);
  const others = vocab.length - 2;
  const probs = vocab.map((tok) => tok === correct ? pCorrect
    : tok === rival ? rivalRef * scale : ((1 - pRef - rivalRef) / others) * scale);
  const grad = probs.map((p, k) => p - (vocab[k] === correct ? 1 : 0));
  return { probs, grad, loss: -Math.log(pCorrect) };
}

export function render({ model, el }) {
  const root = widgetRoot(el, "CrossEntropySlider");
  const slider = h("input", { type: "range", min: 0.01, max: 0.99, step: 0.01, "data-testid": "p-slider" });
  slider.addEventListener("input", () => push(model, { p_correct: Number(slider.value) }));
  const pValue = h("b", { "data-testid": "p-value" });
  const sliderLabel = h("span", {});
  const body = h("div", {});
  root.append(h("div", { class: "encdec-toolbar" }, h("label", {}, sliderLabel, " ", slider, " ", pValue)), body);
  const live = liveRegion(root);
  let current = null;  // the token whose bar the readout describes (hovered, tapped or chosen with the arrow keys)

  function draw() {
    const vocab = model.get("vocab"), correct = model.get("correct"), rival = model.get("rival");
    const p = model.get("p_correct");
    if (Number(slider.value) !== p) slider.value = p;
    pValue.textContent = fmt(p, 2);
    sliderLabel.textContent = t(model, "cross_entropy.slider_label", { token: correct });
    slider.setAttribute("aria-label", t(model, "cross_entropy.slider_aria"));
    const ex = ceExample(vocab, correct, rival, p, model.get("p_reference"), model.get("rival_reference"));

    const W = 620, H = 230, top = 20, mid = 110, scaleY = 85, colW = W / vocab.length;
    const svgNS = "http://www.w3.org/2000/svg";
    const s = (tag, attrs, text) => {
      const e = document.createElementNS(svgNS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      return e;
    };
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", class: "encdec-svg", role: "img", tabindex: 0,
      "aria-label": t(model, "cross_entropy.svg_aria"), "data-testid": "bars" });
    const barText = (k) => t(model, "cross_entropy.bar_title", { token: vocab[k], p: fmt(ex.probs[k]), grad: fmt(ex.grad[k]) });
    if (current === null || current >= vocab.length) current = vocab.indexOf(correct);
    const readout = h("div", { class: "encdec-info", "data-testid": "readout" }, barText(current));
    const rects = [];
    const pick = (k) => {
      current = k;
      readout.textContent = live.textContent = barText(k);
      rects.forEach((rect, r) => rect.classList.toggle("current", r === k));
    };
    svg.addEventListener("keydown", (e) => {
      const k = { ArrowLeft: current - 1, ArrowDown: current - 1, ArrowRight: current + 1, ArrowUp: current + 1,
        Home: 0, End: vocab.length - 1 }[e.key];
      if (k === undefined) return;
      e.preventDefault();
      pick(Math.max(0, Math.min(vocab.length - 1, k)));
    });
    svg.append(s("line", { x1: 0, x2: W, y1: mid, y2: mid, class: "axis" }));
    svg.append(s("text", { x: 4, y: top - 6, class: "tick" }, "+1"), s("text", { x: 4, y: mid + scaleY + 12, class: "tick" }, "−1"));
    vocab.forEach((tok, k) => {
      const g = ex.grad[k];
      const x = k * colW + colW * 0.2, w = colW * 0.6;
      const y = g >= 0 ? mid - g * scaleY : mid, hgt = Math.max(Math.abs(g) * scaleY, 0.5);
      const rect = s("rect", { x, y, width: w, height: hgt, class: (g < 0 ? "neg" : "pos") + (k === current ? " current" : ""), "data-token": tok });
      rect.addEventListener("mouseenter", () => pick(k));
      rect.addEventListener("click", () => pick(k));
      rects.push(rect);
      svg.append(rect);
      svg.append(s("text", { x: k * colW + colW / 2, y: H - 8, class: "label" + (tok === correct ? " correct" : ""), "text-anchor": "middle" },
        tok.length > 4 ? tok.slice(0, 3) + "." : tok));
      if (tok === correct || tok === rival) {
        svg.append(s("text", { x: k * colW + colW / 2, y: g >= 0 ? y - 4 : y + hgt + 12, class: "value", "text-anchor": "middle",
          "data-testid": `grad-${tok}` }, fmt(g)));
      }
    });

    body.replaceChildren(
      h("div", { class: "encdec-columns" },
        h("div", { class: "encdec-big" },
          t(model, "cross_entropy.loss", { p: fmt(p, 2), loss: h("b", { "data-testid": "loss" }, fmt(ex.loss)) })),
        h("div", { class: "encdec-note" }, t(model, "cross_entropy.rival_note", {
          rival, p_rival: h("span", { "data-testid": `prob-${rival}` }, fmt(ex.probs[vocab.indexOf(rival)])),
          n: vocab.length - 2, rest: fmt(1 - p - ex.probs[vocab.indexOf(rival)]) }))),
      svg,
      readout,
      h("p", { class: "encdec-caption" },
        t(model, "cross_entropy.caption", { token: correct, grad: h("b", {}, fmt(ex.grad[vocab.indexOf(correct)])) })));
    live.textContent = t(model, "cross_entropy.live", { p: fmt(p, 2), loss: fmt(ex.loss), token: correct,
      grad: fmt(ex.grad[vocab.indexOf(correct)]) });
  }

  draw();
  return watch(model, ["p_correct", "vocab", "correct", "rival"], draw);
}

export default { render };
