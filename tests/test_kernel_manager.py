"""The grader's kernel manager on jupyter_client's public hooks: its client (autograder/sandbox/kernel.py),
ready on the kernel's answer with no fixed wait after it, and still ready when IOPub missed the first
answer's idle status; its provisioner (autograder/sandbox/provisioner.py), named by the kernelspec and
found through the entry point, which leaves nothing behind when a launch fails."""

import asyncio
from queue import Empty

import pytest
from jupyter_client.provisioning import KernelProvisionerFactory

from autograder.sandbox.kernel import SandboxKernelClient, SandboxKernelManager
from autograder.sandbox.provisioner import SandboxProvisioner


class Channel:
    def __init__(self):
        self.queue: list[dict] = []
        self.waits: list[float] = []

    async def get_msg(self, timeout=None):
        self.waits.append(timeout)
        if not self.queue:
            raise Empty
        return self.queue.pop(0)


def status(parent: str, state: str) -> dict:
    return {"msg_type": "status", "parent_header": {"msg_id": parent}, "content": {"execution_state": state}}


class FakeKernel(SandboxKernelClient):
    """Answers each kernel_info on shell; IOPub hears the first `lost` answers' statuses not at all."""

    def __init__(self, lost: int = 0, alive: bool = True, answers: bool = True):
        super().__init__()
        self.shell, self.iopub = Channel(), Channel()
        self.asked: list[str] = []
        self.lost, self.alive, self.answers = lost, alive, answers

    shell_channel = property(lambda self: self.shell)
    iopub_channel = property(lambda self: self.iopub)

    def kernel_info(self):
        msg_id = f"ki-{len(self.asked)}"
        self.asked.append(msg_id)
        if self.answers:
            self.shell.queue.append(
                {
                    "msg_type": "kernel_info_reply",
                    "parent_header": {"msg_id": msg_id},
                    "content": {"protocol_version": "4.1"},
                }
            )
            if len(self.asked) > self.lost:
                self.iopub.queue += [status(msg_id, "busy"), status(msg_id, "idle")]
        return msg_id

    async def is_alive(self):
        return self.alive


def test_ready_on_the_idle_after_its_answer_and_reads_no_further():
    kc = FakeKernel()
    kc.iopub.queue.append(status("ki-0", "starting"))  # before the answer's own statuses: read past
    asyncio.run(kc.wait_for_ready(timeout=5))
    kc.iopub.queue.append({"msg_type": "stream", "parent_header": {}, "content": {}})
    assert kc.asked == ["ki-0"]
    assert kc.session.adapt_version == 4  # the reply's protocol version, spoken from then on
    assert len(kc.iopub.queue) == 1  # nothing after the idle was read: no flush that waits for silence


def test_a_lost_idle_asks_again_and_the_next_answer_tells():
    kc = FakeKernel(lost=2)
    asyncio.run(kc.wait_for_ready(timeout=5))
    assert kc.asked == ["ki-0", "ki-1", "ki-2"]
    assert kc.session.adapt_version == 4


def test_a_dead_kernel_is_an_error_not_a_wait():
    kc = FakeKernel(alive=False, answers=False)
    with pytest.raises(RuntimeError, match="died"):
        asyncio.run(kc.wait_for_ready(timeout=5))


def test_a_silent_kernel_times_out():
    kc = FakeKernel(answers=False)
    with pytest.raises(RuntimeError, match="didn't respond"):
        asyncio.run(kc.wait_for_ready(timeout=0))


def test_the_sandbox_manager_makes_this_client():
    assert SandboxKernelManager().client_factory is SandboxKernelClient


def test_the_kernelspec_names_the_sandbox_provisioner_and_jupyter_client_finds_it():
    km = SandboxKernelManager()
    factory = KernelProvisionerFactory.instance()
    assert km.kernel_spec.metadata["kernel_provisioner"]["provisioner_name"] == "encdec-sandbox"
    assert factory.is_provisioner_available(km.kernel_spec)
    made = factory.create_provisioner_instance("k", km.kernel_spec, parent=km)
    assert type(made) is SandboxProvisioner


