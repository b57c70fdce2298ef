"""The reference of an imported T1 file (its ReferenceArguments as expressions, else a trusted config of
the kernel), and the check that the document made is a valid space."""

from __future__ import annotations

import jsonschema

from tuner.errors import TunerError
from tuner.space.declaration import check_declaration
from tuner.space.document import space_schema
from tuner.space.errors import one_of
from tuner.space.expressions import Expression
from tuner.workloads.declared import first_valid_config
from tuner.workloads.t1.file import T1File


def reference_of(t1: T1File, outputs: list, params: dict, restrictions: list, notes: list) -> tuple[dict, dict]:
    """The `reference` and `verify` of the document (`notes`, for its description, gain what was inferred)."""
    refs = t1.spec.get("ReferenceArguments") or []
    if refs:
        expressions: dict[str, str] = {}
        verify: dict[str, float] = {}
        for j, r in enumerate(refs):
            at = ["KernelSpecification", "ReferenceArguments", j]
            if r["TargetName"] not in outputs:
                t1.fail(
                    [*at, "TargetName"],
                    f"'{r['TargetName']}' is not an output argument; outputs: {', '.join(outputs) or 'none'}",
                )
            if r["FillType"] != "Constant" or not isinstance(r.get("FillValue"), (int, float)):
                t1.fail([*at, "FillType"], "only a Constant reference (with a FillValue) is supported")
            expressions[r["TargetName"]] = str(r["FillValue"])
            if "ValidationThreshold" in r:
                relative = r.get("ValidationMethod") == "SideBySideRelativeComparison"
                key, other = ("rtol", "atol") if relative else ("atol", "rtol")
                verify[key] = max(verify.get(key, 0), float(r["ValidationThreshold"]))
                verify.setdefault(other, 0.0)
        missing = [o for o in outputs if o not in expressions]
        if missing:
            t1.fail(["KernelSpecification", "ReferenceArguments"], f"no reference for output(s) {', '.join(missing)}")
        return {"expression": expressions}, verify
    if not outputs:
        notes.append("No argument is an output, so results are not checked.")
        return {}, {}
    # a bool Default as the parameter's values hold it (0 and 1: the importer's parameters()); else the value
    defaults = {
        p["Name"]: int(p["Default"]) if isinstance(p.get("Default"), bool) else p.get("Default")
        for p in t1.doc["ConfigurationSpace"]["TuningParameters"]
    }
    config = None
    if all(one_of(defaults.get(k), v) for k, v in params.items()):
        candidate = {k: defaults[k] for k in params}
        if all(bool(Expression(r)(candidate)) for r in restrictions):
            config, which = candidate, "the file's Default values"
    if config is None:
        config, which = first_valid_config(params, restrictions), "the first valid config"
    if config is None:
        t1.fail(["ConfigurationSpace"], "no configuration meets every condition")
    notes.append(
        f"The file gives no reference: outputs ({', '.join(outputs)}) are checked against the "
        f"kernel's own output with {which}, run once on the GPU. That config is trusted, not checked: "
        "replace it with reference.expression or reference.kernel where you can."
    )
    return {"config": config}, {}


def check_document(t1: T1File, doc: dict, size_vars: set) -> None:
    """The document is a valid space (our schema, the declaration checks): a failure here is a T1 file
    this import reads wrongly, said as such rather than left for the loader."""
    errors = list(jsonschema.Draft202012Validator(space_schema()).iter_errors(doc))
    if errors:
        e = jsonschema.exceptions.best_match(errors)
        where = ".".join(map(str, e.absolute_path))
        t1.fail([], f"cannot be imported: the space it makes is invalid at {where}: {e.message}")
    try:
        check_declaration(doc, t1.path, set(size_vars), set(doc["parameters"]), list(doc["dtypes"]))
    except TunerError as e:
        t1.fail([], f"cannot be imported: the space it makes is invalid ({e})")
