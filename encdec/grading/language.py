"""The language the checks' feedback speaks: one table of messages per language.

Both sides read it: the student's own run (``checks``, ``selfcheck``, ``compare``) and the grader
(``autograder.judge``, ``autograder.trusted``), so a message and a diagnosis are worded the same
wherever they are shown. English is the default; a release in another language
(``python -m autograder.release --lang zh``) stores its language in the metadata of the visible
checks' reference files and of the notebook, and the run speaks it from there. A notebook can
also choose: ``encdec.grading.language.set_language("zh")``. Plain text only: no answer here.
"""

from __future__ import annotations

import re
import textwrap
from contextlib import contextmanager

from .misconceptions import MISCONCEPTIONS
from .misconceptions_zh import MISCONCEPTIONS_ZH

DEFAULT = "en"

# Every message a student reads that is not a diagnosis: key -> template (str.format fields).
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
        "first_mismatch": "first mismatch at index {idx}: expected {exp}, got {got} ({n} of {size} entries differ)",
        "more_failed": "\n({n} more output(s) of this check did not match either.)",
        "raised": "{check_id}: {task} raised {msg}",
        "not_implemented": "{check_id}: not implemented yet: {task} still raises NotImplementedError.",
        "not_implemented_hint": " Replace `raise NotImplementedError()` with your code and run the cell again.",
        "did_not_run": ("{check_id}: this check did not run to the end (its cell was deleted, the kernel died "
                        "or timed out before it, or an earlier error stopped it), so it scores 0."),
        "graded_passed": "passed (checked by the grader): {message}",
        "partly_passed": "partly passed (checked by the grader): {score:g} of {points:g} point(s).",
        "part_passed": "  passed: {name}",
        "part_missed": "  missed: {name}",
        "deleted": "This test cell was deleted from the submission, so it scores 0.",
        "delegation": ("{check_id}: your solution called {names}, the package's own implementation of what this "
                       "exercise asks you to write. A graded run does not provide it (calling it there raises an "
                       "error and the check scores 0): write the code yourself."),
    },
    "zh": {
        "diagnosis": "诊断",
        "observed": "观察到",
        "passed": "通过：{message}",
        "matched": "{title}：{what} 与参考结果一致。",
        "matched_all": "{title}：与参考结果一致。",
        "shape_only": "{check_id}：{title}：{what} 的形状应为 {shape}，且全部为有限值；实际形状为 {got}。",
        "did_not_match": "{check_id}：{title}：{what} 与参考结果不一致。",
        "not_produced": "{check_id}：{title}：没有得到 {what}。",
        "not_saved": "{check_id}：检查没有保存 {what}（缺少输出）。",
        "expected": "  期望：{desc}",
        "got": "  实际：{desc}",
        "first_mismatch": "第一个不一致的位置是索引 {idx}：期望 {exp}，实际 {got}（{size} 个元素中有 {n} 个不同）",
        "more_failed": "\n（这项检查另有 {n} 个输出也不一致。）",
        "raised": "{check_id}：{task} 抛出了 {msg}",
        "not_implemented": "{check_id}：尚未实现：{task} 仍然抛出 NotImplementedError。",
        "not_implemented_hint": "请把 `raise NotImplementedError()` 换成你的代码，再运行一次这个单元。",
        "did_not_run": ("{check_id}：这项检查没有运行到最后（它的单元被删除了，内核在它之前崩溃或超时，"
                        "或者前面的错误让它停了下来），因此得 0 分。"),
        "graded_passed": "通过（由批改程序检查）：{message}",
        "partly_passed": "部分通过（由批改程序检查）：{points:g} 分中得 {score:g} 分。",
        "part_passed": "  通过：{name}",
        "part_missed": "  未通过：{name}",
        "deleted": "提交中删除了这个测试单元，因此它得 0 分。",
        "delegation": ("{check_id}：你的答案调用了 {names}，这是本练习要你自己写的部分在课程包里的现成实现。"
                       "批改时没有它（在那里调用会抛出错误，这项检查得 0 分）：请自己写出代码。"),
    },
}
# The words the checks fill into those messages (a check's title, what it compared, the parts of
# an item), English -> the language; a phrase not listed (code, an identifier) stays as it is.
TERMS = {
    "zh": {
        "DecoderBlock causality": "DecoderBlock 的因果性",
        "DecoderBlock output shape": "DecoderBlock 的输出形状",
        "DecoderBlock reads the encoder memory": "DecoderBlock 读取编码器记忆",
        "DecoderBlock.forward on fresh weights and sizes": "DecoderBlock.forward（新的权重和尺寸）",
        "Transformer.forward causality": "Transformer.forward 的因果性",
        "Transformer.forward logits shape": "Transformer.forward 的 logits 形状",
        "Transformer.forward on fresh weights and lengths": "Transformer.forward（新的权重和长度）",
        "Transformer.forward reads the question": "Transformer.forward 读取问题",
        "cached greedy decoding on a fresh model": "带缓存的贪心解码（新的模型）",
        "cached greedy decoding, tokens": "带缓存的贪心解码：词元",
        "encoder once and one token per step on a fresh model": "编码器只运行一次、每步一个词元（新的模型）",
        "encoder runs once": "编码器只运行一次",
        "one new token per decoder step": "每个解码步只送入一个新词元",
        "the encoder runs once": "编码器只运行一次",
        "the mask": "掩码",
        "the attention weights": "注意力权重",
        "the block output": "块的输出",
        "the output after changing later answer positions": "改变后面的回答位置之后的输出",
        "the output for a different question memory": "换一个问题记忆时的输出",
        "the generated tokens": "生成的词元",
        "the logits of each decoding step (last position)": "每个解码步（最后一个位置）的 logits",
        "the logits": "logits",
        "the logits after changing later answer tokens": "改变后面的回答词元之后的 logits",
        "the logits for a different question": "换一个问题时的 logits",
        "the loss": "损失",
        "the decoder input dec_in_b": "解码器输入 dec_in_b",
        "the labels labels_b": "标签 labels_b",
        r"the keys after update (\d+)": r"第 \1 次 update 之后的键",
        r"the values after update (\d+)": r"第 \1 次 update 之后的值",
        r"len\(cache\) after update (\d+)": r"第 \1 次 update 之后的 len(cache)",
    },
}
_TERM_FIELDS = ("title", "what", "name")
MISCONCEPTIONS_BY_LANGUAGE = {"en": MISCONCEPTIONS, "zh": MISCONCEPTIONS_ZH}
LANGUAGES = tuple(MESSAGES)

