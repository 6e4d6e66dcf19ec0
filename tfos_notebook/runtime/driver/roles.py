"""Role planning: which role and index each task of a run plays."""

from __future__ import annotations

from .errors import ConfigError


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
