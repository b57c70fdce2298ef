"""MkDocs hook: the reference pages generated at build time, so they cannot drift from the code.

- `<!-- cli-reference -->` (docs/cli.md) becomes every command of `tuner.cli.build_parser()`, subcommands of
  subcommands included (`tuner run <workload>`): usage, help and a table of arguments.
- `<!-- space-schema -->` (docs/space-format.md) becomes a table of every key of the space's JSON schema,
  nested keys included: type, whether it is required, description, allowed values, default.
- `<!-- tuner-init NAME -->` (docs/tutorial.md) becomes the files `tuner init NAME` writes, run in a scratch
  folder, so the tutorial shows the real scaffold.

Registered in mkdocs.yml under `hooks:`. The project (and its dependencies) must be importable: an
editable install, or PYTHONPATH pointing at the repository. A failure to import is an error, not an
empty page."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import re
import sys
import tempfile
from pathlib import Path

from mkdocs.exceptions import PluginError

CLI_MARK = "<!-- cli-reference -->"
SCHEMA_MARK = "<!-- space-schema -->"
INIT_MARK = re.compile(r"<!-- tuner-init ([a-z][a-z0-9_-]*) -->")
API_MARK = "<!-- python-api -->"
log = logging.getLogger("mkdocs.hooks.reference")
REPO_ROOT = Path(__file__).resolve().parents[2]
WIDTH = 100  # the usage lines' width, fixed so that the page does not depend on the terminal of the build


def _ensure_importable() -> None:
    """The repository itself, after anything installed (an installed copy of the project wins)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.append(str(REPO_ROOT))


def load_parser() -> argparse.ArgumentParser:
    """The CLI's parser, with every workload's `tuner run` program. The one place that imports the CLI."""
    _ensure_importable()
    try:
        from tuner.cli import build_parser
    except Exception as e:  # noqa: BLE001  (whatever the import raised: said in one line, with the cause)
        raise PluginError(f"docs/hooks/reference.py: cannot import tuner.cli.build_parser ({type(e).__name__}: {e}); "
                          "install the project (pip install -e .) or set PYTHONPATH to the repository") from e
    return build_parser(run_programs=True)


def load_schema() -> tuple[dict, str]:
    """The space's JSON schema and the path it was read from, relative to the repository."""
    _ensure_importable()
    from importlib.resources import files

    candidates = (("tuner.space", "space.schema.json"), ("tuner", "schema/space.schema.json"))
    tried = []
    for package, name in candidates:
        location = f"{package.replace('.', '/')}/{name}"
        try:
            resource = files(package).joinpath(name)
            if resource.is_file():
                return json.loads(resource.read_text(encoding="utf-8")), location
            tried.append(f"{location}: not found")
        except Exception as e:  # noqa: BLE001  (a package that cannot be imported: said, then the next place)
            tried.append(f"{location}: {type(e).__name__}: {e}")
    raise PluginError("docs/hooks/reference.py: no space schema found (" + "; ".join(tried) + ")")


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference(load_parser()))
    if SCHEMA_MARK in markdown:
        schema, location = load_schema()
        markdown = markdown.replace(SCHEMA_MARK, schema_reference(schema, location))
    markdown = INIT_MARK.sub(lambda m: init_scaffold(m.group(1)), markdown)
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_reference())
    return markdown


def api_reference() -> str:
    """`tuner.__all__`: each name's signature and docstring, from the code."""
    import inspect

    _ensure_importable()
    import tuner

    out = []
    for name in tuner.__all__:
        obj = getattr(tuner, name)
        kind = "class" if inspect.isclass(obj) else "function"
        signature = "" if inspect.isclass(obj) and issubclass(obj, Exception) else str(inspect.signature(obj))
        out.append(f"### `tuner.{name}`\n\n```python\n{kind} {name}{signature}\n```\n\n"
                   + inspect.cleandoc(obj.__doc__ or "(no docstring)") + "\n")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# the tutorial's scaffold: what `tuner init NAME` really writes

