"""The misconceptions the exercises' feedback names, one sentence each, in the lesson's words.

Plain text only: the student's own checks (``encdec.grading.checks``) and the grader's judges
(``autograder.judge``) both quote it. Chapters 11-13 teach the correct versions.
"""

from __future__ import annotations

MISCONCEPTIONS = {
    "mask_after_softmax": (
        "mask applied after softmax: the future scores were already in the softmax denominator, "
        "so the allowed weights are too small and rows no longer sum to 1. Mask the scores "
        "(set forbidden ones to a very negative number) before the softmax."
    ),
    "no_mask": (
        "no mask: masked self-attention let answer position i read positions after i (label "
        "leakage). Pass the causal mask to the decoder's self-attention."
    ),
    "mask_inverted": (
        "mask inverted: True means *forbidden*, so the upper triangle (j > i, reader i's future) "
        "must be True; the allowed past was hidden and the future shown."
    ),
    "mask_diagonal": (
        "the diagonal is masked too: reader i may read its own position j = i; only j > i is "
        "the future (torch.triu(..., diagonal=1))."
    ),
    "mask_not_expanded": ("the mask has no batch axis: expand the (K, K) triangle to (N, K, K), one per sequence."),
    "cross_q_from_encoder": (
        "cross-attention Q taken from the encoder (Q/K/V swapped): Q must come from the decoder "
        "state (answer-so-far, length Ka), K and V from the encoder memory (length Kq); with Q "
        "from the encoder the weights are (N, Kq, Ka) and each question position queries the answer."
    ),
    "cross_kv_from_decoder": (
        "cross-attention K/V taken from the decoder: K and V must both be the encoder memory "
        "enc_inp, the 'reference book' every answer position reads."
    ),
    "cross_reads_dec_inp": (
        "cross-attention read the decoder input instead of the self-attention output: its query "
        "must be out_2 = layer_norm_1(dec_inp + out_1), the answer-so-far after masked self-attention."
    ),
    "cross_skipped": (
        "cross-attention skipped: the decoder never reads the question, so the answer cannot depend on it."
    ),
    "residual_1_missing": (
        "a residual is missing around masked self-attention: layer_norm_1 must see dec_inp + out_1, "
        "keeping the identity path."
    ),
    "residual_2_missing": ("a residual is missing around cross-attention: layer_norm_2 must see out_2 + out_3."),
    "residual_3_missing": ("a residual is missing around the MLP: layer_norm_3 must see out_4 + out_5."),
    "prenorm": (
        "norm before the residual (pre-norm): this block is post-norm, "
        "x = LayerNorm(x + sublayer(x)); pre-norm (x + sublayer(LayerNorm(x))) is the modern "
        "variant, not this lesson's block."
    ),
    "norm_inside_residual": (
        "norm before the residual: the sublayer output was normalised and then added to x; the "
        "lesson's block adds the residual first, then normalises: LayerNorm(x + sublayer(x))."
    ),
    "norms_swapped": (
        "layer norms used in the wrong places: layer_norm_1 follows self-attention, layer_norm_2 "
        "cross-attention, layer_norm_3 the MLP (each has its own gain and bias)."
    ),
    "mlp_skipped": (
        "the MLP was skipped: after cross-attention each position goes through feed_forward, "
        "with its own residual and layer_norm_3."
    ),
    "no_shift": (
        "no shift: the decoder input must drop the last answer token (ans_b[:, :-1]) and the "
        "labels drop the first (ans_b[:, 1:]), so position t predicts token t+1."
    ),
    "shift_reversed": (
        "shift reversed: the decoder input is ans_b[:, :-1] (starts with BOS) and the labels are "
        "ans_b[:, 1:] (end with EOS), not the other way round."
    ),
    "labels_not_sliced": (
        "labels not sliced: the labels are ans_b[:, 1:], one per decoder position (N, Ka-1); "
        "the first answer token BOS is never a label."
    ),
    "input_not_sliced": (
        "decoder input not sliced: the last answer token has no successor to predict, so the "
        "decoder input is ans_b[:, :-1]."
    ),
    "labels_not_shifted": (
        "labels not shifted: the loss compared position t with its own input token; the label "
        "of position t is answer token t+1 (ans_b[:, 1:])."
    ),
    "loss_sum": "the loss was summed: use the mean cross-entropy over all N*(Ka-1) positions.",
    "pos_not_sliced": (
        "position encodings not sliced: the decoder input keeps Ka-1 tokens, so it takes the "
        "first Ka-1 positions, ans_pos[:, :-1]."
    ),
    "pos_shifted": (
        "position encodings sliced from the wrong end: token t keeps position t, so the decoder "
        "input adds ans_pos[:, :-1], not ans_pos[:, 1:]."
    ),
    "no_question_positions": (
        "the question's position encodings were not added: q_emb_inp = emb_layer(ques_b) + ques_pos."
    ),
    "mask_from_full_answer": (
        "the mask was built from the unsliced answer: build it from the decoder input "
        "ans_b[:, :-1] so it is (N, Ka-1, Ka-1)."
    ),
    "encoder_every_step": (
        "the encoder re-ran every decoding step: its memory (N, Kq, M) does not change while the "
        "answer grows. Run it once before the loop and reuse it."
    ),
    "no_cache": (
        "no KV cache used: the decoder re-read the whole prefix at every step. With the cache, "
        "feed the whole prefix once (prefill), then only the newest token."
    ),
    "prefix_refed_into_cache": (
        "the whole prefix was fed again while the cache already held it: the cache appended "
        "duplicate keys. After prefill feed only the newest token."
    ),
    "pos_not_advanced": (
        "position encodings not sliced for the new token: the token at step t needs position t "
        "(ans_pos[:, t:t+1]), not position 0."
    ),
    "pos_ahead": (
        "position encodings one ahead: the token fed at step t sits at answer position t "
        "(ans_pos[:, t:t+1]); BOS, fed at step 0, takes position 0."
    ),
    "ignores_done": (
        "a row that had already produced EOS went on decoding: a finished row must keep producing "
        "EOS. Choose every token with the given pick_next(logits, done), which carries the finished "
        "rows from step to step, not with a plain argmax."
    ),
    "cache_overwrites": (
        "each step's self-attention saw only the newest token: the cache kept only the newest keys "
        "and values (update must append along the time axis, torch.cat([...], dim=2), and return "
        "everything cached so far), or the same caches were not passed to every step."
    ),
    "cache_wrong_axis": ("keys and values were appended along the wrong axis: (N, H, T, Dh) grows along T, dim=2."),
    # the stretch: a decoder prefix of P tokens prefilled at once
    "prefill_not_one_call": (
        "the prefix was not fed in one call: the prefill feeds all P prefix positions in one call "
        "of the decoder (with get_subsequent_mask), then one new token a step."
    ),
    "prefill_no_mask": (
        "the prefill ran without the causal mask: the P prefix positions were fed at once, so each "
        "read the prefix tokens after it, and the keys and values cached for it (from the second "
        "decoder layer on) carry the future. Pass get_subsequent_mask(prefix) with the prefill; "
        "a single new token needs none."
    ),
    "prefill_last_only": (
        "the prefill cached only the last prefix position: the cache must hold the keys and values "
        "of all P prefix tokens (feed the whole prefix once, under the causal mask), or the later "
        "steps cannot read the rest of the prefix."
    ),
    "prefill_pos_restarted": (
        "the positions restarted at 0 after the prefill: the prefix takes positions 0..P-1, so the "
        "token fed t steps after the prefill (index P + t - 1) sits at position P + t - 1, "
        "ans_pos[:, P+t-1:P+t]."
    ),
    # the stretch part 4: beam search with the KV cache
    "beam_cache_not_reordered": (
        "the caches were not reordered: a kept beam may extend another beam than the one in its row, "
        "so each decoder layer's self-attention cache must follow it (cache.k.index_select(0, rows), "
        "rows = each kept beam's parent row); otherwise a beam reads another beam's past."
    ),
    "beam_no_length_norm": (
        "no length normalisation: a beam's score is its sum of log-probs divided by "
        "length ** length_penalty (the tokens up to and including EOS); the plain sum favours short answers."
    ),
    "beam_finished_extended": (
        "finished beams were extended: a beam that produced EOS stays a candidate with its score and "
        "length unchanged and is padded with EOS (its one continuation is EOS at no cost), never extended."
    ),
    "mask_transposed": (
        "the mask is transposed: True must sit above the diagonal (j > i, reader i's future); this one "
        "forbids the positions below it, the past, and lets every reader see what comes after it."
    ),
    "mask_offset": (
        "the mask starts too far right: reader i must be forbidden every j > i, but this one still lets "
        "it read one or more positions after itself. Check the triangle's diagonal offset."
    ),
    "mask_from_values": (
        "the mask differed between sequences of the batch: it was built from the token values, but which "
        "positions a reader may see depends only on where they are (i and j), never on what they hold."
    ),
    "mask_not_bool": (
        "the pattern is right but the mask is not boolean: masked_fill and the attention read True as "
        "forbidden, so return a bool tensor (compare, or call .bool())."
    ),
    "softmax_fill_finite": (
        "the masked scores were filled with a finite value before the softmax, so forbidden positions "
        "still got some weight: a forbidden score must become -inf (or a very large negative number) so "
        "that its weight is exactly 0."
    ),
    "softmax_wrong_axis": (
        "the softmax ran over the wrong axis: each reader's weights (one row, the last axis, over the "
        "keys) must sum to 1."
    ),
    "softmax_not_normalised": (
        "the weights have the right proportions in each row but do not sum to 1: the exponentials were "
        "divided by a wrong sum (or by none). The softmax normalises each row over its keys."
    ),
    "softmax_scaled": (
        "the scores were rescaled inside masked_softmax: it takes the scores as they come (the attention "
        "already divided them by sqrt(Dh) once)."
    ),
    "shift_wraps": (
        "the shift wrapped around (torch.roll): a token from one end came back at the other. The shift "
        "drops a token at each end by slicing; nothing wraps."
    ),
    "shift_wrong_axis": (
        "the shift was taken along the batch axis: ans_b is (N, Ka), one answer per row, and the shift "
        "runs along the answer positions (dim 1)."
    ),
    "shift_off_by_one": (
        "the slices are off by one: the decoder input keeps Ka-1 tokens from BOS on and the labels the "
        "Ka-1 tokens after BOS, so each position predicts exactly the next token."
    ),
    "loss_reduction": (
        "the loss was reduced the wrong way: the lesson's loss is one mean over all N*(Ka-1) answer "
        "positions, not a sum or a mean of per-sequence sums."
    ),
    "loss_on_probabilities": (
        "softmax outputs were fed to cross_entropy: it applies log_softmax itself, so it takes raw logits "
        "(probabilities get squashed a second time)."
    ),
    "nll_on_logits": (
        "nll_loss was applied to raw logits: nll_loss expects log-probabilities, so apply log_softmax "
        "first (or use cross_entropy, which does both)."
    ),
    "nll_on_probabilities": (
        "nll_loss was applied to probabilities: it expects log-probabilities (the log is missing), so use "
        "log_softmax rather than softmax."
    ),
    "loss_class_axis": (
        "the class axis was moved with reshape or view: cross_entropy wants the classes on dim 1, and "
        "reshaping (N, Ka-1, V) into (N, V, Ka-1) scrambles positions and classes. Move the axis "
        "(transpose), or flatten both to (N*(Ka-1), V) and (N*(Ka-1),)."
    ),
    "loss_label_smoothing": (
        "the loss used label smoothing: this exercise's loss is the plain cross-entropy of the next token "
        "(smoothing is a training choice, not part of the next-token loss)."
    ),
    "loss_ignores_eos": (
        "some answer positions were left out of the loss (an ignore_index, or a filter on a token): every "
        "position predicts its next token, EOS included, and all of them count."
    ),
    "cache_prepends": (
        "new keys and values were put before the old ones: the cache keeps them in the order of the "
        "positions, oldest first, and appends at the end of the time axis."
    ),
    "cache_kv_swapped": (
        "keys and values were swapped: update returns (keys, values), each grown from its own k_new or v_new."
    ),
    "cache_returns_new": (
        "update stored everything but returned only the new keys and values: attention at this step must "
        "see every position so far, so return the whole cache."
    ),
    "layers_not_chained": (
        "every decoder layer was fed the step's embedding: the layers form a stack, so each one reads the "
        "output of the layer before it (h = layer(h, ...)), and only the first reads the embedding."
    ),
    "memory_without_positions": (
        "the encoder memory was computed without the question's position encodings: the encoder reads "
        "emb_layer(ques_b) + ques_pos, as in training (model.encode adds them)."
    ),
    "one_cache_for_all_layers": (
        "every decoder layer shared one cache: each layer projects its own keys and values, so each needs "
        "its own pair of caches (a list built with * repeats the same objects)."
    ),
    "observed_not_causal": (
        "the future leaked into the past, but the output matches no known mistake: check what "
        "masked self-attention reads (query, key and value are all dec_inp, with the causal "
        "mask) and that nothing mixes the answer positions outside attention."
    ),
    "observed_random": (
        "the modules are in eval mode, so the output must be deterministic: something random ran "
        "(for example F.dropout(x, p) without training=self.training; self.dropout follows the "
        "module's mode)."
    ),
    "observed_lengths_differ": (
        "the answer embeddings and the position encodings were added with different lengths "
        "(Ka and Ka-1): the decoder input keeps Ka-1 positions, so slice both, "
        "emb_layer(ans_b)[:, :-1] and ans_pos[:, :-1]."
    ),
    "ignores_question": (
        "the output did not change when the question changed: the decoder is not reading the "
        "encoder memory through cross-attention."
    ),
    # --- the warm-up (exercise ``warmup``): shapes, the mask by hand, padding, sampling ----------
    "scores_transposed": (
        "the scores are transposed: Q K^T has one row per query and one column per key, (N, H, Lq, Lk); "
        "(N, H, Lk, Lq) is K Q^T."
    ),
    "heads_not_split": (
        "the heads were not split: each of the H heads works on a slice of width Dh = M // H, so Q, K and "
        "V are (N, H, L, M // H), not (N, H, L, M)."
    ),
    "kv_length_from_queries": (
        "K and V were given the queries' length: keys and values come from the sequence being read "
        "(length Lk, in cross-attention the encoder memory), queries from the reader (length Lq)."
    ),
    "heads_not_merged": (
        "the heads were not merged: attention's output joins the H heads back into width M and projects "
        "it, (N, H, Lq, Dh) -> (N, Lq, M), one vector per query position."
    ),
    "heads_after_length": (
        "the heads were split as (N, L, H, Dh), the view before its transpose: this course's attention "
        "(and torch's scaled_dot_product_attention) wants the heads before the length, (N, H, L, Dh), so "
        "that each head multiplies an (L, Dh) block of queries by its keys; view(N, L, H, Dh).transpose(1, 2)."
    ),
    "padding_on_queries": (
        "the padding mask hides query rows instead of key columns: a padding position must not be "
        "*read*, so it is forbidden in the key axis (the last one, j >= length), for every reader."
    ),
    "padding_off_by_one": (
        "the padding mask is off by one: a sequence of length L holds real tokens at positions 0..L-1, "
        "so exactly the key positions j >= L are padding."
    ),
    "padding_inverted": (
        "the padding mask is inverted: True means *forbidden*, so it must be True on the padding "
        "positions (j >= length) and False on the real tokens."
    ),
    "padding_no_head_axis": (
        "the padding mask has no head axis: make it (B, 1, Tq, Tk), so that it broadcasts over the H "
        "heads of the scores (B, H, Tq, Tk)."
    ),
    "sdpa_mask_not_inverted": (
        "the mask kept this course's convention: F.scaled_dot_product_attention's boolean attn_mask is True "
        "where a reader *may* attend, the opposite of ours (True = forbidden), so it is ~mask; passed as it "
        "was, every reader would read only the padding and its future."
    ),
    "masks_combined_with_and": (
        "the two masks were combined with AND: a position is forbidden when it is in the future OR it is "
        "padding (causal | padding), not only when it is both."
    ),
    "temperature_after_softmax": (
        "the temperature was applied after the softmax: divide the logits by T, then take the softmax "
        "(softmax(logits / T)); dividing the probabilities by T changes nothing once they are "
        "renormalised, or leaves rows that do not sum to 1."
    ),
    "top_k_off_by_one": (
        "top-k kept a wrong number of tokens: exactly the k most probable tokens stay (ties aside), "
        "compare with the k-th largest probability using >=."
    ),
    "top_p_crossing_token": (
        "top-p kept the wrong tokens at the boundary: keep the smallest set of most probable tokens whose "
        "mass reaches p, so the token whose probability crosses p stays, and none after it (a token is "
        "kept while the mass ahead of it is below p)."
    ),
    "sampling_not_renormalised": (
        "the kept probabilities were not renormalised: after top-k or top-p removes tokens, divide what "
        "is left by its sum, so that each row sums to 1 again."
    ),
    "top_k_not_renormalised": (
        "what top-k kept was not renormalised (what top-p kept was): divide top-k's kept probabilities by "
        "their sum too, so that the row sums to 1 and top-p reads the running total of a distribution; "
        "renormalising only at the end leaves the mass ahead of each token short, and top-p keeps too many."
    ),
}


def base_name(variant: str) -> str:
    """``norms_swapped_23`` -> ``norms_swapped``: several variants share one misconception."""
    for key in sorted(MISCONCEPTIONS, key=len, reverse=True):
        if variant == key or variant.startswith(key + "_"):
            return key
    return variant
