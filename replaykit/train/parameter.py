"""The harness parameter, as in PyTorch: ``.data`` is the value, ``.grad`` what moves it.

``.data`` is the baseline branch's HEAD SHA (read from git, so it is always true).
``.grad`` is the pending verdict: ``loss.backward()`` sets it to the loss; an
optimizer's ``step()`` reads it and moves the parameter with :meth:`promote`
(fast-forward the baseline branch to the candidate) or :meth:`reject` (keep the
candidate under a ref); either clears ``.grad``. Nothing else moves the branch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from replaykit.core.errors import TrainError
from replaykit.episodes.harness import HarnessRepo
from replaykit.train import gitops

if TYPE_CHECKING:
    from replaykit.train.loss import Loss

Hook = Callable[["Loss"], None]


class Parameter:
    def __init__(self, harness: HarnessRepo, training_id: str, persist: bool = True) -> None:
        self.harness = harness
        self.training_id = training_id
        self.persist = persist  # False when replaying: refs are not written
        self.grad: Loss | None = None
        self._hooks: list[Hook] = []

    @property
    def data(self) -> str:
        """The baseline: HEAD of the harness branch."""
        return self.harness.resolve()

    def register_hook(self, hook: Hook) -> None:
        """Called with the loss after every move (the trainer saves its document there)."""
        self._hooks.append(hook)

    def zero_grad(self) -> None:
        self.grad = None

    def pending(self) -> Loss:
        """The loss ``backward()`` left in ``.grad``; an error when there is none."""
        loss = self.grad
        if loss is None or not loss.backward_done:
            raise TrainError("optimizer.step() called before loss.backward(): call loss.backward() first")
        return loss

    def promote(self) -> None:
        """Accept the pending candidate: fast-forward the baseline branch to it."""
        loss = self.pending()
        if loss.skipped or loss.candidate_sha is None:
            self._settle(loss, False)
            return
        gitops.fast_forward(self.harness.repo, self.harness.branch, loss.candidate_sha)
        if self.persist:
            gitops.set_ref(
                self.harness.repo, gitops.verdict_ref(self.training_id, loss.epoch, True), loss.candidate_sha
            )
        self._settle(loss, True)

    def reject(self) -> None:
        """Keep the pending candidate as rejected (under a ref); the baseline stays."""
        loss = self.pending()
        if self.persist and not loss.skipped and loss.candidate_sha is not None:
            gitops.set_ref(
                self.harness.repo, gitops.verdict_ref(self.training_id, loss.epoch, False), loss.candidate_sha
            )
        self._settle(loss, False)

    def _settle(self, loss: Loss, promoted: bool) -> None:
        loss.promoted = promoted
        self.grad = None
        for hook in self._hooks:
            hook(loss)
