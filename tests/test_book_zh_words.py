"""The Chinese edition's words (issue 51): rules a reader of the Chinese edition checks by eye, held
here where they can be stated mechanically. Source checks only: nothing is built or executed.

- division is said 除以 (logits 除以温度 T), never 去除, which reads "remove";
- the arithmetic question is 题目, the glossary's word; 问题 only in its own senses (a problem, a
  question a section asks the reader), never for the model's input;
- a glossary word for the query and key sides (查询/键), not the calques 读取方/来源/读者;
- full-width punctuation in Chinese sentences: no ASCII comma, colon or semicolon between two
  Chinese characters, no ASCII parentheses around Chinese words;
- every comment of a code cell a reader sees on a Chinese page is in Chinese (book/zh/strings/).
(The padding mask's one name is the glossary's ``avoid`` list, held by tests/test_book_zh.py.)
"""

from __future__ import annotations

import ast
import json
import re

import pytest
import yaml
from test_book_zh import CHINESE_TEXTS, GLOSSARY, ROOT, ZH, prose, zh_sync

HAN = r"[\u4e00-\u9fff]"
# Other words for one thing: the word the edition uses instead.
NOT_SAID = {
    "去除": "除以（logits 除以温度 T）或去掉",
    "读取方(?!式)": "查询（查询位置）",
    "读者": "查询（查询位置）",
    "保有概率": "保留的概率",
    "保留了概率": "的概率被保留",
}
# 问题 where it means a problem or a question put to the reader (a section's title, a recall or
# transfer question), never the model's input: each allowed use, with its surroundings.
PROBLEM = re.compile(r"## 问题：|迁移问题|回忆问题|什么问题|不同的问题|出什么问题")
QUESTION_WORD = "题目"


def texts() -> list[tuple[str, str]]:
    """(file, a text a reader reads) of every Chinese text: a page's prose, each Chinese string
    literal of the code and tables (display strings, widget strings, grading words, exercises),
    the glossary's Chinese definitions."""
    out = [("book/glossary.yml", f"{t['zh']}：{t['zh_def']}") for t in GLOSSARY]
    for path in CHINESE_TEXTS:
        name, raw = str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
        if path.suffix == ".md":
            out.append((name, prose(raw)))
        elif path.suffix == ".py":
            out += [
                (name, n.value)
                for n in ast.walk(ast.parse(raw))
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(HAN, n.value)
            ]
        elif path.suffix == ".json":
            out += [(name, s) for s in json_strings(json.loads(raw))]
        elif path.parent.name == "strings":  # fragments of code: what they print, their {fields} blanked
            out += [(name, re.sub(r"\{[^{}]*\}", " ", zh)) for zh in yaml.safe_load(raw).values()]
        else:  # an exercise's markdown
            data = yaml.safe_load(raw)
            out += [(name, prose(s)) for s in json_strings(data)]
    return out


def json_strings(data) -> list[str]:
    if isinstance(data, str):
        return [data]
    items = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    return [s for v in items for s in json_strings(v)]


def test_the_rules_catch_what_they_forbid():
    """Each rule on a sample of what it was written against (so a rule that matches nothing fails)."""
    assert list(offences("应先用 T 去除 logits")) == ["去除"]
    assert offences("每个读取方一行，读取方式不同") == ["读取方(?!式)"] and not offences("读取方式")
    assert question_offences("编码器读取问题：9 个问题词元") == ["读取问题：", " 个问题词"]
    assert question_offences("## 问题：一组表示不够用\n## 迁移问题") == []
    assert ascii_punctuation("每行之和为 1, 然后:再算") == ["1, 然", "后:再"]
    assert ascii_punctuation("形状 (N, Kq, M)；T = {T}, top-k {k}") == []
    assert ascii_punctuation('读取 (每个头一个)；P(答案 | 题目, BOS)；("标签", x)') == ["(每个头一个)"]
    assert ascii_punctuation("  (所有头: ") == ["头:", "(所"]
    assert english_comments(
        [
            "```{code-cell} ipython3\nx = 1  # (N, K): each row by itself\ny = 2  # (N, K)\n"
            "z = 3  # 每一行单独运行\nw = 4  # step 1\n```"
        ]
    ) == ["(N, K): each row by itself", "step 1"]


def offences(text: str) -> list[str]:
    return [w for w in NOT_SAID if re.search(w, text)]


def question_offences(text: str) -> list[str]:
    bare = PROBLEM.sub(" ", text)
    return [bare[max(0, m.start() - 2) : m.end() + 1] for m in re.finditer("问题", bare)]


def ascii_punctuation(text: str) -> list[str]:
    """ASCII commas, colons and semicolons next to a Chinese character; ASCII parentheses around Chinese."""
    paren = r"(?<![A-Za-z])\((?![\"'])"  # not a call, a probability P(答案 | 题目) or a tuple ("标签", x)
    sentences = re.sub(r"(?<=[A-Za-z])\([^()\n]*\)", " ", text)  # P(4 | 题目, BOS): notation, not a sentence
    return re.findall(rf"{HAN}\s*[,:;]\S?|\S?[,:;]\s*{HAN}", sentences) + re.findall(
        rf"{paren}[^()\n]*{HAN}[^()\n]*\)|{paren}{HAN}", text
    )


@pytest.mark.parametrize("path", sorted({p for p, _ in texts()}))
def test_chinese_texts_say_things_one_way(path):
    wrong = []
    for name, text in texts():
        if name != path:
            continue
        wrong += [f"{w} (say {NOT_SAID[w]})" for w in offences(text)]
        if not name.startswith("book/zh/") or name.startswith("book/zh/strings/"):
            wrong += [
                f"问题 in ...{w}... (the model's question is {QUESTION_WORD})"
                for w in re.findall(".{0,6}问题.{0,4}", text)
            ]
        else:
            wrong += [f"问题 in ...{w}... (the model's question is {QUESTION_WORD})" for w in question_offences(text)]
        wrong += [f"ASCII punctuation in Chinese: {w!r}" for w in ascii_punctuation(text)]
    assert not wrong, f"{path}: " + "; ".join(wrong[:8])


HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}  # cells a reader does not see open


def english_comments(cells: list[str]) -> list[str]:
    """The comments of the shown cells in English: an English word, no Chinese (a shape alone may stay)."""
    found = []
    for cell in cells:
        tags = re.search(r"^:tags:\s*\[(.*?)\]", cell, re.M)
        if tags and HIDDEN & {t.strip() for t in tags.group(1).split(",")}:
            continue
        for line in cell.splitlines()[1:-1]:
            comment = re.search(r"(?:^|\s)#\s?(.*)$", line)
            if not comment or re.search(HAN, comment.group(1)):
                continue
            words = re.sub(r"`[^`]*`|\([^()]*\)", " ", comment.group(1))  # code and shapes, (N, Kq, M), stay
            if re.search(r"(?<![\w.`])[A-Za-z]{3,}(?![\w(`])", words):
                found.append(comment.group(1))
    return found


@pytest.mark.parametrize("page", sorted(p.stem for p in ZH.glob("*.md")))
def test_shown_code_comments_are_in_chinese(page):
    """As d2l-zh does: the comments a reader of a Chinese page sees are Chinese, translated in
    book/zh/strings/<page>.yml like the strings the code prints (book/zh_sync.py)."""
    left = english_comments(zh_sync.code_cells((ZH / f"{page}.md").read_text(encoding="utf-8")))
    assert not left, f"book/zh/{page}.md: {len(left)} English comments, e.g. {left[:3]}"
