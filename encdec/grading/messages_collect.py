"""The words for what the exchange's collect left behind of a submission (``autograder/collected.py``),
one table per language, merged into ``messages.MESSAGES``: repair records ``left_behind_<key>``,
stated at the top of the graded notebook and the feedback. Plain text only: no answer here."""

LEFT_BEHIND = {
    "en": {
        "repair_left_behind_link": (
            "{count} item(s) of your submission were symbolic links, which are not collected "
            "(a submission is files, not links to them): `{files}`."
        ),
        "repair_left_behind_not_regular": (
            "{count} item(s) of your submission were neither a file nor a folder (a "
            "pipe, a socket, a device, another file system) and were not collected: "
            "`{files}`."
        ),
        "repair_left_behind_not_yours": (
            "{count} item(s) of your submission belong to another user or are hard links "
            "(another name of a file kept elsewhere) and were not collected: `{files}`."
        ),
        "repair_left_behind_past_limits": (
            "{count} item(s) of your submission were past what a submission may hold "
            "(at most {limit_files} files, {limit_megabytes} MB, folders {limit_depth} "
            "deep, {limit_entries} names in all) and were not collected: `{files}`."
        ),
        "repair_left_behind_unreadable": "{count} item(s) of your submission could not be read and were not "
        "collected: `{files}`.",
        "repair_left_behind_no_notebook": (
            "No notebook of your submission could be collected: the assignment's own "
            "notebook with no answers, `{files}`, was graded in its place."
        ),
    },
    "zh": {
        "repair_left_behind_link": "你的提交中有 {count} 项是符号链接，没有被收取（提交的是文件本身，而不是指向文件的链接）：`{files}`。",
        "repair_left_behind_not_regular": (
            "你的提交中有 {count} 项既不是文件也不是文件夹（管道、套接字、设备或另一个文件系统），"
            "没有被收取：`{files}`。"
        ),
        "repair_left_behind_not_yours": "你的提交中有 {count} 项属于其他用户或是硬链接（别处某个文件的另一个名字），没有被收取：`{files}`。",
        "repair_left_behind_past_limits": (
            "你的提交中有 {count} 项超出了提交的限制（最多 {limit_files} 个文件、{limit_megabytes} MB、"
            "文件夹最多 {limit_depth} 层、总共 {limit_entries} 个名字），没有被收取：`{files}`。"
        ),
        "repair_left_behind_unreadable": "你的提交中有 {count} 项无法读取，没有被收取：`{files}`。",
        "repair_left_behind_no_notebook": "你的提交中没有可以收取的笔记本：作业本身未作答的笔记本 `{files}` 代替它被评分。",
    },
}
