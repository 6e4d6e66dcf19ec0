"""Role planning: which role and index each task of a run plays, and how many GPUs each uses."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError


def plan_roles(num_nodes: int, num_ps: int = 0, master_node: str | None = "chief",
               eval_node: bool = False) -> list[tuple[str, int]]:
    """``(role, index)`` for each of ``num_nodes`` tasks, in the order ps, chief, evaluator, workers."""
    if num_nodes < 1:
        raise ConfigError(f"num_executors must be at least 1, got {num_nodes}")
    if num_ps < 0:
        raise ConfigError(f"num_ps must be 0 or more, got {num_ps}")
    if master_node not in (None, "chief", "master"):
        raise ConfigError(f"master_node must be 'chief', 'master' or None, got {master_node!r}")
    trainers = num_nodes - num_ps - (1 if eval_node else 0)
    if trainers < 1:
        raise ConfigError(
            f"{num_nodes} nodes leave no node to train after {num_ps} ps"
            f"{' and 1 evaluator' if eval_node else ''}: raise num_executors or lower num_ps"
        )
    roles = [("ps", i) for i in range(num_ps)]
    if master_node:
        roles.append((master_node, 0))
        trainers -= 1
    if eval_node:
        roles.append(("evaluator", 0))
    roles += [("worker", i) for i in range(trainers)]
    return roles


def node_gpu_counts(gpus_per_node: int | Sequence[int], num_nodes: int) -> tuple[int, ...]:
    """How many of its task's GPUs each node uses, by task; empty when every node uses all of them.

    Raises:
        ConfigError: a negative count, or a sequence that does not give one count per node."""
    counts = (gpus_per_node,) * num_nodes if isinstance(gpus_per_node, int) else tuple(gpus_per_node)
    if len(counts) != num_nodes or any(not isinstance(c, int) or c < 0 for c in counts):
        raise ConfigError(f"gpus_per_node must be a whole number of 0 or more, or one such number per node "
                          f"({num_nodes}), got {gpus_per_node!r}")
    return () if gpus_per_node == 0 else counts
