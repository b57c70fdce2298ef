"""A space file as a document: YAML read strictly (a key given twice is refused), checked against the JSON
schema (tuner/space/space.schema.json), and the errors of both in words, one line each naming the file and the
key path. What a schema cannot say is checked next, by tuner.space.loader."""

from __future__ import annotations

import difflib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, cast

import jsonschema
import yaml

try:
    from yaml import CSafeLoader as _FastSafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _FastSafeLoader  # type: ignore[assignment]

from tuner.errors import TunerError
from tuner.space.errors import SpaceError


def space_schema() -> dict:
    """The space format's JSON schema (space.schema.json)."""
    return json.loads(resources.files("tuner.space").joinpath("space.schema.json").read_text())


# documents parsed by declared_workload, by their file's text (an edited file is parsed again), until
# read_document takes them
_PARSED_AHEAD: dict[str, Any] = {}
_AHEAD_KEPT = 16
_NONE = object()  # no document parsed ahead (None is an empty file's)


def read_document(path: Path) -> dict:
    """The space file's document, valid by the schema."""
    try:
        text = path.read_text()
        doc = _PARSED_AHEAD.pop(text, _NONE)  # parsed by declared_workload, as the registry found the workload
        if doc is _NONE:
            doc = parse_yaml(text)
    except FileNotFoundError:
        raise TunerError(f"{path}: no such space file") from None
    except UnicodeDecodeError:
        raise TunerError(f"{path}: not a text file (UTF-8)") from None
    except OSError as e:
        raise TunerError(f"{path}: cannot read the space file: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise TunerError(f"{path}: not valid YAML {_yaml_problem(e)}") from None
    if not isinstance(doc, dict):
        raise SpaceError(path, [], "expected a mapping of keys (workload, kernel, parameters, ...)")
    errors = sorted(
        jsonschema.Draft202012Validator(space_schema()).iter_errors(doc), key=lambda e: list(e.absolute_path)
    )
    if errors:
        worst = _worst(errors)
        raise SpaceError(path, list(worst.absolute_path), explain_schema_error(worst))
    return doc


def parse_yaml(text: str) -> Any:
    """`text` as YAML, read strictly (a key given twice in one mapping is refused): by libyaml's parser where
    PyYAML has it (about a tenth of the pure-Python parser's time: a listing's 16 parses of the built-ins' spaces
    took 0.35 s), and where that fails by PyYAML's own, whose errors say the token it found (_yaml_problem puts
    them in words; libyaml's name none). Both build the document with the same constructor and resolver, so
    the same values."""
    try:
        return yaml.load(text, Loader=_StrictFastLoader)
    except yaml.YAMLError:
        return yaml.load(text, Loader=_StrictLoader)  # its error in those words (or what libyaml alone refused)


def declared_workload(path: Path) -> str | None:
    """The `workload:` key of the space file at `path`; None where it says none, or the file cannot be read or
    parsed (read_document says why). Its document is kept for read_document, once: a space is parsed once,
    and no two readers share one document (each may change its own)."""
    try:
        text = path.read_text()
        doc = parse_yaml(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    while len(_PARSED_AHEAD) >= _AHEAD_KEPT:  # spaces whose workload was found but never loaded: the oldest go
        _PARSED_AHEAD.pop(next(iter(_PARSED_AHEAD)), None)
    _PARSED_AHEAD[text] = doc
    declared = doc.get("workload") if isinstance(doc, dict) else None
    return declared if isinstance(declared, str) else None


class _RefusesKeyTwice(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor, refusing a key given twice in one mapping (YAML's rule, which PyYAML does not
    enforce: the last would silently win, and a space would lose half its configs without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key '{key}' is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_RefusesKeyTwice, yaml.SafeLoader):
    """PyYAML's safe loader (its pure-Python parser), strict."""


class _StrictFastLoader(_RefusesKeyTwice, _FastSafeLoader):
    """libyaml's parser with PyYAML's safe constructor (yaml.CSafeLoader), strict."""


# PyYAML's contexts that open something the problem found later did not close: the mistake is where it opened
# (a `[` without its `]` is noticed lines further down, at the next key)
_OPENED = {
    "while parsing a flow sequence": "the list opened with '[' here is not closed",
    "while parsing a flow mapping": "the mapping opened with '{' here is not closed",
    "while scanning a quoted scalar": "the quoted text opened here is not closed",
    "while scanning a simple key": "this key has no ':' after it",
}
# PyYAML's tokens, as its messages name them ("but got '?'"), in words
_TOKENS = {
    "?": "a key",
    "<scalar>": "a value",
    "<block end>": "the end of an indented block",
    "<block mapping start>": "an indented mapping",
    "<block sequence start>": "an indented list",
    "<block entry>": "a list item ('-')",
    "<stream end>": "the end of the file",
    "<document start>": "'---'",
    "<document end>": "'...'",
    "<alias>": "an alias (*name)",
    "<anchor>": "an anchor (&name)",
    "<tag>": "a tag (!name)",
}


def _yaml_problem(e: yaml.YAMLError) -> str:
    """Where and what a YAML error is, in words: "(line 16, column 8): the list opened with '[' here is not
    closed: expected ',' or ']', but got a key at line 20, column 1"."""
    problem_mark, context_mark = getattr(e, "problem_mark", None), getattr(e, "context_mark", None)
    problem = " ".join(str(getattr(e, "problem", None) or e).split())  # one line
    if problem.startswith("expected <block end>"):  # a line indented unlike the block it is in
        problem = "this line is indented unlike the lines above it (a key, or a '-' item, out of line)"
    problem = re.sub(r"'(\?|<[a-z ]+>)'|(<[a-z ]+>)", lambda m: _TOKENS.get(m[1] or m[2], m[0]), problem)
    opened = _OPENED.get(str(getattr(e, "context", None)))
    if opened and context_mark is not None and problem_mark is not None:
        return f"({_at(context_mark)}): {opened}: {problem} at {_at(problem_mark)}"
    return f"({_at(problem_mark)}): {problem}" if problem_mark is not None else f": {problem}"


def _at(mark: yaml.Mark) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _worst(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    """The schema error to report: a parameter's values of mixed kinds as such (best_match would pick one branch
    of the anyOf); an unknown key rather than a missing one of the same mapping (a mistyped `src:` is why
    `source` is missing, and the unknown key's error suggests the right name); else jsonschema's best match."""
    mixed = next((e for e in errors if e.validator == "anyOf"), None)
    if mixed is not None:
        return mixed
    best = jsonschema.exceptions.best_match(errors)
    if best.validator != "required":
        return best
    unknown = (e for e in errors if e.validator == "additionalProperties" and e.absolute_path == best.absolute_path)
    return next(unknown, best)


IDENTIFIER = "^[A-Za-z_][A-Za-z0-9_]*$"  # the schema's pattern of a name that is a C identifier
_NO_BOOLEANS = (
    "use 0 and 1: a boolean would reach the kernel as `#define {name} True` (Python's spelling), which C reads "
    "as 0 in #if and as an undefined name in code (true is not 1); got {got!r}"
)


def explain_schema_error(e: jsonschema.ValidationError) -> str:
    """Say what was expected in words, not in schema jargon."""
    v, expected, instance, schema = (
        e.validator,
        cast(Any, e.validator_value),
        cast(Any, e.instance),
        cast(Any, e.schema),
    )
    if v == "anyOf" and len(e.absolute_path) == 2 and e.absolute_path[0] in ("parameters", "defaults"):
        given = e.instance if isinstance(e.instance, list) else [e.instance]
        if any(isinstance(x, bool) for x in given):
            return _NO_BOOLEANS.format(name=e.absolute_path[1], got=e.instance)
        return f"values must be all numbers (64-bit) or all names (text, a C token such as float); got {e.instance!r}"
    if v == "type" and isinstance(e.instance, bool) and list(e.absolute_path)[:2] == ["reference", "config"]:
        return _NO_BOOLEANS.format(name=e.absolute_path[-1], got=e.instance)
    if v in ("maximum", "minimum"):
        return f"{e.instance!r} is out of range ({'at most' if v == 'maximum' else 'at least'} {expected})"
    if v == "required":
        return f"missing key {e.message.split(' ')[0]}"
    if v == "additionalProperties" and isinstance(instance, dict):
        known = list(schema.get("properties", {}))
        key = next((str(k) for k in instance if k not in known), "?")
        close = difflib.get_close_matches(key, known, n=1)
        return f"unknown key '{key}' (known: {', '.join(known)})" + (f"; did you mean '{close[0]}'?" if close else "")
    if v == "type":
        return f"expected {expected if isinstance(expected, str) else ' or '.join(expected)}, got {e.instance!r}"
    if v == "enum":
        return f"expected one of {', '.join(map(str, expected))}, got {e.instance!r}"
    if v == "minItems":
        return "expected a non-empty list"
    if v == "maxItems":
        return f"expected at most {expected} entries, got {len(instance)}"
    if v == "uniqueItems":
        return f"values must be unique, got {e.instance!r}"
    if v == "pattern" and expected == IDENTIFIER:
        return f"{e.instance!r} is not a C identifier (letters, digits and _, not starting with a digit)"
    if v == "pattern":
        return f"{e.instance!r} is not a valid name (expected to match {e.validator_value})"
    return e.message
