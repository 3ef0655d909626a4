"""The integrity rules: one table of (pattern, reason) rows over the facts a cell states
(`scan.py` says which facts), and the names a notebook may use without flagging."""

from __future__ import annotations

import re

# The rule families: a flag's key (its words are `flag_<key>` in encdec/grading/messages*.py, with
# `{found}`, what the cell used).
FRAMES, HOOKS, GRADER, GRADING_FILES = "frames", "hooks", "grader", "grading_files"
INTERPRETER, PATCHES, FILES, READY_MADE = "interpreter", "patches", "files", "ready_made"
# No rule for what a kernel can learn of its surroundings (environment variables, uid, host name,
# folders, /proc): the sandbox constructs all of it (autograder/sandbox/policy.py), so there is
# nothing to learn and nothing to switch to; `os.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"` and
# `os.listdir(".")` are honest habits. Nor for a hook registered on a module (a student's self-test):
# no score reads anything measured inside the kernel. Nor for torch's attention operator
# (`scaled_dot_product_attention`, by any name): a part written by hand runs with no attention
# operator in the process (encdec/grading/by_hand.py); the mask is asked in the course's convention
# (True = forbidden), which no ready-made call returns.
UNCHECKED = "unchecked"  # fails closed: what the scan cannot read is listed for review

# (pattern, key): the pattern must match a whole fact (re.fullmatch).
RULES: list[tuple[str, str]] = [
    (r"name:sys\.(_getframe|_current_frames)", FRAMES),
    (r"attr:_getframe", FRAMES),
    (r"name:inspect\.(currentframe|stack|getouterframes|getinnerframes|trace|getframeinfo)", FRAMES),
    (r"attr:(f_back|f_locals|f_globals|f_builtins|f_code|tb_frame|tb_next|gi_frame|cr_frame|ag_frame)", FRAMES),
    (r"attr:_(forward|backward)\w*_hooks\w*", HOOKS),  # _forward_hooks, _forward_pre_hooks, _backward_hooks, ...
    (r"attr:_global_\w+", HOOKS),
    (
        r"str:_(forward|backward)\w*_hooks\w*|str:_global_\w+_hooks?",
        HOOKS,
    ),  # the same names, spelt as strings  # torch.nn.modules.module._global_forward_hooks, ...
    (r"(name|import):torch\.nn\.modules\.module(\..*)?", HOOKS),
    (r"(name|import):torch\.utils\.hooks(\..*)?", HOOKS),
    (r"(name|assign):torch\.nn\.(modules\.module\.)?Module\.(__call__|_call_impl|_wrapped_call_impl)", HOOKS),
    (r"attr:_(wrapped_)?call_impl", HOOKS),
    (r"(name|import):encdec\.grading(\..*)?", GRADER),  # the exact `from encdec.grading import checks` and a
    (r"import:(autograder|nbgrader)(\..*)?", GRADER),  # plain `checks.run(...)` call state no fact
    # a path, not prose: no white space ("the tokens submitted" in a message is no file name)
    (r"str:\S*(\.grading|grading-in|reference/|\.npz|seed\.json|gradebook|autograded|submitted)\S*", GRADING_FILES),
    (r"name:gc\.(get_objects|get_referrers|get_referents)", INTERPRETER),
    (r"name:sys\.modules(\..*)?", INTERPRETER),
    (r"(name|import):importlib(\..*)?", INTERPRETER),
    (r"name:(builtins\.)?__import__", INTERPRETER),
    (r"(name|assign):(builtins\.)?__builtins__(\..*)?", INTERPRETER),
    (r"name:(builtins\.)?(exec|eval|compile)", INTERPRETER),
    (r"attr:(settrace|setprofile|__code__|__globals__|__closure__|__builtins__|__subclasses__)", INTERPRETER),
    (r"name:sys\.monitoring(\..*)?", INTERPRETER),
    (r"(name|import):ctypes(\..*)?", INTERPRETER),
    (r"assign:(?!torch\.backends\.)(torch|numpy|builtins)(\..*)?", PATCHES),  # cudnn flags are settings
    (r"name:(builtins\.|io\.|os\.|codecs\.)?open|name:os\.fdopen", FILES),
    (r"attr:(read_text|read_bytes|write_text|write_bytes)", FILES),
    (r"name:(numpy|torch)\.(load|save|savez|savez_compressed|fromfile|loadtxt|genfromtxt|memmap)", FILES),
    (
        r"name:torch\.nn(\.modules(\.\w+)?)?\.(Transformer|TransformerEncoder|TransformerEncoderLayer"
        r"|TransformerDecoder|TransformerDecoderLayer|MultiheadAttention)",
        READY_MADE,
    ),
    (
        r"attr:(TransformerEncoder|TransformerEncoderLayer|TransformerDecoder|TransformerDecoderLayer|MultiheadAttention)",
        READY_MADE,
    ),
    (r"name:torch\.nn\.functional\.multi_head_attention_forward", READY_MADE),
    (r"str:(Transformer(Encoder|Decoder)?(Layer)?|MultiheadAttention)", READY_MADE),
    (r"unchecked:.*", UNCHECKED),
]
COMPILED_RULES = [(re.compile(pattern, re.S), reason) for pattern, reason in RULES]

# Names a cell may use without importing them (the notebooks import them in their first cell).
DEFAULT_ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy", "checks": "encdec.grading.checks"}
ALLOWED_IMPORT = ("encdec.grading", "checks")  # the given `from encdec.grading import checks`
PYTHON_MAGICS = {"time", "timeit", "prun", "capture"}  # magics whose text is Python code
SHELL_MAGICS = {"bash", "sh", "script"}
# Magics the scan reads (or that run no code of the student's); any other (%%writefile, %run,
# %load, ...) makes the cell "could not be checked".
KNOWN_MAGICS = (
    PYTHON_MAGICS
    | SHELL_MAGICS
    | {
        "matplotlib",
        "autoreload",
        "load_ext",
        "precision",
        "who",
        "whos",
        "config",
        "pip",
        "env",
        "set_env",
        "pwd",
        "ls",
        "cd",
        "sx",
        "system",
        "bookmark",
        "history",
        "pinfo",
        "pinfo2",
        "psearch",
        "lsmagic",
        "magic",
        "xmode",
    }
)
