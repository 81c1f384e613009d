"""Resumable Llama-style decoder training under torchrun: `torchrun ... jobs/train.py [flags]` (`--help` lists them).

DDP by default, FSDP2 with `--fsdp` (HSDP with `--dp-replicate`, tensor and pipeline parallelism with `--tp`
and `--pp`: jobs/training/mesh.py), on GPUs, the CPU, or Trainium2/3 through TorchNeuron with `--device neuron`
(jobs/training/neuron.py: the same layouts); torch-xla data parallelism on trn1 with `--device xla` (the legacy
path, jobs/training/xla.py); DCP checkpoints (XLA: `xm.save`) every `--checkpoint-every` steps into
`<checkpoint-dir>/step-<n>/` (complete once DCP's `.metadata` exists; the latest `--keep-checkpoints` are
kept); on start it resumes from the newest complete one, so an interrupted run ends bit-for-bit where an
uninterrupted one would (on CPU, same world size). Rank 0 prints JSON lines; the last is
`{"event": "done", "step": N, "params_sha256": ...}` or `{"event": "preempted", ...}`.

Exit and preemption contract (for job scripts; behaviour of torch 2.13's torchrun measured here):

* Stop requests: SIGUSR2 or SIGTERM to any worker, or the file `--stop-file` (default
  `$SLURM_EKS_STOP_FILE`; put it on /shared: local rank 0 of each node polls it when the ranks agree,
  every `--stop-check-every` steps, by default about every 10 s of training and after every step when a
  step takes longer: jobs/training/cadence.py). The step in flight finishes, all ranks agree (an all_reduce
  of CPU integers, at those steps only) to stop after the same step, save a
  checkpoint, rank 0 writes `<checkpoint-dir>/PREEMPTED` (JSON: step, reasons, checkpoint) and prints
  `{"event": "preempted", ...}`, and every worker exits 0.
* Exit code 0 for both "done" and "preempted": torchrun turns any non-zero worker exit into its own exit
  1 and, with `--max-restarts`, restarts all workers, so no exit code can carry "preempted" through it.
  The markers do. `<checkpoint-dir>/DONE` (JSON: step, params_sha256) is written when training
  completes. Both markers and the stop file are deleted when a run starts (so they always describe the
  latest attempt): the job script must create the stop file only after launching.
* After `srun --kill-on-bad-exit=1 torchrun ... &` and `wait`:
  PREEMPTED exists -> a checkpoint is saved: `scontrol requeue "$SLURM_JOB_ID"` (bounded by
  `SLURM_RESTART_COUNT`), whatever the exit code (torchrun exits 1 when it was itself signalled);
  DONE exists -> finished, exit 0; neither -> crashed: exit non-zero (the newest complete checkpoint
  remains, so a bounded requeue also resumes from it).
* USR2 trap (`#SBATCH --signal=B:USR2@<lead>`): `touch "$SLURM_EKS_STOP_FILE"`, then `wait` again for
  the srun (bash's `wait` returns early when a trapped signal arrives). Do not send USR2 to torchrun:
  it does not handle USR2 by default and dies at once (exit 140), leaving its workers running
  unsupervised. If a signal must go through torchrun, start it (torch 2.13's; the default image's
  torch 2.9 has no such flag) with
  `--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2`: it forwards the signal to its workers,
  waits `--shutdown-timeout` (default 30 s) for them, SIGKILLs the rest and exits 1. SIGTERM (Slurm's
  time limit, scancel) is forwarded that way by default, so the lead time and `--shutdown-timeout`
  must exceed one step plus one checkpoint save.
* A crashed or killed worker makes torchrun SIGTERM the others; with `--max-restarts=N` it restarts all
  of them, and they resume from the newest complete checkpoint (a directory torn by the crash is
  skipped). Without restarts left torchrun exits 1.
* Environment: torchrun's (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT via `--rdzv-endpoint`);
  `SLURM_EKS_STOP_FILE`; without torchrun the script runs as one process.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (torchrun jobs/train.py): make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.training.config import parse_args
from jobs.training.neuron import NeuronUnavailable
from jobs.training.trainer import train


def main(argv: list[str] | None = None) -> int:
    try:
        train(parse_args(argv))
    except NeuronUnavailable as error:  # the wrong image for the device asked for: say so, no traceback
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
