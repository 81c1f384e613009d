"""The Hugging Face Trainer on the job scripts' contract, shared by the recipes that train with it
(jobs/recipes/hf_finetune.py, jobs/recipes/bert_pretrain.py): stale markers cleared, stop agreement and committed
checkpoints (jobs/recipes/hf_checkpoints.py JobContract), resume from the newest complete checkpoint, and the
PREEMPTED / DONE markers and JSON events the job script and the tests read."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from transformers import PrinterCallback, ProgressCallback, Trainer, TrainingArguments

from jobs.recipes.hf_checkpoints import JobContract, latest_complete_checkpoint, remove_torn
from jobs.training.config import CHECKPOINT_DIR_ENV, DEVICE_ENV
from jobs.training.metrics import JsonLog
from jobs.training.neuron import NeuronUnavailable
from jobs.training.preemption import DONE_MARKER, PREEMPTED_MARKER, StopRequest, clear_stale, write_marker

FINAL_DIR = "final"


def use_cpu() -> bool:
    """Train on the CPU (gloo, CPU autocast) when there is no accelerator. On Trainium2/3 the job script sets
    SLURM_EKS_DEVICE=neuron and accelerate takes TorchNeuron's `neuron` device and `neuron` backend itself
    (accelerate 1.15 state.py: is_neuron_available -> MULTI_NEURON; Neuron docs: transformers, PEFT and accelerate
    "run natively on TorchNeuron"); without a Neuron device there the job stops rather than train on the CPU."""
    if os.environ.get(DEVICE_ENV) == "neuron":
        from accelerate.utils import is_neuron_available  # the check accelerate picks the device with

        if not is_neuron_available():
            raise NeuronUnavailable(
                f"{DEVICE_ENV}=neuron (a Trainium2/3 job script) but no Neuron device: TorchNeuron (pip torch-neuronx "
                "2.13/2.14, Neuron 2.33 or newer) is missing from the image or reports no NeuronCore"
            )
        return False
    return not torch.cuda.is_available()


def device_arguments(make: Callable[[], TrainingArguments], recipe: str) -> TrainingArguments:
    """The recipe's Trainer arguments, or exit 2 with one line when the job asks for a Neuron device it does not have
    (the wrong image for the partition: no traceback, no training on the CPU)."""
    try:
        return make()
    except NeuronUnavailable as error:
        print(f"{recipe}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def check_contract(parser: argparse.ArgumentParser, ns: argparse.Namespace, on_xla: str) -> None:
    """What every Trainer recipe refuses: no output directory, one other than the job script's (where it looks for
    DONE and PREEMPTED), and the legacy torch-xla path (`on_xla` says what to run there instead)."""
    env_dir = os.environ.get(CHECKPOINT_DIR_ENV)
    if ns.output_dir is None:
        parser.error(f"give --output-dir, or set ${CHECKPOINT_DIR_ENV} (the rendered job scripts do)")
    if env_dir and Path(env_dir).resolve() != ns.output_dir.resolve():
        parser.error(f"--output-dir {ns.output_dir} is not ${CHECKPOINT_DIR_ENV} ({env_dir}), where the job "
                     "script looks for DONE and PREEMPTED; drop --output-dir, or submit with "
                     f"--export=ALL,{CHECKPOINT_DIR_ENV}={ns.output_dir}")  # fmt: skip
    if os.environ.get(DEVICE_ENV) == "xla":
        parser.error("the recipe runs on CUDA GPUs, Trainium2/3 through TorchNeuron (SLURM_EKS_DEVICE=neuron) or the "
                     f"CPU; not on the legacy torch-xla path (trn1): {on_xla}")


def contract_arguments(output_dir: Path, save_steps: int, save_total_limit: int, logging_steps: int, seed: int,
                       **training: Any) -> TrainingArguments:
    """The Trainer's arguments the contract fixes (checkpoints every `save_steps`, JSON-only stdout, the device from
    use_cpu()), with the recipe's own training ones."""
    return TrainingArguments(
        output_dir=str(output_dir),
        save_strategy="steps",
        save_steps=save_steps,
        save_total_limit=save_total_limit,
        logging_steps=logging_steps,
        seed=seed,
        use_cpu=use_cpu(),  # the gloo group (and bf16 autocast) on a CPU-only machine
        remove_unused_columns=False,
        report_to="none",
        disable_tqdm=True,
        **training,
    )


@dataclass
class HfJob:
    """One run of a Trainer recipe under the contract."""

    output_dir: Path
    log: JsonLog
    contract: JobContract

    @classmethod
    def start(cls, args: TrainingArguments, output_dir: Path, stop_file: Path | None, stop_check_every: int) -> HfJob:
        log = JsonLog(args.process_index == 0)
        if args.process_index == 0:
            clear_stale(output_dir, stop_file)
            remove_torn(output_dir)
        stop = StopRequest(stop_file, poll_file=args.local_process_index == 0)
        return cls(output_dir, log, JobContract(stop, stop_check_every, log))

    def trainer(self, **kwargs: Any) -> Trainer:
        trainer = Trainer(callbacks=[self.contract], **kwargs)
        for printer in (PrinterCallback, ProgressCallback):  # rank 0's stdout is JSON lines only
            trainer.remove_callback(printer)
        return trainer

    def train(self, trainer: Trainer, **start: object) -> None:
        """Resume from the newest complete checkpoint, train, and leave PREEMPTED or DONE (and `final/`)."""
        args = trainer.args
        resume = latest_complete_checkpoint(self.output_dir)
        self.log(event="start", world_size=args.world_size, device=str(args.device),
                 resume_from=str(resume) if resume else None, **start)  # fmt: skip
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        step = trainer.state.global_step
        if self.contract.reasons and step < trainer.state.max_steps:
            checkpoint = str(self.contract.last_checkpoint) if self.contract.last_checkpoint else None
            self.log(event="preempted", step=step, reasons=self.contract.reasons, checkpoint=checkpoint)
            if args.process_index == 0:
                write_marker(self.output_dir, PREEMPTED_MARKER, {"step": step, "reasons": self.contract.reasons,
                                                                 "checkpoint": checkpoint})  # fmt: skip
        else:
            final = self.output_dir / FINAL_DIR
            trainer.save_model(str(final))  # every rank: ZeRO-3 gathers the shards to save them
            self.log(event="done", step=step, model=str(final))
            if args.process_index == 0:
                write_marker(self.output_dir, DONE_MARKER, {"step": step, "model": str(final)})
        if dist.is_initialized():
            dist.destroy_process_group()
