"""Building blocks of the typed stack config: the base model (camelCase keys, unknown keys are errors,
immutable values) and the constrained string types several config modules share."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or unlimited.
_SLURM_TIME = re.compile(r"^(UNLIMITED|INFINITE|\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}){0,2})$")
_DURATION = re.compile(r"^([0-9]+[hms])+$")  # the subset of Go durations Karpenter accepts


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError as exc:
        raise ValueError(f"not a CIDR block ({exc}); write it like 10.0.0.0/16") from None


def _duration(value: str) -> str:
    if not _DURATION.match(value):
        raise ValueError("not a duration; use hours, minutes and seconds such as 10m, 1h30m or 90s")
    return value


def duration_seconds(value: str) -> int:
    """"1h30m" -> 5400."""
    unit = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * unit[u] for n, u in re.findall(r"(\d+)([hms])", value))


def _slurm_time(value: str) -> str:
    if not _SLURM_TIME.match(value):
        raise ValueError("not a Slurm time limit; use minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED")
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]
SlurmTime = Annotated[str, AfterValidator(_slurm_time)]
Duration = Annotated[str, AfterValidator(_duration)]
FsxEvent = Literal["NEW", "CHANGED", "DELETED"]


class Model(BaseModel):
    """camelCase keys in YAML, snake_case in Python; unknown keys are errors; values are immutable."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)
