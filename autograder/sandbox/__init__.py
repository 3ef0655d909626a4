"""The grading sandbox: bubblewrap + prlimit around each autograded notebook's kernel.

``SandboxUnavailable`` is its one error, here so that every part of the sandbox raises it without
importing another part."""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot start here; grading must stop rather than run a kernel unconfined."""
