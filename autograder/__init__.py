"""The course's grading side: nbgrader preprocessors (``trusted``), reference outputs, fixtures."""
