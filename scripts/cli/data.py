"""`slurm-eks data prepare`: text and JSONL into the token file `jobs/train.py --data` reads. Registered by
scripts/cli/main.py as the `data` sub-app; the work is in scripts/data/prepare.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from scripts.cli.problems import CONFIG_ERROR_EXIT, err

data_app = typer.Typer(help="Training data: tokenize documents into token files for jobs/train.py --data.",
                       no_args_is_help=True)


@data_app.command()
def prepare(
    inputs: Annotated[list[Path], typer.Argument(
        metavar="INPUT",
        help=".txt files (one document each) and .jsonl files (one a line), or directories holding them")],
    tokenizer: Annotated[Path, typer.Option(
        "--tokenizer", help="Hugging Face tokenizer directory: tokenizer.json (+ tokenizer_config.json's "
                            "eos_token, appended after each document)")],
    out: Annotated[Path, typer.Option("--out", help="token file to write; its description goes to OUT.json")],
    text_field: Annotated[str, typer.Option(help="the field of each JSONL object that holds the text")] = "text",
    split_lines: Annotated[bool, typer.Option("--split-lines", help="one document per line of .txt files")] = False,
    seed: Annotated[int, typer.Option(help="seed of the document shuffle")] = 0,
    force: Annotated[bool, typer.Option("--force", help="overwrite OUT and OUT.json")] = False,
) -> None:
    """Tokenize documents in a seeded shuffled order into a flat uint16/uint32 token file plus OUT.json."""
    try:
        from scripts.data.prepare import PrepareError
        from scripts.data.prepare import prepare as run_prepare
    except ImportError as exc:
        err.print(f"data prepare needs {exc.name}: pip install -e '.[data]'", highlight=False, markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    try:
        done = run_prepare(inputs, tokenizer, out, text_field=text_field, split_lines=split_lines, seed=seed,
                           force=force)
    except PrepareError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    meta = done.meta
    Console(soft_wrap=True).print(
        f"wrote {done.out} ({meta['tokens']:,} {meta['dtype']} tokens, {meta['documents']:,} documents) and "
        f"{done.sidecar}\ntrain on it: jobs/train.py --data {done.out} --data-dtype {meta['dtype']} "
        f"--vocab-size {meta['vocab_size']} (or a --model whose vocabulary has at least {meta['vocab_size']} ids)",
        highlight=False, markup=False)