_current = DEFAULT


def set_language(lang: str) -> None:
    """Speak ``lang`` from now on (``"en"``, ``"zh"``)."""
    global _current
    if lang not in MESSAGES:
        raise ValueError(f"no messages in {lang!r}; languages: {', '.join(LANGUAGES)}")
    _current = lang


def current() -> str:
    return _current


@contextmanager
def speaking(lang: str | None):
    """Speak ``lang`` inside the block (``None`` or an unknown language: keep the current one)."""
    global _current
    previous = _current
    if lang in MESSAGES:
        _current = lang
    try:
        yield _current
    finally:
        _current = previous


def text(key: str, **fields) -> str:
    """One message in the current language, its fields filled in (titles, what was compared and
    part names in that language too, where ``TERMS`` has them)."""
    if _current != DEFAULT:
        fields = {k: term(v) if k in _TERM_FIELDS and isinstance(v, str) else v for k, v in fields.items()}
    return MESSAGES[_current][key].format(**fields)


def term(phrase: str) -> str:
    """A check's English phrase in the current language (itself when ``TERMS`` has no entry)."""
    table = TERMS.get(_current, {})
    if phrase in table:
        return table[phrase]
    for english, local in table.items():  # the numbered ones: regular expressions
        if "\\d" in english and re.fullmatch(english, phrase):
            return re.sub(f"^{english}$", local, phrase)
    return phrase


def misconceptions(lang: str | None = None) -> dict[str, str]:
    """The misconception table of ``lang`` (default: the current language)."""
    return MISCONCEPTIONS_BY_LANGUAGE[lang or _current]


def fill(message: str) -> str:
    """``message`` wrapped to 88 columns for feedback (HTML does not wrap), continuation lines
    indented. Chinese breaks between two characters or at a space, never inside code or a number."""
    if _current == DEFAULT:
        return textwrap.fill(message, width=88, subsequent_indent="  ")
    return _fill_cjk(message, 88, "  ")


_CJK = re.compile(r"[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]")
_NO_LINE_START = set("，。：；、！？）》”’")
_UNITS = re.compile(r"\s+|[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]|[^\s\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]+")


def _columns(text: str) -> int:
    return sum(2 if _CJK.match(ch) else 1 for ch in text)


def _fill_cjk(message: str, width: int, indent: str) -> str:
    units = []  # unbreakable pieces: one Chinese character (with the punctuation after it), an ASCII word, a space
    for unit in _UNITS.findall(" ".join(message.split())):
        if units and (unit in _NO_LINE_START or (not unit.isspace() and not units[-1].isspace()
                                                   and not _CJK.match(unit[0]) and not _CJK.match(units[-1][-1]))):
            units[-1] += unit
        else:
            units.append(unit)
    lines, line = [], ""
    for unit in units:
        if line and _columns(line) + _columns(unit) > width:
            lines.append(line.rstrip())
            line = indent
            if unit.isspace():
                continue
        line += unit
    lines.append(line.rstrip())
    return "\n".join(lines)


def diagnosis_line(key: str) -> str:
    """'\\nDiagnosis: ...' (or 'Observed: ...' for an ``observed_`` key), wrapped; key must be known."""
    head = text("observed" if key.startswith("observed_") else "diagnosis")
    sep = "：" if _current == "zh" else ": "
    return "\n" + fill(f"{head}{sep}{misconceptions()[key]}")
