"""The sandbox's one error: it cannot start here, so grading stops rather than run a kernel
unconfined. Its own module, so that every part of the sandbox can raise it without importing
another part."""


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot start here; grading must stop rather than run unconfined."""
