// The built book's weights script (encdec/widgets/export_weights.py writes it: this code, then the
// packed exports): sets window.encdecWeights to {preset: export} once the weights are unpacked, and
// window.encdecWeightsReady to the promise of it. Packed: each export's float32 data, little-endian,
// as four byte planes (every float's first bytes, then its second bytes...), compressed with
// deflate and written as base64; byte planes compress where interleaved floats do not. The
// browser's own DecompressionStream inflates them, from file:// too; each export then carries its
// bytes in their first order (`bytes`), which model_forward.js reads as floats as it reads `data`.
// The floats are the trained ones, bit for bit (tests/test_browser_ask_model.py asks both models
// every question).
async function encdecUnpackWeights(packed) {
  const out = {};
  for (const [preset, p] of Object.entries(packed)) {
    const bin = atob(p.data);
    const deflated = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const stream = new Blob([deflated]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
    const planes = new Uint8Array(await new Response(stream).arrayBuffer());
    const n = planes.length / 4;
    const bytes = new Uint8Array(planes.length);
    for (let b = 0; b < 4; b++) for (let i = 0; i < n; i++) bytes[4 * i + b] = planes[b * n + i];
    out[preset] = { format: 1, preset: p.preset, config: p.config, tensors: p.tensors, bytes };
  }
  window.encdecWeights = out;
  return out;
}