def _made(prov) -> dict:
    """What the provisioner made for the kernel being started: its folders and its launcher."""
    return {"scratch": prov._holder, "sockets": prov._sockdir, "relay": prov._relaydir, "process": prov.process}


def _fails_leaving_nothing(km, tmp_path, made: dict, match: str) -> None:
    with pytest.raises(OSError, match=match):
        asyncio.run(km.start_kernel(cwd=str(tmp_path)))
    folders = [made[k] for k in ("scratch", "sockets", "relay")]
    assert None not in folders and not any(path.exists() for path in folders)
    assert km.kernel_dir is None


@pytest.mark.grading
def test_a_failed_launch_leaves_no_folder_and_no_uid(tmp_path, monkeypatch):
    """The launcher cannot start (here: launch_kernel raises, after pre_launch made the kernel's
    folders): the start fails, and the scratch, socket and relay folders are gone, the uid given back."""
    from jupyter_client.provisioning import local_provisioner

    km, made = SandboxKernelManager(assignment="warmup"), {}

    def no_launch(cmd, **kwargs):
        made.update(_made(km.provisioner))
        raise OSError("no launcher here")

    monkeypatch.setattr(local_provisioner, "launch_kernel", no_launch)
    _fails_leaving_nothing(km, tmp_path, made, "no launcher here")
    assert km.provisioner._slot is None


@pytest.mark.grading
def test_a_kernel_started_but_not_reached_is_killed_and_leaves_no_folder(tmp_path, monkeypatch):
    """The launch succeeded but the manager's next step failed (here: its control socket cannot be
    made): the start fails, the launcher is gone, and the kernel's folders with it."""
    km, made = SandboxKernelManager(assignment="warmup"), {}

    def unreachable(self):
        made.update(_made(self.provisioner))
        raise OSError("no control socket here")

    monkeypatch.setattr(SandboxKernelManager, "_connect_control_socket", unreachable)
    _fails_leaving_nothing(km, tmp_path, made, "no control socket here")
    assert made["process"] is not None and made["process"].poll() is not None  # the launcher was killed
    assert not km.has_kernel


@pytest.mark.grading
@pytest.mark.parametrize("prefork", [True, False], ids=["zygote", "bwrap"])
def test_the_kernels_cpu_time_is_read_from_outside_it(tmp_path, prefork):
    """What the structure items are judged by (judge/budget.py): the CPU time a kernel spends in a cell,
    read by the grader through the manager (its cgroup, else its launcher's process tree), whether the
    kernel was forked from the zygote or started in a fresh sandbox."""

    async def run() -> tuple[float | None, float | None]:
        km = SandboxKernelManager(assignment="warmup", prefork=prefork)
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            before = km.kernel_cpu_seconds()
            await kc.execute_interactive(
                "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass", timeout=60
            )
            return before, km.kernel_cpu_seconds()
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    before, after = asyncio.run(run())
    assert before is not None and after is not None
    assert after - before >= 0.45, (before, after)


@pytest.mark.grading
def test_a_cell_waits_no_longer_than_the_notebook_has_left(tmp_path):
    """SandboxedExecute through nbclient's public ``timeout_func``: a cell may run for its own limit
    (``timeout``) or for what is left of the notebook's (``notebook_timeout``), whichever is less, and
    the cells after the notebook's time are not run."""
    import time

    import nbformat

    from autograder.sandbox.execute import SandboxedExecute

    work = tmp_path / "autograded" / "alice" / "warmup"
    work.mkdir(parents=True)
    cells = ["import time\ntime.sleep(2)", "time.sleep(60)", "print('after the time')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    ex = SandboxedExecute(timeout=60, notebook_timeout=4)
    start = time.monotonic()
    ex.preprocess(nb, {"nbgrader": {"assignment": "warmup"}, "metadata": {"path": str(work)}})
    took = time.monotonic() - start
    assert took < 20, took  # the second cell was stopped at the notebook's time, not its own 60 s
    assert any(o.get("output_type") == "error" for o in nb.cells[1].outputs), nb.cells[1].outputs
    assert [o.get("ename") for o in nb.cells[2].outputs] == ["CellNotRun"], nb.cells[2].outputs
    assert "ran out of time" in nb.cells[2].outputs[0]["evalue"]
