# nbgrader validate, run in this folder, also reports a test cell that was deleted or turned into
# another kind of cell (encdec/grading/validation.py). Generated: autograder/make_references.py.
try:
    from encdec.grading.validation import configure
except ImportError:  # the course package is not installed here: nbgrader's own validation only
    pass
else:
    configure(get_config())  # noqa: F821 (provided by traitlets when nbgrader loads this file)
