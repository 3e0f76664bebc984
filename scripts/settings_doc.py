"""The configuration reference, generated from :class:`kemem_es.config.Settings`.

``python scripts/settings_doc.py`` prints the Markdown table; the docs site puts it into
``docs/configuration.md`` at build time (``scripts/mkdocs_hooks.py``). Each row is one setting:
its environment variable, type, default and the field's ``description``. Nested groups (a field
whose type is itself a pydantic model) are walked; their variables join the names with the
settings' ``env_nested_delimiter``.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parent.parent

# Fields the model does not describe yet: their meaning, by variable. A description on the
# field itself wins; a setting with neither is listed with a dash, and --check fails on it.
FALLBACK = {
    "KEMEM_ENGINE_HEAP": "local node's JVM heap (-Xms/-Xmx)",
    "KEMEM_ES_USERNAME": "basic auth user (or credentials in KEMEM_ES_URL)",
    "KEMEM_ES_PASSWORD": "basic auth password",
    "KEMEM_ES_API_KEY": "API key (base64 id:key)",
    "KEMEM_ES_CA_CERTS": "CA bundle for TLS",
    "KEMEM_ES_VERIFY_CERTS": "verify the cluster's TLS certificate",
    "KEMEM_DIALECT": "elasticsearch / opensearch to skip detection",
    "KEMEM_INDEX_PREFIX": "indices are {prefix}-{user|official}-{events|entities} and "
    "{prefix}-history; at most 200 characters",
    "KEMEM_MODEL_DIR": "local ONNX model directory (model_int8.onnx / model.onnx + tokenizer.json)",
    "KEMEM_MODEL": "a hub model id with ONNX weights (downloaded with huggingface_hub)",
    "KEMEM_MODEL_VARIANT": "int8 or fp32 weights",
    "KEMEM_EMBED_BATCH": "texts per model run for fp32 (int8 embeds each text alone)",
    "KEMEM_EMBED_MAX_LENGTH": "the model's window in tokens; a longer text is embedded in "
    "windows and averaged, never cut",
    "KEMEM_CLEANUP_INACTIVE_DAYS": "days without activity before a user is trimmed",
    "KEMEM_LLM_MODEL": "the extractor's model name",
}


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(names) + (" \\| unset" if type(None) in args else "")
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return " \\| ".join(f"`{m.value}`" for m in annotation)
        return {"str": "text", "Path": "path"}.get(annotation.__name__, annotation.__name__)
    return str(annotation)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, BaseModel):
        return "(group)"
    text = str(value)
    return f"`{text}`" if text != "" else '`""`'


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def rows(model: type[BaseModel] | None = None, prefix: str | None = None) -> list[tuple[str, ...]]:
    """(variable, type, default, description) of every setting, groups walked in order."""
    from kemem_es.config import Settings

    model = model or Settings
    config = Settings.model_config
    delimiter = config.get("env_nested_delimiter") or "__"
    if prefix is None:
        prefix = str(config.get("env_prefix") or "")
    out: list[tuple[str, ...]] = []
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else None
        variable = (alias or f"{prefix}{name}").upper()
        if _is_group(field.annotation):
            out.extend(rows(field.annotation, f"{variable}{delimiter}"))
            continue
        description = (field.description or FALLBACK.get(variable, "–")).replace("|", "\\|")
        out.append((f"`{variable}`", _type_name(field.annotation), _default(field), description))
    return out


def markdown() -> str:
    lines = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if "--check" in argv:
        missing = [row[0] for row in rows() if row[3] == "–"]
        if missing:
            print("settings without a description:", ", ".join(missing), file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
