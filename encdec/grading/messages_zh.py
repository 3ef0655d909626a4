"""The feedback's words in Chinese: ``messages.MESSAGES["zh"]`` and ``messages.TERMS["zh"]``, under the
English table's keys (``tests/test_feedback_zh.py`` holds the two tables to the same keys and fields).

Plain text only: no answer here."""

from .messages_collect import LEFT_BEHIND
from .messages_flags import FLAGS

MESSAGES_ZH = {
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
    "shape_dtype": "形状 {shape}，{dtype}",
    "first_mismatch": "第一个不一致的位置是索引 {idx}：期望 {exp}，实际 {got}（{size} 个元素中有 {n} 个不同）",
    "more_failed": "\n（这项检查另有 {n} 个输出也不一致。）",
    "dtype_differs": "所有的值都相等，但数据类型是 {got}，而应当是 {exp}",
    "raised": "{check_id}：{task} 抛出了 {msg}",
    "not_implemented": "{check_id}：尚未实现：{task} 仍然抛出 NotImplementedError。",
    "not_implemented_hint": "请把 `raise NotImplementedError()` 换成你的代码，再运行一次这个单元。",
    "yours_to_write": (
        "{name} 要你在本学期的 {exercises} 练习里自己写：计分学期的课程包里没有它，"
        "所以调用它的单元在这里停下（书中的页面给出了这个单元的输出）"
    ),
    "did_not_run": (
        "{check_id}：这项检查没有运行到最后（它的单元被删除了，内核在它之前崩溃或超时，"
        "或者前面的错误让它停了下来），因此得 0 分。"
    ),
    "not_defined": (
        "{check_id}：notebook 中没有定义 {name}：定义它的单元不见了（被删除，或者被改成了另一种单元），"
        "所以这项检查无法运行，得 0 分。请把那个单元放回去（从练习的一份新副本中复制），并在其中写上你的代码。"
    ),
    "validate_missing": (
        "测试单元 {grade_id}（{points} 分）不在这个 notebook 中了：它被删除了，或者被改成了另一种单元。"
        "批改时会把它放回去，但它得 0 分。请从练习的一份新副本中把它复制回来，或者撤销这个改动。"
    ),
    "validate_not_defined": (
        "notebook 中没有定义 {name}：定义它的单元不见了（被删除，或者被改成了另一种单元），"
        "所以需要它的检查无法运行，得 0 分。请把那个单元放回去（从练习的一份新副本中复制），并在其中写上你的代码。"
    ),
    "download_readme": (
        "# 练习 {name}\n\n这个练习需要的一切：notebook `{name}.ipynb`、它的可见检查存储的输入和输出"
        "（`reference/`：请让它与 notebook 放在一起），以及 `nbgrader_config.py`（有了它，在这个文件夹中运行 "
        "`nbgrader validate {name}.ipynb` 还会报告缺失的测试单元）。其中没有参考答案。\n\n## 安装课程包"
        "（Python 3.11 或更新版本）\n\n    python -m venv .venv\n    .venv/bin/pip install {wheel} "
        "jupyterlab\n    .venv/bin/jupyter lab\n\n（Windows 上：`.venv\\Scripts\\pip` 和 "
        "`.venv\\Scripts\\jupyter`。）{where}\n\n然后在这个文件夹中打开 `{name}.ipynb`，从上到下运行："
        "每项可见检查都会说明哪些一致、哪些不一致以及原因。"
    ),
    "download_wheel_url": "课程包是随本书发布的学生版 wheel：{url}。完整的学生发布包（全部四个练习的中英文版，附 README）在同一个文件夹中：{folder}",
    "download_wheel_by_hand": (
        "课程包是课程学生版中的 wheel 文件 `{wheel}`（由教师提供；在课程仓库中运行 "
        "`make student-release` 可以生成它）：请把它的文件名填入上面的命令。"
    ),
    "graded_passed": "通过（由批改程序检查）：{message}",
    "partly_passed": "部分通过（由批改程序检查）：{points:g} 分中得 {score:g} 分。",
    "part_passed": "  通过：{name}",
    "part_missed": "  未通过：{name}",
    "deleted": "提交中删除了这个测试单元，因此它得 0 分。",
    "feedback_short_page": "得分：{score} / {max_score}。这份笔记本的完整反馈页无法生成；老师那里有详细情况，会再发给你。",
    "repair_head": "批改前做了修复（你提交的文件原样保留）：",
    "repair_not_handed_in": "没有提交 `{file}`，因此改为批改没有作答的练习笔记本：每个测试都得 0 分。请按练习的文件名提交练习的每个笔记本。",
    "repair_unreadable": (
        "文件 `{file}` 无法作为笔记本读取（{error}：被截断、为空或不是笔记本），因此改为批改"
        "没有作答的练习笔记本：每个测试都得 0 分。请提交从 Jupyter 保存的笔记本本身。"
    ),
    "repair_too_large": (
        "文件 `{file}` 大小为 {size_mb} MB，超过了提交的笔记本最多 {limit_mb} MB 的限制，因此没有"
        "读取它：改为批改没有作答的练习笔记本，每个测试都得 0 分。请清除过大的输出和文本后重新提交。"
    ),
    "repair_too_many_cells": (
        "文件 `{file}` 有 {cells} 个单元，超过了提交的笔记本最多 {limit} 个单元的限制，因此"
        "没有读取它：改为批改没有作答的练习笔记本，每个测试都得 0 分。请删除多余的单元后重新提交。"
    ),
    "repair_too_many_values": (
        "文件 `{file}` 含有 {values} 个 JSON 字符串、括号和逗号，超过了提交的笔记本最多 {limit} 个的限制，因此没有"
        "读取它：改为批改没有作答的练习笔记本，每个测试都得 0 分。请清除输出后重新提交。"
    ),
    "repair_too_deep": (
        "文件 `{file}` 的 JSON 嵌套超过 {limit} 层，超过了提交的笔记本允许的深度，因此没有读取它："
        "改为批改没有作答的练习笔记本，每个测试都得 0 分。请提交从 Jupyter 保存的笔记本本身。"
    ),
    "repair_source_too_large": (
        "`{file}` 的单元中有 {size_mb} MB 的代码和文本（不计输出），超过了提交的笔记本最多 "
        "{limit_mb} MB 的限制，因此没有批改它：改为批改没有作答的练习笔记本，每个测试都得 0 分。"
        "请删除过大的文本后重新提交。"
    ),
    "repair_untyped": "有 {cells} 个单元的 `{field}` 不是笔记本应有的内容（第一个：第 {cell} 个单元）；它被略去或替换。",
    "repair_copies": (
        "为 `{name}` 提交了 {copies} 个笔记本；批改的是 `{file}`，即作答最多的一个（相同时取文件名在前的），"
        "而不是 {others}。请只提交一个笔记本，并使用练习的文件名。"
    ),
    "message_cut": (
        "内核向批改程序发送了超过 {limit_mb} MB 或 {limit_frames} 个部分的消息（{channel}）：在批改程序"
        "收到之前已将其停止；后面的单元没有运行。"
    ),
    "values_cut": (
        "内核向批改程序发送了一条超过 {limit_values} 个 JSON 值的消息（{channel}）：在批改程序解析之前"
        "已将其停止；后面的单元没有运行。"
    ),
    "unread_cut": (
        "内核在 {channel} 上向批改程序发送的最近几条消息合计超过了 {limit_mb} MB：已将其停止；后面的单元没有运行。"
    ),
    "quiet_cut": (
        "内核在批改时不读取的 {channel} 上向批改程序发送了超过 {limit_kb} KB 的数据（input() 不会得到回答）："
        "已将其停止；后面的单元没有运行。"
    ),
    "repair_renamed": "笔记本以 `{file}` 的名字提交；它被当作练习的笔记本 `{name}` 批改。请保留练习的文件名。",
    "repair_schema": "单元 {cell} 带有旧版发布的 nbgrader 元数据（模式版本 {version}）；已换成练习的设置。",
    "repair_flags": "单元 {cell} 的 nbgrader 设置被改动（{flags}）；已恢复为练习的设置。",
    "repair_duplicate": "单元 {cell} 在笔记本中多出现了 {copies} 次；只有一个单元按 {cell} 批改，副本作为普通单元运行。",
    "repair_unknown_cell": "有一个单元带有 nbgrader 编号 {cell}，而本练习没有这个编号（从别的笔记本复制的？）；它作为普通单元运行。",
    **LEFT_BEHIND["zh"],
    **FLAGS["zh"],
    "hidden_own_run": "隐藏检查 {check_id}：批改 notebook 时在批改程序的输入上运行",
    "no_reference": (
        "{check_id}：这项检查没有输入。可见检查读取 notebook 旁边的 reference/{check_id}.npz"
        "（它随练习一起发放）；隐藏检查只在批改 notebook 时运行。"
    ),
    "graded_run_done": "已在批改程序的输入上运行：{check_id}（批改程序在这个 notebook 之外比较输出）",
    "item_passed": "通过",
    "item_no_output": "没有输出",
    "held_for_review": "这份提交留待教师复核；分数可能会改变。",
    "not_a_notebook": "这个 notebook 无法批改（它是有效的 .ipynb 文件吗？）。{log}",
    "notebook_not_found": "提交中应当恰好有一个名为 {name} 的 notebook，实际找到 {n} 个：{found}",
    "grading_failed": "批改失败（{error}）；请告诉你的教师。",
    "delegation": (
        "{check_id}：你的答案调用了 {names}，这是本练习要你自己写的部分在课程包里的现成实现。"
        "批改时没有它（在那里调用会抛出错误，这项检查得 0 分）：请自己写出代码。"
    ),
    "unreadable": "{check_id}：无法安全地读取它保存的输出（{error}）。",
    "unjudgeable": "{check_id}：无法评判保存的输出（{error}）。",
    "unknown_check": "{check_id}：未知的检查",
    "not_repeatable": "{check_id}：{title}：在同样的输入上运行两次 {task}，得到的输出不同。",
    "raised_in": "\n（在 {inner} 中抛出，由你的 {student} 调用）",
    "raised_in_yours": "\n（在你的 {student} 中抛出）",
    "blame_update": "失败来自你的 {student}。",
    "blame_shape": (
        "失败来自 KVCache.update：它返回给第 {layer} 个解码器层自注意力的{name}形状为 {shape}；"
        "缓存存放的是 (N, H, T, Dh) = ({N}, {H}, T, {Dh})，并沿 T 增长（dim=2）。"
    ),
    "keys": "键",
    "values": "值",
    "row_sums": "\n  每一行之和必须为 1；各行之和在 {low} 到 {high} 之间",
    "block_shape_ok": "{title}：输出形状为 {exp} (N, Ka, M)，且全部为有限值。",
    "block_shape_bad": "{check_id}：DecoderBlock 的输出形状应为 (N, Ka, M) = {exp}，且全部为有限值；实际为 {got}。",
    "block_not_causal": "{check_id}：只改变了 dec_inp 的位置 {j}.. 之后，答案位置 0..{last} 的输出也变了。",
    "block_ignores_memory": "{check_id}：改变 enc_inp 之后，输出没有变化。",
    "logits_shape_ok": "{title}：logits 的形状为 (N, Ka-1, V) = {exp}。",
    "logits_shape_bad": "{check_id}：logits 的形状应为 (N, Ka-1, V) = {exp}；实际为 {got}。",
    "logits_not_causal": "{check_id}：只改变了答案词元 {j}.. 之后，位置 0..{last} 的 logits 也变了。",
    "logits_ignore_question": "{check_id}：改变题目之后，logits 没有变化。",
    "observed_step_logits": (
        "\n观察到：第 {step} 个解码步（第 {row} 行）的 logits 与模型在同一前缀上给出的不同"
        "（用你到此为止的词元、不带缓存地运行）；它之前的 {t} 步都一致。第 {step} 步送入解码器的东西"
        "有误：词元、它的位置（ans_pos[:, {t}:{step}]）或缓存的键和值。"
    ),
    "observed_after_eos": "\n观察到：每一步的 logits 都正确，但第 {row} 行已经生成了 EOS，之后在第 {step} 步又得到词元 {token}。",
    "observed_not_argmax": (
        "\n观察到：每一步的 logits 都正确，但在第 {step} 步第 {row} 行得到词元 {token}，"
        "而最大的 logit 属于词元 {best}：贪心解码选取 argmax（pick_next）。"
    ),
    "ok": "{title}：正确。",
    "over_budget": "{check_id}：{part}：未满足：在相同输入上，内核用掉的 CPU 时间是课程解码的 {ratio} 倍；应当至多 {allowed} 倍。",
    "not_measured": "{check_id}：{part}：批改程序读不到内核的 CPU 时间，因此未满足。",
    "encoder_calls": "{check_id}：一次解码 {n} 个词元的调用中，编码器运行了 {calls} 次；应当只运行一次。",
    "decoder_lengths": (
        "{check_id}：每步送入解码器的词元数为 {lens}；应当先送入一次 BOS 前缀，之后每步 1 个词元（[1, 1, 1, ...]）。"
    ),
    "stage_supporting": "逐阶段看，与课程的{what}第一处不同的阶段是 {stage}",
    "stage_observed": "观察到：与课程的{what}第一处不同的阶段是 {stage}",
    "stage_random": "逐阶段看：{stage}",
    "block": "块",
    "model": "模型",
    "decoding": "解码",
    "role": "{module}（{role}）",
    "role_attention_self": "带掩码的自注意力",
    "role_layer_norm_1": "自注意力之后的层归一化",
    "role_attention_cross": "交叉注意力",
    "role_layer_norm_2": "交叉注意力之后的层归一化",
    "role_feed_forward": "前馈网络",
    "role_layer_norm_3": "前馈网络之后的层归一化",
    "role_encoder": "编码器栈",
    "role_decoder": "解码器栈",
    "role_proj_to_vocab": "到词表的投影",
    "block_mask": "块的掩码",
    "causal_mask_of": "{tokens} 的因果掩码",
    "no_mask": "没有掩码",
    "mask_inverted": "取反的{whose}",
    "mask_other": "一个形状为 {shape} 的掩码，它不是{whose} {expected}",
    "never_called": "{role}：它从未被调用（作为模块 self.{module}）。",
    "received_mask": "{role}：它收到的掩码：{seen}{moved}；课程的{what}给它的掩码：{want}。",
    "mask_went_to": "（它给了 {module}）",
    "not_a_tensor": "{role}：它的 {arg} 不是张量。",
    "argument_was": "{role}：它的 {arg} 是 {seen}；课程的{what}给它的是 {want} {shape}。",
    "named_tensor": "{name} {shape}",
    "none_of": "一个形状为 {shape} 的张量，它不是 {names} 中的任何一个，也不是其中两个之和",
    "tensor_of_shape": "一个形状为 {shape} 的张量",
    "output_of": "{module} 的输出",
    "ran_times": "{role}：它运行了 {n} 次；课程的{what}只调用它一次。",
    "returned_was": "返回的输出：它是 {seen}；课程的{what}返回 {last}。",
    "random_order": "两次运行调用给定部分的顺序不同（先 {first}，后 {second}）。",
    "random_argument": "两次运行中 {module} 的 {arg} 不同：在 {before} 与 {module}（{role}）之间运行了随机的操作。",
    "start_of_forward": "forward 的开头",
    "fed_positions": "第 {step} 步：送入解码器的是 {n} 个位置 {shape}；有了缓存，课程只送入最新的词元（一个位置）。",
    "fed_at": (
        "第 {step} 步：词元 {t} 被放在位置 {p}（ans_pos[:, {p}:{p1}]）送入；课程的解码把它放在位置 {t}"
        "（ans_pos[:, {t}:{step}]）。"
    ),
    "fed_nowhere": (
        "第 {step} 步：解码器的输入对任何位置 p 都不等于 emb_layer(token {t}) + ans_pos[:, p:p+1]；"
        "课程的解码把最新的词元放在位置 {t}。"
    ),
    "cache_before_step": (
        "第 {step} 步，第 {layer} 个解码器层：这一步之前它的自注意力得到的是{got}；"
        "课程的缓存存放 {held}，每个之前送入的词元一个。"
    ),
    "no_cache": "没有缓存",
    "cache_held": "一个缓存，其键 cache.k 存放 {held}（时间轴，dim 2）",
    "positions_0": "0 个位置",
    "positions_1": "{k} 个位置",
    "positions_n": "{k} 个位置",
    "outcome_passed": "通过",
    "outcome_not_implemented": "尚未实现：函数仍然抛出 NotImplementedError",
    "outcome_did_not_run": "检查没有运行到最后（前面的错误，或内核崩溃、超时）",
    "outcome_deleted": "提交中删除了这个测试单元",
    "outcome_package_code": "调用了课程包自己的实现，批改时没有它",
    "outcome_instruments_touched": "诚信标记：代码动了在内核中测量的一项的测量工具（仅限较早的成绩册：标记现在不改变分数）",
    "outcome_unreadable_outputs": "内核保存的输出无法读取或评判",
    "outcome_raised_in_update": "抛出异常：失败来自学生的 KVCache.update",
    "outcome_raised": "抛出的异常不符合任何已知错误",
    "outcome_mismatch": "输出错误，不符合任何已知错误，也没有观察结果",
    "outcome_unknown_check": "测试单元提到了批改程序不认识的检查",
    "outcome_unlabelled": "在判定以键记录之前批改：没有标签",
    "shape_answer_bad": "{check_id}：{title}：在 {sizes} 时，{what} 的形状应为 {exp}；实际是 {got}。",
    "case_of": "\n  （出错的情形：{case}）",
}
# the words the checks fill into those messages, English -> Chinese
TERMS_ZH = {
    "DecoderBlock causality": "DecoderBlock 的因果性",
    "DecoderBlock output shape": "DecoderBlock 的输出形状",
    "DecoderBlock reads the encoder memory": "DecoderBlock 读取编码器记忆",
    "DecoderBlock.forward on fresh weights and sizes": "DecoderBlock.forward（新的权重和尺寸）",
    "Transformer.forward causality": "Transformer.forward 的因果性",
    "Transformer.forward logits shape": "Transformer.forward 的 logits 形状",
    "Transformer.forward on fresh weights and lengths": "Transformer.forward（新的权重和长度）",
    "Transformer.forward reads the question": "Transformer.forward 读取题目",
    "cached greedy decoding on a fresh model": "带缓存的贪心解码（新的模型）",
    "cached greedy decoding, tokens": "带缓存的贪心解码：词元",
    "encoder once and one token per step on a fresh model": "编码器只运行一次、每步一个词元（新的模型）",
    "encoder runs once": "编码器只运行一次",
    "one new token per decoder step": "每个解码步只送入一个新词元",
    "stretch: prefill of a decoder prefix, then cached decoding": "拓展题：预填充解码器前缀，再带缓存地解码",
    "stretch: prefill of a decoder prefix on a fresh model": "拓展题：预填充解码器前缀（新的模型）",
    "stretch: beam search with the KV cache": "拓展题：带 KV 缓存的束搜索",
    "stretch: beam search with the KV cache on a fresh model": "拓展题：带 KV 缓存的束搜索（新的模型）",
    "the beams' tokens": "各条束的词元",
    "the beams' scores": "各条束的得分",
    "the beams": "各条束",
    "the encoder runs once": "编码器只运行一次",
    "the prefill is one call": "预填充只调用一次",
    "the mask": "掩码",
    "the attention weights": "注意力权重",
    "the block output": "块的输出",
    "the output after changing later answer positions": "改变后面的答案位置之后的输出",
    "the output for a different question memory": "换一道题目的编码器记忆时的输出",
    "the generated tokens": "生成的词元",
    "the logits of each decoding step (last position)": "每个解码步（最后一个位置）的 logits",
    "the logits": "logits",
    "the logits after changing later answer tokens": "改变后面的答案词元之后的 logits",
    "the logits for a different question": "换一道题目时的 logits",
    "the loss": "损失",
    "the decoder input dec_in_b": "解码器输入 dec_in_b",
    "the labels labels_b": "标签 labels_b",
    "the distribution": "采样的分布",
    r"the keys after update (\d+)": r"第 \1 次 update 之后的键",
    r"the values after update (\d+)": r"第 \1 次 update 之后的值",
    r"len\(cache\) after update (\d+)": r"第 \1 次 update 之后的 len(cache)",
}
