"""Grades out of nbgrader: a late-submission policy (`late_policy.LatePolicy`) and a
Canvas-importable gradebook export (`canvas.CanvasExport`), both nbgrader plugins configured in
`nbgrader_config.py`."""
