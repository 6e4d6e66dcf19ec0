"""The runs launched from one kernel, which ``%tfos_status``, ``%tfos_stop``, ``%tfos_diagnose`` and
``%tfos_tensorboard`` choose from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..tensorboard import TensorBoardHandle
    from .handle import TrainRun
    from .sweeps import SweepRun


class KernelRuns:
    """The runs launched from this kernel, oldest first; ``boards`` holds the TensorBoards this
    kernel serves for log directories (by resolved path or URI); ``sweeps`` the sweeps it started
    (their trials' runs are not among the runs: the sweep owns them)."""

    def __init__(self) -> None:
        self._runs: list[TrainRun] = []
        self.boards: dict[str, TensorBoardHandle] = {}
        self.sweeps: list[SweepRun] = []

    def add(self, run: TrainRun) -> None:
        self._runs.append(run)

    def add_sweep(self, sweep: SweepRun) -> None:
        self.sweeps.append(sweep)

    def find_sweep(self, which: str | None) -> SweepRun | None:
        """The sweep named or with id ``which``; without one, the newest sweep still going; else None."""
        if which is None:
            going = [s for s in self.sweeps if not s.done]
            return going[-1] if going else None
        return next((s for s in reversed(self.sweeps) if which in (s.name, s.run_id)), None)

    def __iter__(self) -> Iterator[TrainRun]:
        return iter(list(self._runs))

    def __len__(self) -> int:
        return len(self._runs)

    def find(self, which: str | None = None) -> TrainRun:
        """The run named or with run id ``which``; without one, the newest run still going
        (else the newest).

        Raises:
            ConfigError: no such run.
        """
        if not self._runs:
            raise ConfigError("no run was launched from this kernel yet")
        if not which:
            going = [r for r in self._runs if not r.done]
            return (going or self._runs)[-1]
        run = self.get(which)
        if run is None:
            known = ", ".join(r.name for r in self._runs)
            raise ConfigError(f"no run named {which!r} in this kernel; runs: {known}")
        return run

    def going(self) -> set[str]:
        """Run ids of the runs still reserving or running."""
        return {r.run_id for r in self._runs if not r.done}

    def get(self, which: str) -> TrainRun | None:
        """The newest run named ``which`` or with run id ``which``, if any."""
        return next((r for r in reversed(self._runs) if which in (r.name, r.run_id)), None)
