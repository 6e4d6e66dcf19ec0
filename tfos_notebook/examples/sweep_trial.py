"""A trial for sweeps whose steps wait rather than compute, as a GPU-bound step leaves its host's
CPUs idle: the sweep tests and ``bench/sweep.py`` run it, so that trials running side by side on
a machine of two cores measure the sweep, not the cores. Its loss falls with the steps towards a
floor set by the trial's parameters; the chief reports it each step and writes it as a
TensorBoard scalar (with TensorBoard's own event writer, no TensorFlow)."""

from __future__ import annotations

#: The search space the tests and the benchmark use: the floor is lowest near lr=0.01 with adam.
SPACE = {"lr": (1e-4, 1.0, "log"), "optimizer": ["adam", "sgd"]}


def floor(lr: float, optimizer: str) -> float:
    """Where a trial's loss ends: its distance from the best parameters."""
    import math

    return abs(math.log10(lr) + 2) + (0.5 if optimizer == "sgd" else 0.0)


def trial(args, ctx):
    """``args``: ``lr``, ``optimizer``, ``steps``, ``step_secs``; ``fail_above`` (optional): a trial
    with a larger ``lr`` raises in its first step. Returns the final loss (every node)."""
    import time

    loss = 0.0
    writer = None
    if ctx.is_chief:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        writer = EventFileWriter(ctx.log_dir)
    for step in range(1, args.steps + 1):
        time.sleep(args.step_secs)
        loss = floor(args.lr, args.optimizer) + 2.0 / step
        if getattr(args, "fail_above", None) is not None and args.lr > args.fail_above:
            raise ValueError(f"lr {args.lr:.3g} diverged")
        if writer is not None:
            ctx.report(step, loss=loss)
            writer.add_event(Event(wall_time=time.time(), step=step,
                                   summary=Summary(value=[Summary.Value(tag="loss", simple_value=loss)])))
            writer.flush()
    if writer is not None:
        writer.close()
    return loss