def init_scaffold(name: str) -> str:
    """The files `tuner init NAME` writes, run in a scratch folder, as code blocks. Where the installed CLI has
    no `init` command yet, nothing (the tutorial's prose stands alone) and a line in the build's log."""
    parser = load_parser()
    if not any("init" in action.choices for action in _subparser_actions(parser)):
        log.info("docs/hooks/reference.py: this version of the CLI has no `tuner init`; the tutorial is built "
                 "without the scaffold's files")
        return ""
    from tuner.cli import main

    saved_env = {k: os.environ.pop(k) for k in ("TUNER_WORKLOADS", "TUNER_RESULTS") if k in os.environ}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="tuner-docs-init-") as scratch:
        output = io.StringIO()
        try:
            os.chdir(scratch)
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                try:
                    code = main(["init", name])
                except SystemExit as e:
                    code = e.code
        finally:
            os.chdir(cwd)
            os.environ.update(saved_env)
        folder = Path(scratch) / "workloads" / name
        written = sorted((p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts),
                         key=lambda p: (p.name != "space.yaml", p.as_posix())) if folder.is_dir() else []
        if code not in (0, None) or not written:
            raise PluginError(f"docs/hooks/reference.py: `tuner init {name}` failed (exit {code}) or wrote nothing "
                              f"under workloads/{name}: {output.getvalue().strip()[-500:]}")
        out = [f"What `tuner init {name}` writes (generated when this site was built):", ""]
        for path in written:
            text = path.read_text(encoding="utf-8", errors="replace").rstrip("\n")
            fence = "~~~~" if "```" in text else "```"
            lang = {".yaml": "yaml", ".yml": "yaml", ".cu": "cuda", ".cuh": "cuda", ".py": "python",
                    ".toml": "toml", ".json": "json"}.get(path.suffix, "text")
            out += [f"`workloads/{name}/{path.relative_to(folder).as_posix()}`:", "", f"{fence}{lang}", text, fence, ""]
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# markdown helpers

def _cell(text) -> str:
    """Text for a table cell: one line; outside `code spans`, HTML's <, > and & and markdown's | and * escaped."""
    text = " ".join(str(text).split())
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # a code span: pipes still split a row
            out.append(part.replace("|", "\\|"))
        else:
            out.append(part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                       .replace("|", "\\|").replace("*", "\\*"))
    return "".join(out)


