"""Whether an NVIDIA GPU answers here (tests marked ``gpu`` run only where one does)."""

from __future__ import annotations


def no_gpu_reason() -> str:
    """Why tests marked ``gpu`` cannot run here ("" when an NVIDIA GPU answers)."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA GPU here: nvidia-smi is not installed"
    out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    if out.returncode or not out.stdout.strip():
        return f"no NVIDIA GPU here: nvidia-smi answered {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
    return ""
