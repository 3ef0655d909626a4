"""The hub-wide nbgrader configuration: ``/etc/jupyter/nbgrader_config.py``, read by every user's
nbgrader (students' and instructors'). It names the course and nbgrader's exchange; nothing else
belongs here. ``setup-hub.sh config`` installs it with the values of hub.env (ENCDEC_COURSE_ID,
ENCDEC_EXCHANGE_ROOT) in place of the two below.

The exchange is nbgrader's multi-user one: a root folder every user can write, with the sticky
bit (1777, made by ``setup-hub.sh exchange``), under which the instructor's ``release_assignment``
makes the course's folders (outbound 0755, inbound 3733: students write their submissions there
but cannot list them, nor rename another's: autograder/exchange.py). A student's ``submit`` closes
the submission to other students (``encdec.exchange.Submit``: nbgrader's own leaves it 0777).
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "encdec"
c.Exchange.root = "/srv/nbgrader/exchange"
c.ExchangeFactory.submit = "encdec.exchange.Submit"
# nbgrader validate, and JupyterLab's Validate button, also report a deleted or retyped test cell
# and a deleted solution cell (encdec/grading/validation.py; the course package is in every
# user's environment on the hub)
try:
    from encdec.grading.validation import configure
except ImportError:
    pass
else:
    configure(c)
