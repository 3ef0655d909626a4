"""The words for an integrity flag (``autograder/integrity/``), one table per language, merged into
``messages.MESSAGES``: ``flag_<key>`` for each rule family of ``autograder/integrity/rules.py``,
``{found}`` what the cell used. The instructor reads them (the review list); no student page shows
a flag. Plain text only."""

FLAGS = {
    "en": {
        "flag_frames": "reads interpreter stack frames ({found})",
        "flag_hooks": "touches torch's hook machinery ({found})",
        "flag_grader": "reaches into the grader's code ({found})",
        "flag_grading_files": "names the grader's files ({found})",
        "flag_interpreter": "tampers with the interpreter ({found})",
        "flag_patches": "patches library functions ({found})",
        "flag_files": "reads or writes files ({found})",
        "flag_ready_made": "uses torch's ready-made layers ({found})",
        "flag_unchecked": "could not be checked ({found})",
    },
    "zh": {
        "flag_frames": "读取解释器的栈帧（{found}）",
        "flag_hooks": "动了 torch 的钩子机制（{found}）",
        "flag_grader": "触及批改程序的代码（{found}）",
        "flag_grading_files": "提到批改程序的文件（{found}）",
        "flag_interpreter": "篡改解释器（{found}）",
        "flag_patches": "修改库函数（{found}）",
        "flag_files": "读写文件（{found}）",
        "flag_ready_made": "使用 torch 现成的层（{found}）",
        "flag_unchecked": "无法检查（{found}）",
    },
}
