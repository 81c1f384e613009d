"""Kubernetes resource quantities ("190", "500m", "1892Gi", "1e3") as the operator reads them.

Port of k8s.io/apimachinery v0.36.2 (the version slurm-operator v1.2.1's go.mod pins)
pkg/api/resource/quantity.go: parseQuantityString and ParseQuantity (suffixes from suffix.go newSuffixer,
non-zero values rounded up to the nearest nano away from zero, BinarySI capped at 2^63-1), and
Quantity.Value: "Value returns the unscaled value of q rounded up to the nearest integer away from 0" (so
"500m" is 1 CPU, "1.5" is 2, "100m" is 1).
"""

from __future__ import annotations

import math
from fractions import Fraction

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SUFFIX_CHARS = "eEinumkKMGTP"
_MAX_ALLOWED = 2**63 - 1  # quantity.go maxAllowed (math.MaxInt64), the BinarySI cap
_NANO = Fraction(1, 10**9)
_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _split(text: str) -> tuple[bool, str, str, str]:
    """quantity.go parseQuantityString: (positive, numerator digits, denominator digits, suffix)."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":  # strip leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:  # a non-digit after the suffix: ErrFormatWrong
        raise ValueError(f"{_FORMAT_WRONG}: {text!r}")
    return positive, num, denom, text[suffix_start:end]


def _multiplier(suffix: str, text: str) -> tuple[Fraction, bool]:
    """suffix.go suffixHandler.interpret: (the factor, whether the format is BinarySI)."""
    if suffix in _BINARY:
        return Fraction(2) ** _BINARY[suffix], True
    if suffix in _DECIMAL:
        return Fraction(10) ** _DECIMAL[suffix], False
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:])
        except ValueError:
            pass
        else:
            return Fraction(10) ** exponent, False
    raise ValueError(f"unable to parse quantity's suffix: {text!r}")


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact amount a quantity string stands for (k8s apimachinery resource.ParseQuantity).

    Non-integral nano amounts round up away from zero (ParseQuantity rounds to Nano with inf.RoundUp); binary
    amounts above 2^63-1 are capped. Raises ValueError where ParseQuantity returns an error.
    """
    text = str(value).strip() if not isinstance(value, str) else value
    if not text:
        raise ValueError(_FORMAT_WRONG)
    positive, num, denom, suffix = _split(text)
    factor, binary = _multiplier(suffix, text)
    amount = (Fraction(int(num)) + (Fraction(int(denom), 10 ** len(denom)) if denom else 0)) * factor
    if amount and amount.denominator != 1 and (amount / _NANO).denominator != 1:
        amount = math.ceil(amount / _NANO) * _NANO
    if binary and amount > _MAX_ALLOWED:
        amount = Fraction(_MAX_ALLOWED)
    return amount if positive else -amount


def quantity_value(value: str | int | float) -> int:
    """k8s apimachinery resource Quantity.Value(): the amount rounded up to the nearest integer away from 0."""
    amount = parse_quantity(value)
    return math.ceil(amount) if amount >= 0 else -math.ceil(-amount)