def _code(text) -> str:
    text = str(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# ---------------------------------------------------------------------------------------------------------
# the CLI

def _fixed_width(parser: argparse.ArgumentParser) -> None:
    cls = parser.formatter_class
    parser.formatter_class = lambda prog, cls=cls: cls(prog, width=WIDTH, max_help_position=32)


def _subparser_actions(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _subcommands(action: argparse._SubParsersAction):
    """(name, aliases, help, parser) of each visible subcommand, in the order they were added."""
    helps = {choice.dest: choice.help for choice in action._choices_actions}
    seen: dict[int, list] = {}
    for name, sub in action.choices.items():
        if id(sub) in seen:
            seen[id(sub)][1].append(name)
            continue
        seen[id(sub)] = [name, [], helps.get(name), sub]
    return [tuple(v) for v in seen.values() if v[2] != argparse.SUPPRESS]


def _argument_name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return names
        metavar = action.metavar or action.dest.upper()
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        shape = {"?": f"[{metavar}]", "*": f"[{metavar} ...]", "+": f"{metavar} [{metavar} ...]"}
        return f"{names} {shape.get(action.nargs, metavar)}"
    name = action.metavar or action.dest
    return {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}.get(action.nargs, name)


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        text = formatter._expand_help(action) if action.help else ""
        extra = []
        if isinstance(action, (argparse._AppendAction, argparse._AppendConstAction)):
            extra.append("may be given more than once")
        if action.choices is not None and not isinstance(action.choices, dict):
            extra.append("choices: " + ", ".join(_code(c) for c in action.choices))
        default = action.default
        if (action.option_strings and action.nargs != 0 and default not in (None, argparse.SUPPRESS)
                and "default" not in (action.help or "")):
            extra.append(f"default: {_code(default)}")
        if action.required and action.option_strings:
            extra.append("required")
        help_text = _cell(text)
        if extra:
            help_text = (help_text + ("<br>" if help_text else "") + "; ".join(extra)).strip()
        rows.append(f"| {_code(_argument_name(action))} | {help_text} |")
    return rows


def _command_section(parser: argparse.ArgumentParser, path: list[str], help_text: str | None, aliases: list[str],
                     level: int) -> list[str]:
    _fixed_width(parser)
    title = " ".join(path)
    out = [f"{'#' * min(level, 6)} {title} {{#{_slug(title)}}}", ""]
    if help_text:
        out += [_cell(help_text[0].upper() + help_text[1:]) + ("" if help_text.endswith(".") else "."), ""]
    if parser.description and parser.description != help_text:
        out += [_cell(parser.description), ""]
    if aliases:
        out += ["Also called " + ", ".join(_code(a) for a in aliases) + ".", ""]
    usage = parser.format_usage().strip()
    out += ["```text", usage, "```", ""]
    rows = _argument_rows(parser)
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    if parser.epilog:
        out += [_cell(parser.epilog), ""]
    for action in _subparser_actions(parser):
        commands = _subcommands(action)
        if not commands:
            continue
        out += [f"{_code(title)} takes one of: " + ", ".join(
            f"[{_code(name)}](#{_slug(title + ' ' + name)})" for name, *_ in commands) + ".", ""]
        for name, more, sub_help, sub in commands:
            out += _command_section(sub, path + [name], sub_help, more, level + 1)
    return out


def cli_reference(parser: argparse.ArgumentParser) -> str:
    _fixed_width(parser)
    prog = parser.prog
    out = []
    if parser.description:
        out += [_cell(parser.description), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _argument_rows(parser)
    if rows:
        out += ["Options of every command (before the command's name):", "", "| argument | meaning |", "|---|---|",
                *rows, ""]
    for action in _subparser_actions(parser):
        commands = _subcommands(action)
        out += ["| command | what it does |", "|---|---|"]
        out += [f"| [{_code(prog + ' ' + name)}](#{_slug(prog + ' ' + name)}) | {_cell(h or '')} |"
                for name, _, h, _ in commands]
        out += [""]
        for name, more, sub_help, sub in commands:
            out += _command_section(sub, [prog, name], sub_help, more, 2)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# the space schema

def _resolve(node, root: dict):
    """A schema node with local `$ref`s (#/$defs/..., #/definitions/...) followed."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node and node["$ref"].startswith("#/") and node["$ref"] not in seen:
        seen.add(node["$ref"])
        target = root
        for part in node["$ref"][2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _type(node, root: dict) -> str:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return "any"
    if "const" in node:
        return f"constant {_code(json.dumps(node['const']))}"
    if "enum" in node and "type" not in node:
        kinds = sorted({type(v).__name__ for v in node["enum"]})
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(kinds[0], "value") \
            if len(kinds) == 1 else "value"
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(dict.fromkeys(_type(alt, root) for alt in node[key]))
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if "integer" in kinds and "number" in kinds:  # every integer is a number
        kinds = [k for k in kinds if k != "integer"]
    names = []
    for k in kinds:
        if k == "array":
            items = node.get("items")
            names.append(f"list of {_type(items, root)}" if isinstance(items, dict) else "list")
        elif k == "object" and isinstance(node.get("additionalProperties"), dict) and not node.get("properties"):
            names.append(f"map of name to {_type(node['additionalProperties'], root)}")
        else:
            names.append(k)
    if not names:
        if "properties" in node or "additionalProperties" in node:
            return "object"
        return "any"
    return " or ".join(names)


def _constraints(node, root: dict) -> str:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return ""
    parts = []
    if "enum" in node:
        parts.append("one of " + ", ".join(_code(json.dumps(v) if not isinstance(v, str) else v) for v in node["enum"]))
    for key, label in (("pattern", "matches"), ("format", "format")):
        if key in node:
            parts.append(f"{label} {_code(node[key])}")
    for key, label in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in node:
            parts.append(f"{label} {node[key]}")
    for key, word, one, many in (("minLength", "at least", "character", "characters"),
                                 ("maxLength", "at most", "character", "characters"),
                                 ("minItems", "at least", "item", "items"), ("maxItems", "at most", "item", "items"),
                                 ("minProperties", "at least", "entry", "entries"),
                                 ("maxProperties", "at most", "entry", "entries")):
        if key in node:
            n = node[key]
            parts.append("not empty" if key.startswith("min") and n == 1 else f"{word} {n} {one if n == 1 else many}")
    if node.get("uniqueItems"):
        parts.append("no duplicates")
    names = node.get("propertyNames")
    if isinstance(names, dict):
        names = _resolve(names, root)
        if "pattern" in names:
            parts.append(f"names match {_code(names['pattern'])}")
        if "enum" in names:
            parts.append("names: " + ", ".join(_code(v) for v in names["enum"]))
    items = node.get("items")
    if isinstance(items, dict) and node.get("type") == "array" and not _has_own_row(items, root):
        inner = _constraints(items, root)
        if inner:
            parts.append(f"each item: {inner}")
    if node.get("additionalProperties") is False and node.get("properties"):
        parts.append("no other keys")
    return "; ".join(parts)


def _has_own_row(node, root: dict) -> bool:
    """A list's items that get rows of their own (`path[]`): objects with keys or maps."""
    node = _resolve(node, root)
    return isinstance(node, dict) and bool(node.get("properties") or isinstance(node.get("additionalProperties"), dict))


def _adds_nothing(node, root: dict) -> bool:
    """A map's entry that its parent's row already says all of: a plain type, no description or limits."""
    node = _resolve(node, root)
    return (isinstance(node, dict) and not node.get("description") and "default" not in node
            and not _constraints(node, root) and not node.get("properties")
            and not isinstance(node.get("additionalProperties"), dict) and not isinstance(node.get("items"), dict))


def _rows(node, root: dict, path: str, required: bool, depth: int, out: list) -> None:
    node = _resolve(node, root)
    if not isinstance(node, dict) or depth > 12:
        return
    description = node.get("description") or node.get("title") or ""
    default = f"{_code(json.dumps(node['default']))}" if "default" in node else ""
    out.append(f"| {_code(path)} | {_cell(_type(node, root))} | {'yes' if required else ''} | {_cell(description)} | "
               f"{_cell(_constraints(node, root))} | {default} |")
    _children(node, root, path, depth, out)


def _children(node, root: dict, path: str, depth: int, out: list) -> None:
    required = set(node.get("required", []))
    for name, sub in (node.get("properties") or {}).items():
        _rows(sub, root, f"{path}.{name}" if path else name, name in required, depth + 1, out)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and not _adds_nothing(extra, root):  # a map: its entries' own row, then theirs
        _rows(extra, root, f"{path}.<name>", False, depth + 1, out)
    for key, pattern_node in (node.get("patternProperties") or {}).items():
        _rows(pattern_node, root, f"{path}.<{key}>", False, depth + 1, out)
    items = node.get("items")
    if isinstance(items, dict) and _has_own_row(items, root):
        _rows(items, root, f"{path}[]", False, depth + 1, out)
    for key in ("oneOf", "anyOf", "allOf"):
        for alt in node.get(key, []):
            alt = _resolve(alt, root)
            if isinstance(alt, dict) and alt.get("properties"):
                _children(alt, root, path, depth + 1, out)


def schema_reference(schema: dict, location: str) -> str:
    out = [f"Generated from `{location}` when this site was built."]
    if schema.get("title"):
        out += ["", f"*{_cell(schema['title'])}*"]
    if schema.get("description"):
        out += ["", _cell(schema["description"])]
    top = _resolve(schema, schema)
    required = top.get("required", [])
    if required:
        out += ["", "Required keys: " + ", ".join(_code(k) for k in required) + "."]
    if top.get("additionalProperties") is False:
        out += ["", "Any other top-level key is an error."]
    rows: list[str] = []
    _children(top, schema, "", 0, rows)
    out += ["", "`<name>` stands for a key of the user's choosing (a parameter's name, a size's name, ...); "
            "`[]` for each item of a list.", "",
            "| key | type | required | description | allowed values | default |", "|---|---|---|---|---|---|",
            *rows]
    return "\n".join(out) + "\n"
