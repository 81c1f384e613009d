"""OpenAPI string formats the API server checks and these schemas use; it ignores unknown formats."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _is_date_time(text: str) -> bool:
    return _DATE_TIME.fullmatch(text) is not None


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


STRING_FORMATS: dict[str, Callable[[str], bool]] = {"date-time": _is_date_time, "byte": _is_base64}
