"""CRD `x-kubernetes-validations` rules, compiled once with cel-python and evaluated with `self` bound.

cel-python implements standard CEL (has/all/exists/exists_one/map/filter, size, matches, startsWith,
endsWith, contains, int(), ...). Added here from the Kubernetes libraries: strings `split`, `lowerAscii`,
`upperAscii`; regex `find`, `findAll`; and `int()` parses strings as Go does. Nothing passes silently: a rule
that calls a function nobody implements, fails to parse, or trips over a cel-python limitation yields a
"could not be evaluated" message instead of a verdict.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions


def _split(text: celtypes.StringType, separator: celtypes.StringType, limit: int = -1) -> celtypes.ListType:
    # CEL's limit counts the pieces (0: none, negative: all); Python's counts the splits.
    if limit == 0:
        return celtypes.ListType([])
    pieces = text.split(separator) if limit < 0 else text.split(separator, int(limit) - 1)
    return celtypes.ListType([celtypes.StringType(p) for p in pieces])


def _find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    match = re2.search(pattern, text)
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(text: celtypes.StringType, pattern: celtypes.StringType, limit: int = -1) -> celtypes.ListType:
    found = [celtypes.StringType(m.group(0)) for m in re2.finditer(pattern, text)]
    return celtypes.ListType(found if limit < 0 else found[: int(limit)])


# Only ASCII letters change case, as in Kubernetes' strings library; str.lower() would also fold 'É'.
_TO_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_TO_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)


def _lower_ascii(text: celtypes.StringType) -> celtypes.StringType:
    return celtypes.StringType(text.translate(_TO_LOWER))


def _upper_ascii(text: celtypes.StringType) -> celtypes.StringType:
    return celtypes.StringType(text.translate(_TO_UPPER))


_GO_DECIMAL_INT = re.compile(r"[+-]?[0-9]+")


def _int(value: Any) -> Any:
    """CEL's int(): a string must be what Go's strconv.ParseInt(s, 10, 64) takes. Python's int() would
    also take ' 5', '1_000' and non-ASCII digits, which the API server rejects."""
    if isinstance(value, str) and not _GO_DECIMAL_INT.fullmatch(value):
        return CELEvalError(f"cannot convert {value!r} to int", ValueError, (value,))
    return celtypes.IntType(value)


KUBERNETES_FUNCTIONS: dict[str, Any] = {
    "int": _int,
    "split": _split,
    "find": _find,
    "findAll": _find_all,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
}
_MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
SUPPORTED_FUNCTIONS = frozenset(base_functions) | frozenset(KUBERNETES_FUNCTIONS) | _MACROS
# Kubernetes escapes property names that are not CEL identifiers (`__dash__`, `__dot__`, `__namespace__`);
# values are handed to cel-python unescaped, so such a rule would misread every object.
_ESCAPED_NAME = re.compile(r"__[a-zA-Z]+__")
_ENVIRONMENT = celpy.Environment()


@dataclass(frozen=True)
class _Compiled:
    program: celpy.Runner | None
    unsupported: str | None  # why the expression cannot be evaluated here
    transition: bool  # refers to oldSelf: only meaningful on update


@functools.cache
def _compile(text: str) -> _Compiled:
    """Parse one expression; identical rule texts (Karpenter repeats many) share one program."""
    try:
        ast = _ENVIRONMENT.compile(text)
    except Exception as exc:  # celpy raises CELParseError and lark errors alike
        return _Compiled(None, f"cel-python cannot parse it: {str(exc).splitlines()[0]}", False)
    called = {_call_name(t) for t in ast.iter_subtrees() if t.data in ("ident_arg", "member_dot_arg")}
    names = ast.scan_values(lambda v: isinstance(v, lark.Token) and v.type == "IDENT")
    transition = "oldSelf" in {str(name) for name in names}
    missing = sorted(called - SUPPORTED_FUNCTIONS)
    if missing:
        return _Compiled(None, f"unsupported function(s) {', '.join(missing)}", transition)
    if _ESCAPED_NAME.search(text):
        return _Compiled(None, "escaped property names (__dash__ etc.) are not supported", transition)
    return _Compiled(_ENVIRONMENT.program(ast, functions=KUBERNETES_FUNCTIONS), None, transition)


def _call_name(tree: lark.Tree) -> str:
    # ident_arg: name(args); member_dot_arg: target.name(args)
    token = tree.children[0] if tree.data == "ident_arg" else tree.children[1]
    return str(token)


@dataclass(frozen=True)
class CelRule:
    """One entry of `x-kubernetes-validations`."""

    rule: str
    message: str | None = None
    message_expression: str | None = None
    field_path: str | None = None
    optional_old_self: bool = False

    @classmethod
    def from_schema(cls, spec: Mapping[str, Any]) -> CelRule:
        return cls(
            rule=spec["rule"],
            message=spec.get("message"),
            message_expression=spec.get("messageExpression"),
            field_path=spec.get("fieldPath"),
            optional_old_self=bool(spec.get("optionalOldSelf", False)),
        )

    @property
    def is_transition(self) -> bool:
        """Rules on oldSelf compare an update with the stored object; a plan only ever creates objects."""
        return _compile(self.rule).transition and not self.optional_old_self

    @property
    def unsupported(self) -> str | None:
        """Why this rule cannot be evaluated here, or None when it can."""
        if self.optional_old_self:
            return "optionalOldSelf rules are not supported"
        return _compile(self.rule).unsupported

    def failure_message(self, value: Any) -> str | None:
        """None when `value` (plain JSON-like data bound to `self`) satisfies the rule, else why not."""
        compiled = _compile(self.rule)
        reason = self.unsupported
        if reason is not None:
            return f"rule could not be evaluated ({reason}): {self.rule}"
        assert compiled.program is not None
        activation = {"self": celpy.json_to_cel(value)}
        try:
            result = compiled.program.evaluate(activation)
        except CELEvalError as err:
            return self._error_message(err)
        except Exception as exc:  # an extension function or cel-python itself failed: not a verdict
            return f"rule could not be evaluated ({type(exc).__name__}: {exc}): {self.rule}"
        if not isinstance(result, bool | celtypes.BoolType):
            return (
                f"rule could not be evaluated (it returned {type(result).__name__}, not a bool): {self.rule}"
            )
        return None if result else self._message(activation)

    def _message(self, activation: Mapping[str, Any]) -> str:
        # Like the API server, fall back to `message` when messageExpression fails: the verdict stands.
        if self.message_expression:
            compiled = _compile(self.message_expression)
            if compiled.program is not None:
                try:
                    text = compiled.program.evaluate(activation)
                except CELEvalError:
                    text = None
                if isinstance(text, str) and text.strip():  # StringType, or str from `+`
                    return str(text)
        return self.message or f"failed rule: {self.rule}"

    def _error_message(self, err: CELEvalError) -> str:
        text = str(err.args[0]).split(" (in activation")[0] if err.args else repr(err)
        cause = err.args[1] if len(err.args) > 1 else None
        if "undeclared reference" in text or cause in (TypeError, NotImplementedError, None):
            # The API server type-checks rules when the CRD is created, so a runtime type error here is
            # cel-python's (e.g. it has no cross-type numeric comparison), not the document's.
            return f"rule could not be evaluated (cel-python: {text}): {self.rule}"
        # Missing keys, bad indexes, unparsable int(): the API server rejects the object with this error.
        return f"{text} evaluating rule: {self.message or f'failed rule: {self.rule}'}"


_CEL_VALUES = (celtypes.MapType, celtypes.ListType, celtypes.BoolType, celtypes.StringType, celtypes.IntType)


def evaluate(expression: str, bindings: Mapping[str, Any]) -> Any:
    """`expression` with names bound to plain JSON-like data, or to CEL values an earlier evaluation returned (an
    admission policy's `object`, `request` and `variables`). Raises ValueError where it cannot be evaluated here
    or fails at run time (the API server then rejects the request: an error is never a pass)."""
    compiled = _compile(expression)
    if compiled.program is None:
        raise ValueError(f"could not be evaluated ({compiled.unsupported}): {expression}")
    activation = {name: value if isinstance(value, _CEL_VALUES) else celpy.json_to_cel(value)
                  for name, value in bindings.items()}
    try:
        result = compiled.program.evaluate(activation)
    except CELEvalError as err:
        raise ValueError(f"{err.args[0] if err.args else err!r} evaluating: {expression}") from None
    if isinstance(result, CELEvalError):
        raise ValueError(f"{result.args[0] if result.args else result!r} evaluating: {expression}")
    return result
