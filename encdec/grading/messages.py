"""The feedback's words, one table per language (``language`` picks and fills them).

Plain text only: no answer here."""

from .messages_collect import LEFT_BEHIND  # what the exchange's collect left behind: its own table
from .messages_flags import FLAGS  # an integrity flag's words, for the instructor
from .messages_zh import MESSAGES_ZH, TERMS_ZH  # the Chinese table, a file of its own

# Every message a student reads that is not a diagnosis: key -> template (str.format fields). The
# grader's judges (``autograder.judge``) word every sentence from here too, down to the fragments
# the stage-by-stage evidence is built of; code names, shapes and numbers fill the fields as they are.
MESSAGES = {
    "en": {
        "diagnosis": "Diagnosis",
        "observed": "Observed",
        "passed": "passed: {message}",
        "matched": "{title}: {what} matched the reference.",
        "matched_all": "{title}: matched the reference.",
        "shape_only": "{check_id}: {title}: {what} should have shape {shape} with finite values; got shape {got}.",
        "did_not_match": "{check_id}: {title}: {what} did not match the reference.",
        "not_produced": "{check_id}: {title}: {what} was not produced.",
        "not_saved": "{check_id}: {what} was not saved by the check (outputs missing).",
        "expected": "  expected: {desc}",
        "got": "  got:      {desc}",
        "shape_dtype": "shape {shape}, {dtype}",
        "first_mismatch": "first mismatch at index {idx}: expected {exp}, got {got} ({n} of {size} entries differ)",
        "more_failed": "\n({n} more output(s) of this check did not match either.)",
        "dtype_differs": "every value is equal, but the dtype is {got} where {exp} is expected",
        "raised": "{check_id}: {task} raised {msg}",
        "not_implemented": "{check_id}: not implemented yet: {task} still raises NotImplementedError.",
        "not_implemented_hint": " Replace `raise NotImplementedError()` with your code and run the cell again.",
        # the stub that stands for a graded answer in an assessed term's package (autograder/assessed.py)
        "yours_to_write": (
            "{name} is yours to write in the {exercises} exercise of this term: the package of "
            "an assessed term leaves it out, so a cell that calls it stops here (the book shows "
            "what the cell prints)"
        ),
        "did_not_run": (
            "{check_id}: this check did not run to the end (its cell was deleted, the kernel died "
            "or timed out before it, or an earlier error stopped it), so it scores 0."
        ),
        "not_defined": (
            "{check_id}: {name} is not defined in the notebook: the cell that defines it is missing "
            "(deleted, or turned into another kind of cell), so this check could not run and scores 0. "
            "Put that cell back (from a fresh copy of the exercise) with your code in it."
        ),
        # nbgrader validate (encdec.grading.validation): a recorded test cell the notebook no longer has
        "validate_missing": (
            "The test cell {grade_id} ({points} point(s)) is missing from this notebook: it was "
            "deleted, or turned into another kind of cell. The grader puts it back and it scores 0. "
            "Copy it back from a fresh copy of the exercise, or undo the change."
        ),
        "validate_not_defined": (
            "{name} is not defined in the notebook: the cell that defines it is missing (deleted, "
            "or turned into another kind of cell), so the checks that need it cannot run and score 0. "
            "Put that cell back (from a fresh copy of the exercise) with your code in it."
        ),
        # the README of a chapter's exercise download (book/exercise_downloads.py)
        "download_readme": (
            "# Exercise {name}\n\nEverything this exercise needs: the notebook `{name}.ipynb`, the stored "
            "inputs and outputs of its visible checks (`reference/`: keep it next to the notebook) and "
            "`nbgrader_config.py` (with it, `nbgrader validate {name}.ipynb` run in this folder also "
            "reports a test cell that is missing). No solutions.\n\n## Install the course package "
            "(Python 3.11 or newer)\n\n    python -m venv .venv\n    .venv/bin/pip install {wheel} "
            "jupyterlab\n    .venv/bin/jupyter lab\n\n(On Windows: `.venv\\Scripts\\pip` and "
            "`.venv\\Scripts\\jupyter`.) {where}\n\nThen open `{name}.ipynb` in this folder and run it "
            "from top to bottom: each visible check says what matched, what did not and why."
        ),
        "download_wheel_url": (
            "The course package is the student wheel published with the book: {url}. The whole "
            "student release (all four exercises in both languages, with a README) is in the same "
            "folder: {folder}"
        ),
        "download_wheel_by_hand": (
            "The course package is the student wheel `{wheel}` of the course's student release "
            "(your instructor shares it; `make student-release` in the course repository "
            "builds it): put its file name in the command above."
        ),
        "graded_passed": "passed (checked by the grader): {message}",
        "partly_passed": "partly passed (checked by the grader): {score:g} of {points:g} point(s).",
        "part_passed": "  passed: {name}",
        "part_missed": "  missed: {name}",
        "deleted": "This test cell was deleted from the submission, so it scores 0.",
        # a mangled notebook matched to the release before grading (autograder/preprocessors/match_release.py,
        # autograder/handed_in.py); the file handed in is kept as it is
        # the page that stands for a feedback page that could not be made (autograder/feedback.py)
        "feedback_short_page": (
            "Score: {score} / {max_score}. The full feedback page of this notebook could not be "
            "made; your instructor has the details and will send it."
        ),
        "repair_head": "Repaired before grading (the file you handed in is kept as it is):",
        "repair_not_handed_in": (
            "`{file}` was not handed in, so the exercise's notebook with no answers was graded in its "
            "place: every test scores 0. Hand in every notebook of the exercise, under its file name."
        ),
        "repair_unreadable": (
            "The file `{file}` could not be read as a notebook ({error}: cut short, empty or not a "
            "notebook), so the exercise's notebook with no answers was graded in its place: every "
            "test scores 0. Hand in the notebook itself, saved from Jupyter."
        ),
        "repair_too_large": (
            "The file `{file}` is {size_mb} MB, more than the {limit_mb} MB a notebook handed in may "
            "be, so it was not read: the exercise's notebook with no answers was graded in its place "
            "and every test scores 0. Clear large outputs and text, and hand it in again."
        ),
        "repair_too_many_cells": (
            "The file `{file}` has {cells} cells, more than the {limit} a notebook handed in may "
            "have, so it was not read: the exercise's notebook with no answers was graded in its "
            "place and every test scores 0. Remove the extra cells, and hand it in again."
        ),
        "repair_too_many_values": (
            "The file `{file}` has {values} JSON strings, brackets and commas, more than "
            "the {limit} a notebook handed in may have, so it was not read: the exercise's "
            "notebook with no answers was graded in its place and every test scores 0. Clear "
            "the outputs, and hand it in again."
        ),
        "repair_too_deep": (
            "The file `{file}` nests its JSON more than {limit} levels deep, more than a notebook "
            "handed in may, so it was not read: the exercise's notebook with no answers was graded "
            "in its place and every test scores 0. Hand in the notebook itself, saved from Jupyter."
        ),
        "repair_source_too_large": (
            "The cells of `{file}` hold {size_mb} MB of code and text (outputs not counted), "
            "more than the {limit_mb} MB a notebook handed in may hold, so it was not graded: "
            "the exercise's notebook with no answers was graded in its place and every test "
            "scores 0. Remove the large text, and hand it in again."
        ),
        "repair_untyped": (
            "{cells} cell(s) had a `{field}` that is not what a notebook holds (the first: cell "
            "{cell}); it was left out or replaced."
        ),
        "repair_copies": (
            "{copies} notebooks were handed in for `{name}`; `{file}` was graded, the one with the most "
            "answers (on a tie, the first by name), not {others}. Hand in one notebook, under the "
            "exercise's file name."
        ),
        "message_cut": (
            "The kernel sent the grader a message of more than {limit_mb} MB or {limit_frames} parts "
            "({channel}): it was stopped before the grader received it; later cells were not run."
        ),
        "values_cut": (
            "The kernel sent the grader a message of more than {limit_values} JSON values ({channel}): "
            "it was stopped before the grader parsed it; later cells were not run."
        ),
        "unread_cut": (
            "The kernel sent the grader more than {limit_mb} MB in its last few messages on {channel} "
            "together: it was stopped; later cells were not run."
        ),
        "quiet_cut": (
            "The kernel sent the grader more than {limit_kb} KB on {channel}, which grading does not read "
            "(input() is not answered): it was stopped; later cells were not run."
        ),
        "repair_renamed": (
            "The notebook was handed in as `{file}`; it was graded as `{name}`, the exercise's "
            "notebook. Keep the exercise's file name."
        ),
        "repair_schema": (
            "The cell {cell} has nbgrader metadata of an older release (schema version {version}); "
            "the exercise's settings were put in its place."
        ),
        "repair_flags": "The cell {cell} had its nbgrader settings changed ({flags}); the exercise's were put back.",
        "repair_duplicate": (
            "The cell {cell} is in the notebook {copies} more time(s); one cell was graded as "
            "{cell}, the copies ran as ordinary cells."
        ),
        "repair_unknown_cell": (
            "A cell carries the nbgrader id {cell}, which this exercise does not have (copied "
            "from another notebook?); it ran as an ordinary cell."
        ),
        **LEFT_BEHIND["en"],
        **FLAGS["en"],
        # the kernel's own lines (encdec.grading.checks): a hidden check, a missing reference, a graded run
        "hidden_own_run": "hidden check {check_id}: runs on the grader's inputs when the notebook is graded",
        "no_reference": (
            "{check_id}: no inputs for this check. Visible checks read reference/{check_id}.npz next to "
            "the notebook (it comes with the exercise); hidden checks run only when the notebook is graded."
        ),
        "graded_run_done": "ran on the grader's inputs: {check_id} (the grader compares the outputs outside this notebook)",
        # Gradescope's results.json (autograder/gradescope): an item's fallback output, the whole result's notes
        "item_passed": "passed",
        "item_no_output": "no output",
        "held_for_review": "This submission is held for the instructor's review; the score may change.",
        "not_a_notebook": "The notebook could not be graded (is it a valid .ipynb file?). {log}",
        "notebook_not_found": "expected one notebook named {name} in the submission, found {n}: {found}",
        "grading_failed": "Grading failed ({error}); please tell your instructor.",
        "delegation": (
            "{check_id}: your solution called {names}, the package's own implementation of what this "
            "exercise asks you to write. A graded run does not provide it (calling it there raises an "
            "error and the check scores 0): write the code yourself."
        ),
        # the grader's judges (autograder.judge): its own failures, probes, shapes
        "unreadable": "{check_id}: its saved outputs could not be read safely ({error}).",
        "unjudgeable": "{check_id}: the saved outputs could not be judged ({error}).",
        "unknown_check": "{check_id}: unknown check",
        "not_repeatable": "{check_id}: {title}: two runs of {task} on the same inputs gave different outputs.",
        "raised_in": "\n(raised in {inner}, called from your {student})",
        "raised_in_yours": "\n(raised in your {student})",
        "blame_update": "The failure came from your {student}.",
        "blame_shape": (
            "The failure came from KVCache.update: the {name} it returned to the self-attention of "
            "decoder layer {layer} had shape {shape}; a cache holds (N, H, T, Dh) = "
            "({N}, {H}, T, {Dh}) and grows along T (dim=2)."
        ),
        "keys": "keys",
        "values": "values",
        "row_sums": "\n  rows must sum to 1; row sums range from {low} to {high}",
        "block_shape_ok": "{title}: output shape {exp} (N, Ka, M) and finite values.",
        "block_shape_bad": "{check_id}: DecoderBlock output should have shape (N, Ka, M) = {exp} with finite values; got {got}.",
        "block_not_causal": "{check_id}: answer positions 0..{last} changed when only positions {j}.. of dec_inp changed.",
        "block_ignores_memory": "{check_id}: the output did not change when enc_inp changed.",
        "logits_shape_ok": "{title}: logits of shape (N, Ka-1, V) = {exp}.",
        "logits_shape_bad": "{check_id}: logits should have shape (N, Ka-1, V) = {exp}; got {got}.",
        "logits_not_causal": "{check_id}: logits at positions 0..{last} changed when only answer tokens {j}.. changed.",
        "logits_ignore_question": "{check_id}: the logits did not change when the question changed.",
        "observed_step_logits": (
            "\nObserved: the logits of decoding step {step} (row {row}) differ from what the model "
            "gives for the same prefix (your tokens so far, run uncached); the {t} step(s) before it "
            "matched. What step {step} fed the decoder was wrong: the token, its position "
            "(ans_pos[:, {t}:{step}]) or the cached keys and values."
        ),
        "observed_after_eos": (
            "\nObserved: the logits of every step were right, but row {row} had already produced EOS "
            "and then got token {token} at step {step}."
        ),
        "observed_not_argmax": (
            "\nObserved: the logits of every step were right, but at step {step} row {row} got token "
            "{token} where the largest logit is token {best}: greedy decoding picks the argmax "
            "(pick_next)."
        ),
        "ok": "{title}: ok.",
        "over_budget": (
            "{check_id}: {part}: not met: the kernel used {ratio} times the CPU time of the lesson's "
            "decoding on the same inputs; expected at most {allowed} times."
        ),
        "not_measured": "{check_id}: {part}: the grader could not read the kernel's CPU time, so it is not met.",
        "encoder_calls": "{check_id}: the encoder ran {calls} times for one call that decoded {n} tokens; expected exactly once.",
        "decoder_lengths": (
            "{check_id}: the decoder was fed {lens} tokens per step; expected the BOS prefix once, then "
            "1 token per step ([1, 1, 1, ...])."
        ),
        # stage by stage (autograder.judge.stages): what the student's block, model or decoding did
        "stage_supporting": "Stage by stage, the first stage that differs from the lesson's {what} is {stage}",
        "stage_observed": "Observed: the first stage that differs from the lesson's {what} is {stage}",
        "stage_random": "Stage by stage: {stage}",
        "block": "block",
        "model": "model",
        "decoding": "decoding",
        "role": "{module} ({role})",
        "role_attention_self": "masked self-attention",
        "role_layer_norm_1": "the norm after self-attention",
        "role_attention_cross": "cross-attention",
        "role_layer_norm_2": "the norm after cross-attention",
        "role_feed_forward": "the MLP",
        "role_layer_norm_3": "the norm after the MLP",
        "role_encoder": "the encoder stack",
        "role_decoder": "the decoder stack",
        "role_proj_to_vocab": "the projection to the vocabulary",
        "block_mask": "the block's mask",
        "causal_mask_of": "the causal mask of {tokens}",
        "no_mask": "no mask",
        "mask_inverted": "{whose} inverted",
        "mask_other": "a mask of shape {shape} that is not {whose} {expected}",
        "never_called": "{role}: it was never called (as the module self.{module}).",
        "received_mask": "{role}: it received {seen}{moved}; the lesson's {what} gives it {want}.",
        "mask_went_to": " (it went to {module})",
        "not_a_tensor": "{role}: its {arg} was not a tensor.",
        "argument_was": "{role}: its {arg} was {seen}; the lesson's {what} gives it {want} {shape}.",
        "named_tensor": "{name} {shape}",
        "none_of": "a tensor of shape {shape} that is none of {names} or a sum of two of them",
        "tensor_of_shape": "a tensor of shape {shape}",
        "output_of": "{module}'s output",
        "ran_times": "{role}: it ran {n} times; the lesson's {what} calls it once.",
        "returned_was": "the returned output: it was {seen}; the lesson's {what} returns {last}.",
        "random_order": "the two runs called the given parts in a different order ({first}, then {second}).",
        "random_argument": (
            "{module}'s {arg} differed between the two runs: something random ran between "
            "{before} and {module} ({role})."
        ),
        "start_of_forward": "the start of forward",
        "fed_positions": (
            "step {step}: the decoder was fed {n} positions {shape}; with the cache the lesson feeds only "
            "the newest token (one position)."
        ),
        "fed_at": (
            "step {step}: token {t} was fed at position {p} (ans_pos[:, {p}:{p1}]); the lesson's decoding "
            "feeds it at position {t} (ans_pos[:, {t}:{step}])."
        ),
        "fed_nowhere": (
            "step {step}: the decoder's input is emb_layer(token {t}) + ans_pos[:, p:p+1] for no position p; "
            "the lesson's decoding feeds the newest token at position {t}."
        ),
        "cache_before_step": (
            "step {step}, decoder layer {layer}: its self-attention got {got} before the step; the "
            "lesson's cache holds {held}, one per token fed before."
        ),
        "no_cache": "no cache",
        "cache_held": "a cache whose keys cache.k held {held} (time axis, dim 2)",
        "positions_0": "no position",
        "positions_1": "{k} position",
        "positions_n": "{k} positions",
        # the class report's meaning of each kind of outcome (autograder.judge.labels)
        "outcome_passed": "passed",
        "outcome_not_implemented": "not implemented: the function still raises NotImplementedError",
        "outcome_did_not_run": "the check did not run to the end (an earlier error, the kernel died or timed out)",
        "outcome_deleted": "the test cell was deleted from the submission",
        "outcome_package_code": "called the package's own implementation, which is not available in a graded run",
        "outcome_instruments_touched": (
            "integrity flag: the code touched the instruments of an item measured in the "
            "kernel (older gradebooks only: a flag changes no score now)"
        ),
        "outcome_unreadable_outputs": "the outputs the kernel saved could not be read or judged",
        "outcome_raised_in_update": "raised: the failure came from the student's KVCache.update",
        "outcome_raised": "raised an exception that matches no known mistake",
        "outcome_mismatch": "wrong output that matches no known mistake and no observation",
        "outcome_unknown_check": "the test cell names a check the grader does not know",
        "outcome_unlabelled": "graded before verdicts were recorded as keys: no label",
        # the warm-up's checks (autograder/judge/warmup.py): a shape answered, the case a value was judged on
        "shape_answer_bad": "{check_id}: {title}: with {sizes}, the shape of {what} should be {exp}; got {got}.",
        "case_of": "\n  (the case {case})",
    },
    "zh": MESSAGES_ZH,
}
# The words the checks fill into those messages (a check's title, what it compared, the parts of
# an item), English -> the language; a phrase not listed (code, an identifier) stays as it is.
TERMS = {"zh": TERMS_ZH}
